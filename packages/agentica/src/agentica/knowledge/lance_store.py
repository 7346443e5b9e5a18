"""``LanceKnowledgeStore``: a knowledge store in a LanceDB folder.

Chunks and their vectors are rows of one table searched by cosine distance; the word search is
LanceDB's own full-text index (BM25) over the chunk's heading and text, built on first use and
brought up to date by ``optimize()`` (rows added since are still searched, without the index).
Sources with their hashes and the embedder the folder was made for are two small tables.
LanceDB's async API does its work off the event loop. A replace is a delete then an add: a
search between them sees the source without chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentica.errors import UsageError
from agentica.knowledge.chunking import Chunk
from agentica.knowledge.stores import check_batch, check_query, other_embedder, words

__all__ = ["LanceKnowledgeStore"]

OPTIMIZE_AFTER = 2000  # rows added since the index was brought up to date, before it is again


def _quoted(text: str) -> str:
    """``text`` as a SQL string literal of LanceDB's filter language."""
    return "'" + text.replace("'", "''") + "'"


def _import() -> tuple[Any, Any]:
    try:
        import lancedb
        import lancedb.index
        import lancedb.query
        import pyarrow  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError(
            "the LanceDB knowledge store needs lancedb: pip install 'agentica[lancedb]'"
        ) from None
    return lancedb, pyarrow


class LanceKnowledgeStore:
    """Args:
    path: the LanceDB folder (created).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db: Any = None
        self._chunks: Any = None
        self._sources: Any = None
        self._dimensions = 0
        self._indexed = False
        self._unindexed = 0
        self._lock = asyncio.Lock()

    async def open(self, embedder: str, dimensions: int) -> None:
        lancedb, pa = await asyncio.to_thread(_import)  # (a second's import, off the loop)
        async with self._lock:
            if self._db is None:
                await asyncio.to_thread(Path(self.path).mkdir, parents=True, exist_ok=True)
                self._db = await lancedb.connect_async(self.path)
            names = set((await self._db.list_tables()).tables)
            if "meta" in names:
                meta = await self._db.open_table("meta")
                rows = await meta.query().to_list()
                found = {row["key"]: row["value"] for row in rows}
                if refusal := other_embedder(found, embedder, dimensions, "another folder"):
                    raise UsageError(refusal)
            else:
                await self._db.create_table("meta", data=[
                    {"key": "embedder", "value": embedder},
                    {"key": "dimensions", "value": str(dimensions)},
                ])  # fmt: skip
            chunk_schema = pa.schema([
                pa.field("source", pa.string()), pa.field("position", pa.int64()),
                pa.field("location", pa.string()), pa.field("heading", pa.string()),
                pa.field("text", pa.string()), pa.field("words", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), dimensions)),
            ])  # fmt: skip
            source_schema = pa.schema([pa.field("source", pa.string()),
                                       pa.field("hash", pa.string())])  # fmt: skip
            self._chunks = await self._db.create_table("chunks", schema=chunk_schema,
                                                       exist_ok=True)  # fmt: skip
            self._sources = await self._db.create_table("sources", schema=source_schema,
                                                        exist_ok=True)  # fmt: skip
            self._indexed = any(i.columns == ["words"] for i in await self._chunks.list_indices())
            self._dimensions = dimensions

    def _open(self) -> tuple[Any, Any]:
        if self._chunks is None or self._sources is None:
            raise UsageError("the knowledge store is not open: call open() first")
        return self._chunks, self._sources

    async def sources(self) -> dict[str, str]:
        _, sources = self._open()
        rows = await sources.query().select(["source", "hash"]).to_list()
        return {row["source"]: row["hash"] for row in rows}

    async def replace(
        self,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        check_batch(source, chunks, vectors, self._dimensions)
        table, sources = self._open()
        rows = [
            {"source": source, "position": c.position, "location": c.location,
             "heading": c.heading, "text": c.text, "words": f"{c.heading}\n{c.text}",
             "vector": list(v)}
            for c, v in zip(chunks, vectors, strict=True)
        ]  # fmt: skip
        async with self._lock:
            await table.delete(f"source = {_quoted(source)}")
            if rows:
                await table.add(rows)
            await sources.delete(f"source = {_quoted(source)}")
            await sources.add([{"source": source, "hash": content_hash}])
            if rows and not self._indexed:
                from lancedb.index import FTS

                await table.create_index("words", config=FTS(with_position=False))
                self._indexed = True
            self._unindexed += len(rows)
            if self._unindexed >= OPTIMIZE_AFTER:  # (rows not in the index are scanned)
                await table.optimize()
                self._unindexed = 0

    async def remove(self, source: str) -> None:
        table, sources = self._open()
        async with self._lock:
            await table.delete(f"source = {_quoted(source)}")
            await sources.delete(f"source = {_quoted(source)}")

    @staticmethod
    def _chunk(row: dict[str, Any]) -> Chunk:
        return Chunk(row["source"], int(row["position"]), row["text"], row["location"],
                     row["heading"])  # fmt: skip

    async def vector_search(self, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        check_query(vector, self._dimensions)
        table, _ = self._open()
        query = await table.search(list(vector), vector_column_name="vector")
        rows = await query.distance_type("cosine").limit(int(k)).to_list()
        return [(self._chunk(row), 1.0 - float(row["_distance"])) for row in rows]

    async def text_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        from lancedb.query import MatchQuery

        table, _ = self._open()
        terms = " ".join(dict.fromkeys(words(query)))
        if not terms or not self._indexed:
            return []
        match = MatchQuery(terms, "words")  # type: ignore[call-arg]  # (the rest have defaults)
        search = await table.search(match, query_type="fts")
        rows = await search.limit(int(k)).to_list()
        return [(self._chunk(row), float(row["_score"])) for row in rows]

    async def optimize(self) -> None:
        """Fold rows added since the index was built into it, and compact the table."""
        table, _ = self._open()
        async with self._lock:
            await table.optimize()

    async def count(self) -> int:
        table, _ = self._open()
        return int(await table.count_rows())

    async def aclose(self) -> None:
        async with self._lock:
            for table in (self._chunks, self._sources):
                if table is not None:
                    table.close()
            self._chunks = self._sources = None
            if self._db is not None:
                db, self._db = self._db, None
                db.close()
