"""``SQLWorkflowStore``: workflow runs in SQLite or PostgreSQL, next to the agents' sessions.

It goes through the connections of an ``agentica.storage.SQLStorage`` (one engine per event
loop, SQLAlchemy imported off the loop, WAL and ``BEGIN IMMEDIATE`` on SQLite, retried
deadlocks on PostgreSQL, errors as ``StorageError``), so a workflow and its agents can share
one database. Its own tables (``_schema.py``) are created on first use, under the write lock on
SQLite and an advisory lock on PostgreSQL. A save is one transaction: a compare-and-set of the
run's revision, the record, and the row of the step that just ended.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from agentica.errors import StorageError
from agentica.storage.sql import SQLiteStorage, SQLStorage
from agentica.workflows.records import RunStatus, StepRecord, StoredRun
from agentica.workflows.store import conflict

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["SQLWorkflowStore"]

_PG_TABLES_LOCK = 0x776F726B666C6F77  # "workflow": serialises concurrent first uses


class SQLWorkflowStore:
    """A ``WorkflowStore`` in a SQL database.

    ``database`` is a URL (``sqlite+aiosqlite:///path.db``, ``postgresql://user@host/db``; plain
    ``sqlite://`` and ``postgresql://`` get the async driver) or a ``SQLStorage`` whose database
    (and connections) to share. ``SQLWorkflowStore.sqlite(path)`` is a SQLite file.
    ``aclose()`` disposes of the running loop's connections (a later call reopens them).
    """

    def __init__(self, database: str | SQLStorage) -> None:
        self.storage = database if isinstance(database, SQLStorage) else SQLStorage(database)
        self._ready = False

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str]) -> SQLWorkflowStore:
        return cls(SQLiteStorage(path))

    def __repr__(self) -> str:
        return f"SQLWorkflowStore({self.storage!r})"

    async def _transaction(self, action: str, body: Any, *, write: bool) -> Any:
        if not self._ready:
            await self.storage._transaction("create the workflow tables", _create, write=True)
            self._ready = True
        return await self.storage._transaction(action, body, write=write)

    async def load_run(self, run_id: str) -> StoredRun | None:
        async def body(conn: AsyncConnection) -> StoredRun | None:
            import sqlalchemy as sa

            from agentica.workflows._schema import workflow_runs as runs

            row = (await conn.execute(sa.select(runs).where(runs.c.run_id == run_id))).one_or_none()
            return None if row is None else _stored(row)

        result: StoredRun | None = await self._transaction("load a workflow run", body, write=False)
        return result

    async def save_run(
        self,
        run_id: str,
        workflow: str,
        status: RunStatus,
        record: str,
        *,
        expected_revision: int,
        step: StepRecord | None = None,
    ) -> int:
        now = time.time()

        async def body(conn: AsyncConnection) -> int:
            import sqlalchemy as sa

            from agentica.workflows._schema import workflow_runs as runs
            from agentica.workflows._schema import workflow_steps as steps

            revision = expected_revision + 1
            if expected_revision == 0:
                statement: Any = (
                    self.storage._insert(conn, runs)
                    .values(run_id=run_id, workflow=workflow, status=status, revision=revision,
                            created_at=now, updated_at=now, record=record)
                    .on_conflict_do_nothing(index_elements=[runs.c.run_id])
                    .returning(runs.c.revision)
                )  # fmt: skip
            else:
                statement = (
                    sa.update(runs)
                    .where((runs.c.run_id == run_id) & (runs.c.revision == expected_revision))
                    .values(status=status, revision=revision, updated_at=now, record=record)
                    .returning(runs.c.revision)
                )
            if (await conn.execute(statement)).first() is None:
                found = await conn.execute(
                    sa.select(runs.c.revision).where(runs.c.run_id == run_id)
                )
                raise conflict(run_id, expected_revision, found.scalar_one_or_none() or 0)
            if step is not None:
                await conn.execute(sa.insert(steps).values(run_id=run_id, **_step_row(step)))
            return revision

        saved: int = await self._transaction("save a workflow run", body, write=True)
        return saved

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        async def body(conn: AsyncConnection) -> list[StepRecord]:
            import sqlalchemy as sa

            from agentica.workflows._schema import workflow_steps as steps

            result = await conn.execute(
                sa.select(steps).where(steps.c.run_id == run_id).order_by(steps.c.seq)
            )
            return [_step(row) for row in result]

        found: list[StepRecord] = await self._transaction("load workflow steps", body, write=False)
        return found

    async def list_runs(
        self, workflow: str, *, status: RunStatus | None = None, limit: int = 100
    ) -> list[StoredRun]:
        async def body(conn: AsyncConnection) -> list[StoredRun]:
            import sqlalchemy as sa

            from agentica.workflows._schema import workflow_runs as runs

            where = runs.c.workflow == workflow
            if status is not None:
                where = where & (runs.c.status == status)
            result = await conn.execute(
                sa.select(runs)
                .where(where)
                .order_by(runs.c.updated_at.desc(), runs.c.run_id)
                .limit(max(limit, 0))
            )
            return [_stored(row) for row in result]

        found: list[StoredRun] = await self._transaction("list workflow runs", body, write=False)
        return found

    async def aclose(self) -> None:
        await self.storage.aclose()


async def _create(conn: AsyncConnection) -> None:
    """Create the tables if they are missing; refuse tables of a newer agentica."""
    import sqlalchemy as sa

    from agentica.workflows._schema import SCHEMA_VERSION, metadata, schema_version

    if conn.dialect.name == "postgresql":
        await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_TABLES_LOCK})")
    await conn.run_sync(metadata.create_all)
    versions = (await conn.execute(sa.select(schema_version.c.version))).scalars().all()
    if not versions:
        await conn.execute(sa.insert(schema_version).values(version=SCHEMA_VERSION))
    elif max(versions) > SCHEMA_VERSION:
        raise StorageError(
            f"the workflow tables are at version {max(versions)}, this agentica knows up to "
            f"{SCHEMA_VERSION}: they were written by a newer agentica; upgrade agentica"
        )


def _stored(row: Any) -> StoredRun:
    return StoredRun(
        run_id=row.run_id, workflow=row.workflow, status=row.status, revision=row.revision,
        record=row.record, created_at=row.created_at, updated_at=row.updated_at,
    )  # fmt: skip


def _step_row(step: StepRecord) -> dict[str, Any]:
    return {
        "seq": step.seq, "step": step.step, "key": step.key, "iteration": step.iteration,
        "attempt": step.attempt, "status": step.status, "started_at": step.started_at,
        "finished_at": step.finished_at, "changes": json.dumps(step.changes),
        "error": step.error.replace("\x00", "\ufffd") if step.error else None,
    }  # fmt: skip


def _step(row: Any) -> StepRecord:
    return StepRecord(
        seq=row.seq, step=row.step, key=row.key, iteration=row.iteration, attempt=row.attempt,
        status=row.status, started_at=row.started_at, finished_at=row.finished_at,
        changes=json.loads(row.changes), error=row.error,
    )  # fmt: skip
