"""Knowledge (RAG) benchmark: retrieval quality, indexing throughput and query latency.

``uv run python benchmarks/knowledge.py [--sizes 10000 100000] [--write-docs]``

- Quality: README.md, docs/guide.md and docs/team.md indexed with MiniLM; the 45 labelled
  questions of ``benchmarks/knowledge_questions.json`` (two thirds paraphrased, one third naming
  an identifier) asked in each mode (hybrid, vectors only, BM25 only). A question is found when
  a result from its source contains its answer's words; recall@5 (with a 95% Wilson interval)
  and MRR@10.
- Indexing: chunks per second for that corpus (loading, chunking, embedding, storing), and
  MiniLM alone.
- Latency: synthetic stores of N chunks (random unit vectors, text drawn from the corpus's
  words) per store; p50/p99 of a vector search, a BM25 search and a hybrid search (both and
  the fusion; the query's embedding, measured apart, is not included), 200 queries each.

Results go to ``.bench-out/knowledge.json``, a plot to ``docs/img/knowledge.png``, and with
``--write-docs`` to the ``knowledge`` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

from agentica.evals import wilson  # noqa: E402
from agentica.knowledge import (  # noqa: E402
    Chunk,
    Knowledge,
    KnowledgeStore,
    LanceKnowledgeStore,
    MiniLM,
    QdrantKnowledgeStore,
    SQLiteKnowledgeStore,
)
from agentica.knowledge.base import fuse  # noqa: E402
from agentica.knowledge.stores import words  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "knowledge_questions.json"
OUT = ROOT / ".bench-out" / "knowledge.json"
PLOT = ROOT / "docs" / "img" / "knowledge.png"
MODES = ("hybrid", "vector", "bm25")
console = Console()


def _normal(text: str) -> str:
    return " ".join(text.split()).lower()


async def quality(folder: Path) -> dict[str, Any]:
    labelled = json.loads(QUESTIONS.read_text())
    embedder = MiniLM()
    await embedder.embed(["warm up"])  # (the model's load is not indexing)
    async with Knowledge(folder / "docs.db", embedder=embedder) as kb:
        started = time.perf_counter()
        report = await kb.add(*(ROOT / p for p in labelled["corpus"]), root=ROOT)
        seconds = time.perf_counter() - started
        chunks = report.chunks
        texts = [f"sample {n} " + "word " * 150 for n in range(64)]
        started = time.perf_counter()
        await embedder.embed(texts)
        embed_rate = len(texts) / (time.perf_counter() - started)
        results: dict[str, Any] = {}
        misses: dict[str, list[str]] = {}
        for mode in MODES:
            found, reciprocal = 0, 0.0
            for item in labelled["questions"]:
                hits = await kb.search(item["question"], 10, mode=mode)
                answer = _normal(item["answer_contains"])
                rank = next(
                    (n for n, h in enumerate(hits, 1)
                     if h.chunk.source == item["source"] and answer in _normal(h.chunk.text)),
                    None,
                )  # fmt: skip
                if rank is not None and rank <= 5:
                    found += 1
                else:
                    misses.setdefault(mode, []).append(item["question"])
                reciprocal += 1.0 / rank if rank is not None else 0.0
            n = len(labelled["questions"])
            low, high = wilson(found, n)
            results[mode] = {"recall5": found / n, "found": found, "n": n, "low": low,
                             "high": high, "mrr10": reciprocal / n}  # fmt: skip
    return {"chunks": chunks, "index_seconds": seconds, "chunks_per_s": chunks / seconds,
            "minilm_texts_per_s": embed_rate, "modes": results, "misses": misses}  # fmt: skip


def _store(kind: str, folder: Path) -> KnowledgeStore:
    if kind == "sqlite":
        return SQLiteKnowledgeStore(folder / "scale.db")
    if kind == "qdrant":
        return QdrantKnowledgeStore(folder / "qdrant")
    return LanceKnowledgeStore(folder / "lance")


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def scale(kind: str, size: int, folder: Path, vocabulary: list[str]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(7)
    picker = random.Random(7)
    store = _store(kind, folder / f"{kind}-{size}")
    await store.open("random-384", 384)
    per_source = 500
    started = time.perf_counter()
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{kind}: {size} chunks", total=size)
        for first in range(0, size, per_source):
            count = min(per_source, size - first)
            vectors = rng.standard_normal((count, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            chunks = [
                Chunk(f"s{first}", n, " ".join(picker.choices(vocabulary, k=150)), "line 1")
                for n in range(count)
            ]
            await store.replace(f"s{first}", "h", chunks, vectors.tolist())
            bar.update(task, advance=count)
    load_seconds = time.perf_counter() - started
    queries = rng.standard_normal((200, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    phrases = [" ".join(picker.choices(vocabulary, k=6)) for _ in range(200)]
    timings: dict[str, list[float]] = {"vector": [], "bm25": [], "hybrid": []}
    for vector, phrase in zip(queries.tolist(), phrases, strict=True):
        t0 = time.perf_counter()
        near = await store.vector_search(vector, 20)
        t1 = time.perf_counter()
        matched = await store.text_search(phrase, 20)
        t2 = time.perf_counter()
        both = await asyncio.gather(store.vector_search(vector, 20), store.text_search(phrase, 20))
        fuse(*both)
        t3 = time.perf_counter()
        assert near, "a vector search always finds something"
        assert matched, "six words of the vocabulary match some chunk"
        timings["vector"].append(t1 - t0)
        timings["bm25"].append(t2 - t1)
        timings["hybrid"].append(t3 - t2)
    await store.aclose()
    return {
        "store": kind, "size": size, "load_chunks_per_s": size / load_seconds,
        **{f"{m}_p50_ms": 1000 * _percentile(t, 0.5) for m, t in timings.items()},
        **{f"{m}_p99_ms": 1000 * _percentile(t, 0.99) for m, t in timings.items()},
    }  # fmt: skip


RESEARCH_QUESTIONS = [
    "How does the team service keep the provider key away from students?",
    "How are per-student budgets set and enforced?",
    "What does a student's computer do when it connects to the server?",
]


async def research_parallel(folder: Path, latency: float = 0.5) -> dict[str, Any]:
    """DeepResearch's orchestration alone: a scripted model answering every call after
    ``latency`` seconds, three sub-questions analysed at once and one at a time."""
    from agentica.deep.research import DeepResearch
    from agentica.knowledge.stores import words as _words
    from agentica.testing import FunctionModel

    class Hashed:
        name, dimensions = "hashed", 64

        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            out = []
            for text in texts:
                vector = [0.0] * 64
                for word in _words(text):
                    vector[hash(word) % 64] += 1.0
                norm = math.sqrt(sum(v * v for v in vector)) or 1.0
                out.append([v / norm for v in vector])
            return out

    async def reply(messages: list[Any], request: Any) -> str:
        await asyncio.sleep(latency)
        system = str(messages[0].content)
        if "You plan" in system:
            return "\n".join(RESEARCH_QUESTIONS)
        if "You write" in system:
            return "# Report\n\nThe findings are cited [1]."
        return "- The documents answer it [1]."

    figures: dict[str, Any] = {"latency_s": latency}
    async with Knowledge(folder / "research.db", embedder=Hashed()) as kb:
        await kb.add(ROOT / "docs" / "team.md", root=ROOT)
        for label, parallel in (("parallel", 3), ("sequential", 1)):
            research = DeepResearch(kb, model=FunctionModel(reply), max_parallel=parallel)
            started = time.perf_counter()
            await research.run("How does the team service work?")
            figures[f"{label}_s"] = time.perf_counter() - started
    return figures


async def research_on_model(model_name: str) -> dict[str, Any]:
    """DeepResearch on a real model over docs/team.md: each question's claims and how many
    cite evidence that exists."""
    from agentica.deep.research import DeepResearch
    from agentica.models import ModelSettings
    from agentica.models.registry import resolve_model

    model = resolve_model(model_name)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with Knowledge(Path(tmp) / "team.db") as kb:
            await kb.add(ROOT / "docs" / "team.md", root=ROOT)
            for question in RESEARCH_QUESTIONS:
                research = DeepResearch(kb, model=model, max_subtasks=2,
                                        model_settings=ModelSettings(temperature=0.0,
                                                                     max_tokens=400))  # fmt: skip
                report = await research.run(question)
                rows.append({"question": question, "claims": report.citations.claims,
                             "cited": report.citations.cited,
                             "invalid": len(report.citations.invalid),
                             "failed_subtasks": sum(1 for r in report.subtasks if r.error),
                             "assembled": any("assembled" in n for n in report.notes),
                             "seconds": report.seconds})  # fmt: skip
                console.print(f"  {question[:50]}: {rows[-1]}")
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()
    return {"model": model_name, "questions": rows}


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = result["quality"]["modes"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    names = list(modes)
    recall = [modes[m]["recall5"] for m in names]
    errors = [[r - modes[m]["low"] for m, r in zip(names, recall, strict=True)],
              [modes[m]["high"] - r for m, r in zip(names, recall, strict=True)]]  # fmt: skip
    axes[0].bar(names, recall, yerr=errors, color=["#4c72b0", "#55a868", "#c44e52"], capsize=4)
    axes[0].set_title("recall@5 (95% Wilson)")
    axes[0].set_ylim(0, 1)
    axes[1].bar(names, [modes[m]["mrr10"] for m in names],
                color=["#4c72b0", "#55a868", "#c44e52"])  # fmt: skip
    axes[1].set_title("MRR@10")
    axes[1].set_ylim(0, 1)
    fig.suptitle(f"{result['quality']['n']} questions over agentica's docs (MiniLM, SQLite)")
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)


def markdown(result: dict[str, Any]) -> str:
    q = result["quality"]
    rows = ["| search | recall@5 | 95% interval | MRR@10 |", "|---|---|---|---|"]
    for mode, m in q["modes"].items():
        rows.append(f"| {mode} | {m['found']}/{m['n']} ({m['recall5']:.0%}) | "
                    f"{m['low']:.0%}-{m['high']:.0%} | {m['mrr10']:.2f} |")  # fmt: skip
    text = "\n".join(rows)
    text += (
        f"\n\nIndexing the corpus ({q['chunks']} chunks): {q['chunks_per_s']:.1f} chunks/s end "
        f"to end; MiniLM alone embeds {q['minilm_texts_per_s']:.1f} chunk-sized texts/s.\n\n"
        "| store | chunks | stored/s | vector p50 / p99 | BM25 p50 / p99 | hybrid p50 / p99 |\n"
        "|---|---|---|---|---|---|\n"
    )
    for s in result["scale"]:
        text += (
            f"| {s['store']} | {s['size']:,} | {s['load_chunks_per_s']:,.0f} | "
            f"{s['vector_p50_ms']:.1f} / {s['vector_p99_ms']:.1f} ms | "
            f"{s['bm25_p50_ms']:.1f} / {s['bm25_p99_ms']:.1f} ms | "
            f"{s['hybrid_p50_ms']:.1f} / {s['hybrid_p99_ms']:.1f} ms |\n"
        )
    text += (
        f"\nA query's embedding (MiniLM, one short text) takes {result['query_embed_ms']:.1f} ms "
        "p50 on top of a hybrid search.\n\n![Recall and MRR per search mode](img/knowledge.png)"
    )
    if "research_parallel" in result:
        r = result["research_parallel"]
        text += (
            f"\n\nDeep research, orchestration alone (a scripted model answering every call after "
            f"{r['latency_s']} s; a plan, 3 sub-questions, a writer): {r['parallel_s']:.2f} s with "
            f"the analyses in parallel, {r['sequential_s']:.2f} s one at a time "
            f"({r['sequential_s'] / r['parallel_s']:.1f}x)."
        )
    if "research_model" in result:
        rows = result["research_model"]["questions"]
        claims = sum(r["claims"] for r in rows)
        cited = sum(r["cited"] for r in rows)
        text += (
            f"\n\nDeep research on `{result['research_model']['model']}` over docs/team.md, "
            f"{len(rows)} questions: {cited} of {claims} report claims cite evidence that exists "
            f"({cited / claims if claims else 0:.0%}); invalid citations "
            f"{sum(r['invalid'] for r in rows)}; sub-questions failed "
            f"{sum(r['failed_subtasks'] for r in rows)}; reports assembled from the findings "
            f"{sum(1 for r in rows if r['assembled'])}; mean "
            f"{statistics.mean(r['seconds'] for r in rows):.0f} s per question."
        )
    return text


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        console.print("quality: indexing the docs and asking 45 questions in 3 modes ...")
        result: dict[str, Any] = {"quality": await quality(folder)}
        result["quality"]["n"] = result["quality"]["modes"]["hybrid"]["n"]
        for mode, m in result["quality"]["modes"].items():
            console.print(f"  {mode:7} recall@5 {m['found']}/{m['n']}  MRR@10 {m['mrr10']:.2f}")
        embedder = MiniLM()
        await embedder.embed(["warm up"])
        times = []
        for n in range(50):
            t0 = time.perf_counter()
            await embedder.embed([f"how do I set a budget for student {n}?"])
            times.append(time.perf_counter() - t0)
        result["query_embed_ms"] = 1000 * statistics.median(times)
        corpus = " ".join((ROOT / p).read_text() for p in ("README.md", "docs/guide.md"))
        vocabulary = [w for w in words(corpus) if len(w) > 2]
        result["scale"] = []
        for kind in args.stores:
            for size in args.sizes:
                if kind != "sqlite" and size > args.max_other:
                    continue
                figures = await scale(kind, size, folder, vocabulary)
                console.print(f"  {kind} {size}: {figures}")
                result["scale"].append(figures)
        result["research_parallel"] = await research_parallel(folder)
        console.print(f"  research orchestration: {result['research_parallel']}")
    if args.research_model:
        result["research_model"] = await research_on_model(args.research_model)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    plot(result)
    if args.write_docs:
        command = "uv run python " + " ".join(["benchmarks/knowledge.py", *sys.argv[1:]])
        write_section("knowledge", command, markdown(result), heading="Knowledge (RAG)")
    console.print(markdown(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--stores", nargs="+", default=["sqlite", "lancedb", "qdrant"],
                        choices=["sqlite", "lancedb", "qdrant"])  # fmt: skip
    parser.add_argument("--max-other", type=int, default=10_000,
                        help="the largest size for the stores other than SQLite")  # fmt: skip
    parser.add_argument("--research-model", metavar="MODEL",
                        help="also run DeepResearch on this model (e.g. local)")  # fmt: skip
    parser.add_argument("--write-docs", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
