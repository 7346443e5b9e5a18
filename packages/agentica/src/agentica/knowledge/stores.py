"""Knowledge stores: where chunks, their vectors and their words are kept and searched.

``KnowledgeStore`` is the protocol every store implements (and ``agentica.testing``'s
conformance suite checks): sources with their content hashes, chunks replaced per source in one
step, a nearest-vector search and a ranked word search (BM25). ``SQLiteKnowledgeStore`` is the
embedded default: one SQLite file with sqlite-vec for the vectors and FTS5 for BM25, opened
through ``pysqlite3`` (this Python's ``sqlite3`` cannot load extensions) and used from a worker
thread, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from agentica.errors import UsageError
from agentica.knowledge.chunking import Chunk

__all__ = [
    "KnowledgeStore",
    "SQLiteKnowledgeStore",
    "ThreadedClient",
    "check_batch",
    "check_query",
    "fts_query",
    "other_embedder",
    "words",
]

T = TypeVar("T")


@runtime_checkable
class KnowledgeStore(Protocol):
    """Chunks of sources, searchable by vector and by words.

    Every method is async; vectors are unit length. ``replace`` swaps all of a source's chunks
    at once (a search never sees half a file)."""

    async def open(self, embedder: str, dimensions: int) -> None:
        """Create the store, or check that it was made for this embedder (``UsageError`` if
        not: vectors of another model are not comparable)."""
        ...

    async def sources(self) -> dict[str, str]:
        """Every source with the content hash it was indexed at."""
        ...

    async def replace(
        self,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None: ...

    async def remove(self, source: str) -> None: ...

    async def vector_search(self, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        """The ``k`` chunks nearest ``vector``, nearest first, with their cosine similarity."""
        ...

    async def text_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        """The ``k`` chunks that best match ``query``'s words (BM25), best first, with a score
        where higher is better."""
        ...

    async def count(self) -> int:
        """How many chunks the store holds."""
        ...

    async def aclose(self) -> None: ...


_WORD = re.compile(r"\w+", re.UNICODE)


class ThreadedClient:
    """A blocking client (a database connection, Qdrant's local client) used from worker
    threads, one call at a time: ``open`` connects once, ``run(work)`` calls ``work(client)``,
    ``aclose`` closes it. The SQLite and Qdrant stores share it."""

    def __init__(self) -> None:
        self.client: Any = None
        self._lock = asyncio.Lock()

    async def open(self, connect: Callable[[], Any], prepare: Callable[[Any], None]) -> None:
        async with self._lock:
            if self.client is None:
                self.client = await asyncio.to_thread(connect)
            await asyncio.to_thread(prepare, self.client)

    async def run(self, work: Callable[[Any], T]) -> T:
        async with self._lock:
            if self.client is None:
                raise UsageError("the knowledge store is not open: call open() first")
            return await asyncio.to_thread(work, self.client)

    async def aclose(self) -> None:
        async with self._lock:
            if self.client is not None:
                client, self.client = self.client, None
                await asyncio.to_thread(client.close)


def check_batch(
    source: str, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]], dimensions: int
) -> None:
    """``UsageError`` unless there is one vector of ``dimensions`` floats per chunk (every
    store's ``replace`` checks this first)."""
    if len(chunks) != len(vectors):
        raise UsageError(f"{len(chunks)} chunks but {len(vectors)} vectors for {source}")
    if any(len(v) != dimensions for v in vectors):
        raise UsageError(f"every vector must have {dimensions} dimensions")


def check_query(vector: Sequence[float], dimensions: int) -> None:
    if len(vector) != dimensions:
        raise UsageError(f"the query vector must have {dimensions} dimensions")


def other_embedder(found: dict[str, Any], embedder: str, dimensions: int, instead: str) -> str:
    """The refusal of a store made for another embedder (``found``: its ``embedder`` and
    ``dimensions``), or ``""`` when it was made for this one; ``instead`` says what else to
    use ("a new knowledge base file")."""
    if (str(found.get("embedder")), str(found.get("dimensions"))) == (embedder, str(dimensions)):
        return ""
    return (
        f"this knowledge base was built with the embedder {found.get('embedder')} "
        f"({found.get('dimensions')} dimensions), not {embedder} ({dimensions}): its vectors "
        f"are not comparable. Use that embedder, or {instead}"
    )


def words(text: str) -> list[str]:
    """``text``'s words for ranked word search: runs of letters and digits, lower case,
    accents removed ("Grüße" is "gruße"), as SQLite's FTS5 ``unicode61`` tokenizer cuts them
    (the stores without FTS5 use this)."""
    plain = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    return _WORD.findall(plain)


def fts_query(text: str, *, max_terms: int = 32) -> str:
    """``text`` as an FTS5 query matching any of its words (each quoted: punctuation and
    FTS5's own operators in a question are words, not syntax)."""
    unique = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:max_terms]
    return " OR ".join(f'"{w}"' for w in unique)


class SQLiteKnowledgeStore:
    """A knowledge store in one SQLite file (``":memory:"`` for a throw-away one).

    Args:
        path: the database file; its folder is created.
    """

    def __init__(self, path: str | Path = "knowledge.db") -> None:
        self.path = str(path)
        self._thread = ThreadedClient()
        self._dimensions = 0

    async def _run(self, work: Callable[[Any], T]) -> T:
        return await self._thread.run(work)

    async def open(self, embedder: str, dimensions: int) -> None:
        await self._thread.open(self._connect, lambda db: self._create(db, embedder, dimensions))
        self._dimensions = dimensions

    def _connect(self) -> Any:
        try:
            import pysqlite3.dbapi2 as sqlite3  # type: ignore[import-untyped]
            import sqlite_vec  # type: ignore[import-untyped]
        except ImportError:
            raise UsageError(
                "the SQLite knowledge store needs sqlite-vec and pysqlite3-binary: "
                "pip install 'agentica[knowledge]'"
            ) from None
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        db.enable_load_extension(False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=5000")
        return db

    @staticmethod
    def _create(db: Any, embedder: str, dimensions: int) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        found = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if found and (refusal := other_embedder(found, embedder, dimensions,
                                                "a new knowledge base file")):  # fmt: skip
            raise UsageError(refusal)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT OR IGNORE INTO meta VALUES (?, ?)",
                [("embedder", embedder), ("dimensions", str(dimensions)), ("version", "1")],
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS sources (source TEXT PRIMARY KEY, hash TEXT NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS chunks (id INTEGER PRIMARY KEY, source TEXT NOT NULL, "
                "position INTEGER NOT NULL, location TEXT NOT NULL, heading TEXT NOT NULL, "
                "text TEXT NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS chunks_source ON chunks (source)")
            db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS chunk_words USING fts5(heading, text, "
                "tokenize='unicode61 remove_diacritics 2')"
            )
            db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS chunk_vectors USING "
                f"vec0(embedding float[{int(dimensions)}] distance_metric=cosine)"
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    async def sources(self) -> dict[str, str]:
        rows = await self._run(lambda db: db.execute("SELECT source, hash FROM sources").fetchall())
        return {source: content_hash for source, content_hash in rows}

    async def replace(
        self,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        check_batch(source, chunks, vectors, self._dimensions)
        import sqlite_vec

        blobs = [sqlite_vec.serialize_float32(list(v)) for v in vectors]

        def work(db: Any) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._delete(db, source)
                for chunk, blob in zip(chunks, blobs, strict=True):
                    cursor = db.execute(
                        "INSERT INTO chunks (source, position, location, heading, text) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (source, chunk.position, chunk.location, chunk.heading, chunk.text),
                    )
                    rowid = cursor.lastrowid
                    db.execute(
                        "INSERT INTO chunk_words (rowid, heading, text) VALUES (?, ?, ?)",
                        (rowid, chunk.heading, chunk.text),
                    )
                    db.execute(
                        "INSERT INTO chunk_vectors (rowid, embedding) VALUES (?, ?)", (rowid, blob)
                    )
                db.execute(
                    "INSERT OR REPLACE INTO sources (source, hash) VALUES (?, ?)",
                    (source, content_hash),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        await self._run(work)

    @staticmethod
    def _delete(db: Any, source: str) -> None:
        ids = [row[0] for row in db.execute("SELECT id FROM chunks WHERE source = ?", (source,))]
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            db.execute(f"DELETE FROM chunk_words WHERE rowid IN ({marks})", batch)
            db.execute(f"DELETE FROM chunk_vectors WHERE rowid IN ({marks})", batch)
        db.execute("DELETE FROM chunks WHERE source = ?", (source,))
        db.execute("DELETE FROM sources WHERE source = ?", (source,))

    async def remove(self, source: str) -> None:
        def work(db: Any) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._delete(db, source)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        await self._run(work)

    @staticmethod
    def _chunks(db: Any, scored: list[tuple[int, float]]) -> list[tuple[Chunk, float]]:
        if not scored:
            return []
        marks = ",".join("?" * len(scored))
        rows = db.execute(
            f"SELECT id, source, position, location, heading, text FROM chunks "
            f"WHERE id IN ({marks})",
            [rowid for rowid, _ in scored],
        ).fetchall()
        by_id = {row[0]: Chunk(row[1], row[2], row[5], row[3], row[4]) for row in rows}
        return [(by_id[rowid], score) for rowid, score in scored if rowid in by_id]

    async def vector_search(self, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        check_query(vector, self._dimensions)
        import sqlite_vec

        blob = sqlite_vec.serialize_float32(list(vector))

        def work(db: Any) -> list[tuple[Chunk, float]]:
            rows = db.execute(
                "SELECT rowid, distance FROM chunk_vectors WHERE embedding MATCH ? AND k = ? "
                "ORDER BY distance",
                (blob, max(1, min(int(k), 4096))),  # (sqlite-vec's largest k)
            ).fetchall()
            return self._chunks(db, [(rowid, 1.0 - distance) for rowid, distance in rows])

        return await self._run(work)

    async def text_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        match = fts_query(query)
        if not match:
            return []

        def work(db: Any) -> list[tuple[Chunk, float]]:
            rows = db.execute(
                "SELECT rowid, bm25(chunk_words, 2.0, 1.0) AS rank FROM chunk_words "
                "WHERE chunk_words MATCH ? ORDER BY rank LIMIT ?",
                (match, int(k)),
            ).fetchall()
            return self._chunks(db, [(rowid, -rank) for rowid, rank in rows])

        return await self._run(work)

    async def count(self) -> int:
        row = await self._run(lambda db: db.execute("SELECT count(*) FROM chunks").fetchone())
        return int(row[0])

    async def aclose(self) -> None:
        await self._thread.aclose()
