"""Conformance checks for a ``KnowledgeStore`` (``agentica.knowledge.stores``).

``check_knowledge_store(factory)`` runs every check of ``KNOWLEDGE_STORE_CHECKS`` on a fresh
store from ``factory`` and raises ``AssertionError`` naming the first one that fails. The
vectors are hashed bags of words (``hashed_vectors``), so the checks need no model.
"""

from __future__ import annotations

import asyncio
import math
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agentica.errors import UsageError
from agentica.knowledge.chunking import Chunk
from agentica.knowledge.stores import KnowledgeStore

__all__ = [
    "KNOWLEDGE_STORE_CHECKS",
    "KnowledgeStoreCase",
    "KnowledgeStoreCheck",
    "KnowledgeStoreFactory",
    "check_knowledge_store",
    "hashed_vectors",
]

DIMENSIONS = 256
EMBEDDER = "hashed-words-256"


@dataclass
class KnowledgeStoreCase:
    """A fresh, empty store not opened yet, and a function that opens a second store object
    over the same data (``None`` for a store that keeps nothing once closed)."""

    store: KnowledgeStore
    reopen: Callable[[], Awaitable[KnowledgeStore]] | None = None


KnowledgeStoreFactory = Callable[[], Awaitable[KnowledgeStoreCase]]
KnowledgeStoreCheck = Callable[[KnowledgeStoreCase], Awaitable[None]]


def hashed_vectors(texts: Sequence[str]) -> list[list[float]]:
    """Unit vectors of ``DIMENSIONS`` floats: each word adds one to a hashed position."""
    out = []
    for text in texts:
        vector = [0.0] * DIMENSIONS
        for word in text.lower().split():
            vector[zlib.crc32(word.strip(".,!?").encode()) % DIMENSIONS] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        out.append([v / norm for v in vector])
    return out


def _chunks(source: str, *texts: str, heading: str = "") -> list[Chunk]:
    return [
        Chunk(source, n, text, f"lines {2 * n + 1}-{2 * n + 2}", heading)
        for n, text in enumerate(texts)
    ]


async def _put(store: KnowledgeStore, source: str, chunks: list[Chunk], hash_: str = "h") -> None:
    await store.replace(source, hash_, chunks, hashed_vectors([c.text for c in chunks]))


async def check_replace_and_list_sources(case: KnowledgeStoreCase) -> None:
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    assert await store.sources() == {}, "a new store has no sources"
    assert await store.count() == 0, "a new store has no chunks"
    await _put(store, "a.md", _chunks("a.md", "apples and pears", "the quick brown fox"), "h1")
    await _put(store, "b.md", _chunks("b.md", "pears only"), "h2")
    assert await store.sources() == {"a.md": "h1", "b.md": "h2"}, await store.sources()
    assert await store.count() == 3, f"3 chunks stored, count() says {await store.count()}"
    await _put(store, "a.md", _chunks("a.md", "plums"), "h3")
    assert await store.sources() == {"a.md": "h3", "b.md": "h2"}, "replace updates the hash"
    assert await store.count() == 2, "replace drops the source's old chunks"
    await store.remove("b.md")
    await store.remove("never-added.md")  # (removing what is not there is no error)
    assert await store.sources() == {"a.md": "h3"}, "remove drops the source"
    assert await store.count() == 1, "remove drops the source's chunks"


async def check_chunks_round_trip(case: KnowledgeStoreCase) -> None:
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    chunk = Chunk("docs/ü ß.md", 7, "Grüße — «quoted»\n\tindented 'text' \"here\"", "page 3",
                  "Title > Part 2")  # fmt: skip
    await store.replace("docs/ü ß.md", "h", [chunk], hashed_vectors([chunk.text]))
    [(found, _)] = await store.vector_search(hashed_vectors([chunk.text])[0], 1)
    assert found == chunk, f"the chunk changed on its way through the store: {found!r}"
    [(found, _)] = await store.text_search("Grüße", 1)
    assert found == chunk, f"the chunk changed on its way through the word search: {found!r}"


async def check_vector_search_ranks_by_cosine(case: KnowledgeStoreCase) -> None:
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    texts = ["red apples", "green pears", "blue sky over the sea", "red sky at night"]
    await _put(store, "s.md", _chunks("s.md", *texts))
    query = hashed_vectors(["red sky"])[0]
    hits = await store.vector_search(query, 4)
    assert hits[0][0].text == "red sky at night", hits
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True), f"nearest first: {scores}"
    expected = sum(a * b for a, b in zip(query, hashed_vectors(["red sky at night"])[0],
                                         strict=True))  # fmt: skip
    assert abs(scores[0] - expected) < 1e-4, f"the score is the cosine, {expected}: {scores[0]}"
    assert len(await store.vector_search(query, 2)) == 2, "k limits the results"
    try:
        await store.vector_search([1.0, 0.0], 2)
    except UsageError:
        pass
    else:
        raise AssertionError("a query vector of the wrong length must raise UsageError")


async def check_text_search_ranks_by_words(case: KnowledgeStoreCase) -> None:
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    texts = [
        "budgets are set per course",
        "each student has a budget; the budget counts tokens and budget resets daily",
        "nothing about money here",
        "error E4711 means the disk is full",
    ]
    await _put(store, "t.md", _chunks("t.md", *texts))
    hits = await store.text_search("budget", 4)
    assert hits, "a word in two chunks finds them"
    assert hits[0][0].text == texts[1], f"more occurrences rank higher: {hits}"
    assert all("budget" in c.text for c, _ in hits), f"only matching chunks: {hits}"
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True), f"best first, higher is better: {scores}"
    [(found, _)] = await store.text_search("What does E4711 mean?", 1)
    assert found.text == texts[3], "a rare word finds its chunk"
    for hostile in ['"NEAR(', "AND OR NOT", "*", "budget)", "'; DROP TABLE chunks; --", ""]:
        await store.text_search(hostile, 3)  # (no syntax error from the query language)
    assert await store.text_search("", 3) == [], "an empty query finds nothing"
    assert await store.text_search("zebra", 3) == [], "no match, no results"


async def check_replace_is_whole(case: KnowledgeStoreCase) -> None:
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    await _put(store, "a.md", _chunks("a.md", "old words here", "more old words"))
    await _put(store, "a.md", _chunks("a.md", "new text"))
    assert await store.text_search("old", 5) == [], "the replaced chunks' words are gone"
    hits = await store.vector_search(hashed_vectors(["old words here"])[0], 5)
    assert [c.text for c, _ in hits] == ["new text"], f"the replaced vectors are gone: {hits}"


async def check_concurrent_replaces_keep_every_source(case: KnowledgeStoreCase) -> None:
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    names = [f"doc{n}.md" for n in range(8)]
    await asyncio.gather(*(_put(store, n, _chunks(n, f"text of {n}", "shared")) for n in names))
    assert sorted(await store.sources()) == names, await store.sources()
    assert await store.count() == 16


async def check_reopen_keeps_data_and_refuses_another_embedder(case: KnowledgeStoreCase) -> None:
    if case.reopen is None:
        return
    store = case.store
    await store.open(EMBEDDER, DIMENSIONS)
    await _put(store, "a.md", _chunks("a.md", "kept across a restart"), "h1")
    await store.aclose()
    again = await case.reopen()
    try:
        await again.open(EMBEDDER, DIMENSIONS)
        assert await again.sources() == {"a.md": "h1"}, "the data is still there"
        [(found, _)] = await again.text_search("restart", 1)
        assert found.text == "kept across a restart"
    finally:
        await again.aclose()
    other = await case.reopen()
    try:
        await other.open("another-model", 384)
    except UsageError:
        pass
    else:
        raise AssertionError("a store made for one embedder must refuse another (UsageError)")
    finally:
        await other.aclose()


KNOWLEDGE_STORE_CHECKS: tuple[KnowledgeStoreCheck, ...] = (
    check_replace_and_list_sources,
    check_chunks_round_trip,
    check_vector_search_ranks_by_cosine,
    check_text_search_ranks_by_words,
    check_replace_is_whole,
    check_concurrent_replaces_keep_every_source,
    check_reopen_keeps_data_and_refuses_another_embedder,
)


async def check_knowledge_store(factory: KnowledgeStoreFactory) -> None:
    """Run every check on a fresh store; ``AssertionError`` names the check that failed."""
    for check in KNOWLEDGE_STORE_CHECKS:
        case = await factory()
        try:
            await check(case)
        except AssertionError as exc:
            raise AssertionError(f"{check.__name__}: {exc}") from exc
        finally:
            await case.store.aclose()
