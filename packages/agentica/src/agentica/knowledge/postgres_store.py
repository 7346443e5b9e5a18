"""``PostgresKnowledgeStore``: a knowledge store in PostgreSQL (asyncpg).

Chunks are rows with their vector and their words (a ``tsvector`` of ``words()``, so accents
and case match the other stores). With the pgvector extension installed the vector is a
``vector(n)`` column searched by cosine distance (``<=>``); without it, a ``real[]`` column
searched by computing every dot product in SQL: correct, and fine for some thousands of chunks.
The word search is PostgreSQL's full-text search ranked by ``ts_rank_cd`` (cover density, not
BM25). A replace is one transaction, so a search sees a source's old chunks or its new ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agentica.errors import UsageError
from agentica.knowledge.chunking import Chunk
from agentica.knowledge.stores import check_batch, check_query, other_embedder, words

__all__ = ["PostgresKnowledgeStore"]


def _dsn(url: str) -> str:
    """A SQLAlchemy-style URL (``postgresql+asyncpg://``) as asyncpg's DSN."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.startswith(("postgresql", "postgres")):
        raise UsageError(f"a PostgreSQL URL looks like postgresql://user@host:5432/db, not {url!r}")
    return f"postgresql://{rest}"


class PostgresKnowledgeStore:
    """Args:
    url: the database (``postgresql://user:password@host:5432/db``).
    table: the prefix of the store's tables (several bases can share a database).
    pgvector: use the pgvector extension: ``None`` (default) when the server has it and this
        user may create it.
    pool: an asyncpg pool to use (shared by several stores; not closed by ``aclose``).
    """

    def __init__(
        self,
        url: str,
        *,
        table: str = "knowledge",
        pgvector: bool | None = None,
        pool: Any = None,
    ) -> None:
        if not table.isidentifier():
            raise UsageError(f"table must be a plain identifier like 'knowledge', not {table!r}")
        self.dsn = _dsn(url)
        self.table = table
        self.pgvector = pgvector
        self._pool: Any = pool
        self._own_pool = pool is None
        self._dimensions = 0
        self._open_lock = asyncio.Lock()

    def _pool_or_fail(self) -> Any:
        if self._pool is None:
            raise UsageError("the knowledge store is not open: call open() first")
        return self._pool

    async def open(self, embedder: str, dimensions: int) -> None:
        import asyncpg  # type: ignore[import-untyped]

        async with self._open_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=4)
                self._own_pool = True
            async with self._pool.acquire() as db, db.transaction():
                await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.table)
                await self._create(db, embedder, dimensions)
            self._dimensions = dimensions

    async def _create(self, db: Any, embedder: str, dimensions: int) -> None:
        t = self.table
        await db.execute(f"CREATE TABLE IF NOT EXISTS {t}_meta (key text PRIMARY KEY, value text)")
        found = dict(await db.fetch(f"SELECT key, value FROM {t}_meta"))
        if found:
            if refusal := other_embedder(found, embedder, dimensions, "another table"):
                raise UsageError(refusal)
            self.pgvector = found.get("pgvector") == "yes"
            return
        if self.pgvector is not False:
            available = await db.fetchval(
                "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
            )
            if self.pgvector and not available:
                raise UsageError("pgvector=True, but the server has no 'vector' extension")
            wanted, self.pgvector = self.pgvector, bool(available)
            if self.pgvector:
                try:
                    async with db.transaction():  # (a savepoint: a refusal leaves the rest)
                        await db.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except Exception as exc:  # (no right to create it: arrays instead)
                    if wanted:
                        raise UsageError(f"pgvector=True, but: {exc}") from None
                    self.pgvector = False
        column = f"vector({int(dimensions)})" if self.pgvector else "real[]"
        await db.execute(
            f"CREATE TABLE {t}_chunks (id bigserial PRIMARY KEY, source text NOT NULL, "
            "position integer NOT NULL, location text NOT NULL, heading text NOT NULL, "
            f"text text NOT NULL, words tsvector NOT NULL, embedding {column} NOT NULL)"
        )
        await db.execute(f"CREATE INDEX {t}_chunks_source ON {t}_chunks (source)")
        await db.execute(f"CREATE INDEX {t}_chunks_words ON {t}_chunks USING gin (words)")
        await db.execute(f"CREATE TABLE {t}_sources (source text PRIMARY KEY, hash text NOT NULL)")
        await db.executemany(
            f"INSERT INTO {t}_meta VALUES ($1, $2)",
            [("embedder", embedder), ("dimensions", str(dimensions)),
             ("pgvector", "yes" if self.pgvector else "no")],
        )  # fmt: skip

    def _vector(self, vector: Sequence[float]) -> Any:
        values = [float(v) for v in vector]
        return "[" + ",".join(repr(v) for v in values) + "]" if self.pgvector else values

    async def sources(self) -> dict[str, str]:
        rows = await self._pool_or_fail().fetch(f"SELECT source, hash FROM {self.table}_sources")
        return {row["source"]: row["hash"] for row in rows}

    async def replace(
        self,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        check_batch(source, chunks, vectors, self._dimensions)
        t = self.table
        cast = "::vector" if self.pgvector else ""
        rows = [
            (source, c.position, c.location, c.heading, c.text,
             " ".join(words(f"{c.heading}\n{c.text}")), self._vector(v))
            for c, v in zip(chunks, vectors, strict=True)
        ]  # fmt: skip
        async with self._pool_or_fail().acquire() as db, db.transaction():
            await db.execute(f"DELETE FROM {t}_chunks WHERE source = $1", source)
            await db.executemany(
                f"INSERT INTO {t}_chunks (source, position, location, heading, text, words, "
                f"embedding) VALUES ($1, $2, $3, $4, $5, to_tsvector('simple', $6), $7{cast})",
                rows,
            )
            await db.execute(
                f"INSERT INTO {t}_sources VALUES ($1, $2) "
                "ON CONFLICT (source) DO UPDATE SET hash = excluded.hash",
                source, content_hash,
            )  # fmt: skip

    async def remove(self, source: str) -> None:
        async with self._pool_or_fail().acquire() as db, db.transaction():
            await db.execute(f"DELETE FROM {self.table}_chunks WHERE source = $1", source)
            await db.execute(f"DELETE FROM {self.table}_sources WHERE source = $1", source)

    @staticmethod
    def _chunk(row: Any) -> Chunk:
        return Chunk(row["source"], row["position"], row["text"], row["location"], row["heading"])

    async def vector_search(self, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        check_query(vector, self._dimensions)
        t = self.table
        if self.pgvector:
            sql = (
                f"SELECT source, position, location, heading, text, "
                f"1 - (embedding <=> $1::vector) AS score FROM {t}_chunks "
                "ORDER BY embedding <=> $1::vector LIMIT $2"
            )
        else:
            sql = (
                f"SELECT source, position, location, heading, text, "
                f"(SELECT sum(a * b) FROM unnest(embedding, $1::real[]) AS v(a, b)) AS score "
                f"FROM {t}_chunks ORDER BY score DESC LIMIT $2"
            )
        rows = await self._pool_or_fail().fetch(sql, self._vector(vector), int(k))
        return [(self._chunk(row), float(row["score"])) for row in rows]

    async def text_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        unique = list(dict.fromkeys(words(query)))[:32]
        if not unique:
            return []
        match = " | ".join(f"'{w}'" for w in unique)
        rows = await self._pool_or_fail().fetch(
            f"SELECT source, position, location, heading, text, "
            f"ts_rank_cd(words, q) AS score FROM {self.table}_chunks, "
            "to_tsquery('simple', $1) AS q WHERE words @@ q ORDER BY score DESC, id LIMIT $2",
            match, int(k),
        )  # fmt: skip
        return [(self._chunk(row), float(row["score"])) for row in rows]

    async def count(self) -> int:
        return int(await self._pool_or_fail().fetchval(f"SELECT count(*) FROM {self.table}_chunks"))

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            if self._own_pool:
                await pool.close()
