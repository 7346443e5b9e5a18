"""Every knowledge store passes the shipped conformance suite
(``agentica.testing.conformance.knowledge``), and the suite catches a broken store."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Any

import pytest

from agentica.knowledge import KnowledgeStore, SQLiteKnowledgeStore
from agentica.testing.conformance.knowledge import (
    KNOWLEDGE_STORE_CHECKS,
    KnowledgeStoreCase,
    KnowledgeStoreCheck,
    check_knowledge_store,
)
from tests.postgres import Cluster

pytest.importorskip("sqlite_vec", reason="the knowledge extra is not installed")

_names = itertools.count()


def needs(module: str, extra: str) -> None:
    """Skip unless ``module`` is installed (found, not imported: the store imports it on a
    worker thread, and importing it here would hold the test's event loop for a second)."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the {extra} extra is not installed")


def sqlite_case(tmp_path: Path) -> KnowledgeStoreCase:
    path = tmp_path / f"k{next(_names)}.db"

    async def reopen() -> KnowledgeStore:
        return SQLiteKnowledgeStore(path)

    return KnowledgeStoreCase(SQLiteKnowledgeStore(path), reopen)


def qdrant_case(tmp_path: Path) -> KnowledgeStoreCase:
    needs("qdrant_client", "qdrant")
    from agentica.knowledge.qdrant_store import QdrantKnowledgeStore

    path = tmp_path / f"q{next(_names)}"

    async def reopen() -> KnowledgeStore:
        return QdrantKnowledgeStore(path)

    return KnowledgeStoreCase(QdrantKnowledgeStore(path), reopen)


def qdrant_memory_case(tmp_path: Path) -> KnowledgeStoreCase:
    needs("qdrant_client", "qdrant")
    from agentica.knowledge.qdrant_store import QdrantKnowledgeStore

    return KnowledgeStoreCase(QdrantKnowledgeStore())


def lance_case(tmp_path: Path) -> KnowledgeStoreCase:
    needs("lancedb", "lancedb")
    from agentica.knowledge.lance_store import LanceKnowledgeStore

    path = tmp_path / f"l{next(_names)}"

    async def reopen() -> KnowledgeStore:
        return LanceKnowledgeStore(path)

    return KnowledgeStoreCase(LanceKnowledgeStore(path), reopen)


def postgres_case(tmp_path: Path, cluster: Cluster) -> KnowledgeStoreCase:
    from agentica.knowledge.postgres_store import PostgresKnowledgeStore

    url, table = cluster.url("knowledge"), f"kb{next(_names)}"

    async def reopen() -> KnowledgeStore:
        return PostgresKnowledgeStore(url, table=table)

    return KnowledgeStoreCase(PostgresKnowledgeStore(url, table=table), reopen)


CASES = {
    "sqlite": sqlite_case,
    "qdrant-local": qdrant_case,
    "qdrant-memory": qdrant_memory_case,
    "lancedb": lance_case,
}


@pytest.mark.parametrize("check", KNOWLEDGE_STORE_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("store", list(CASES))
async def test_store_passes_the_check(
    store: str, check: KnowledgeStoreCheck, tmp_path: Path
) -> None:
    case = CASES[store](tmp_path)
    try:
        await check(case)
    finally:
        await case.store.aclose()


@pytest.mark.parametrize("check", KNOWLEDGE_STORE_CHECKS, ids=lambda c: c.__name__)
async def test_postgres_store_passes_the_check(
    check: KnowledgeStoreCheck, tmp_path: Path, pg_cluster: Cluster
) -> None:
    """Without pgvector (not packaged for this PostgreSQL): the vectors are real[] columns."""
    case = postgres_case(tmp_path, pg_cluster)
    try:
        await check(case)
    finally:
        await case.store.aclose()


class KeepsOldWords(SQLiteKnowledgeStore):
    """A broken store: replacing or removing a source leaves its old chunks' words searchable."""

    @staticmethod
    def _delete(db: Any, source: str) -> None:
        ids = [row[0] for row in db.execute("SELECT id FROM chunks WHERE source = ?", (source,))]
        for rowid in ids:
            db.execute("DELETE FROM chunk_vectors WHERE rowid = ?", (rowid,))
        db.execute("DELETE FROM sources WHERE source = ?", (source,))


async def test_the_suite_catches_a_store_that_keeps_replaced_words(tmp_path: Path) -> None:
    async def factory() -> KnowledgeStoreCase:
        return KnowledgeStoreCase(KeepsOldWords(tmp_path / f"b{next(_names)}.db"))

    with pytest.raises(AssertionError, match="check_replace_and_list_sources: replace drops"):
        await check_knowledge_store(factory)
