"""Where workflow runs are kept: the ``WorkflowStore`` protocol and ``InMemoryWorkflowStore``.

A store keeps, per run, one JSON record (state, next steps, status, errors, recorded side
effects) and the history of step executions. ``save_run`` writes the record and the step that
just ended in one transaction, and only if the stored revision is still the one the writer read:
two processes resuming one run cannot both go on (the loser gets ``WorkflowConflictError``).
``SQLWorkflowStore`` (sql.py) is the durable one (SQLite or PostgreSQL); ``open_workflow_store``
picks a store from ``"memory"``, a database URL or a ``.db`` path.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agentica.errors import StorageError
from agentica.workflows.records import RunStatus, StepRecord, StoredRun

if TYPE_CHECKING:
    from agentica.workflows.sql import SQLWorkflowStore

__all__ = [
    "InMemoryWorkflowStore",
    "WorkflowConflictError",
    "WorkflowStore",
    "open_workflow_store",
]


class WorkflowConflictError(StorageError):
    """Another writer saved the run since this one read it (two processes resumed the same run,
    or a new run reused a run id); nothing was written."""


@runtime_checkable
class WorkflowStore(Protocol):
    """The persistence a workflow needs (all methods are safe to call concurrently)."""

    async def load_run(self, run_id: str) -> StoredRun | None: ...

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
        """Store ``record`` (and ``step``) if the stored revision is ``expected_revision`` (0: the
        run must not exist yet); the new revision. ``WorkflowConflictError`` otherwise."""
        ...

    async def load_steps(self, run_id: str) -> list[StepRecord]: ...

    async def list_runs(
        self, workflow: str, *, status: RunStatus | None = None, limit: int = 100
    ) -> list[StoredRun]:
        """The runs of ``workflow`` (optionally only those with ``status``), newest first."""
        ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class _MemoryRun:
    run: StoredRun
    steps: list[StepRecord] = field(default_factory=list)


class InMemoryWorkflowStore:
    """A ``WorkflowStore`` in this process's memory: runs survive until the process ends (for
    tests, and workflows that need no durability). Records are kept as the same JSON text a
    database would hold."""

    def __init__(self) -> None:
        self._runs: dict[str, _MemoryRun] = {}

    async def load_run(self, run_id: str) -> StoredRun | None:
        found = self._runs.get(run_id)
        return found.run if found else None

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
        found = self._runs.get(run_id)
        revision = found.run.revision if found else 0
        if revision != expected_revision:
            raise conflict(run_id, expected_revision, revision)
        now = time.time()
        stored = StoredRun(
            run_id=run_id, workflow=workflow, status=status, revision=revision + 1, record=record,
            created_at=found.run.created_at if found else now, updated_at=now,
        )  # fmt: skip
        if found is None:
            found = self._runs[run_id] = _MemoryRun(stored)
        found.run = stored
        if step is not None:
            found.steps.append(step)
        return stored.revision

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        found = self._runs.get(run_id)
        return list(found.steps) if found else []

    async def list_runs(
        self, workflow: str, *, status: RunStatus | None = None, limit: int = 100
    ) -> list[StoredRun]:
        runs = [
            entry.run
            for entry in self._runs.values()
            if entry.run.workflow == workflow and (status is None or entry.run.status == status)
        ]
        runs.sort(key=lambda run: run.updated_at, reverse=True)
        return runs[: max(limit, 0)]

    async def aclose(self) -> None:
        await asyncio.sleep(0)


def conflict(run_id: str, expected: int, found: int) -> WorkflowConflictError:
    if expected == 0:
        return WorkflowConflictError(
            f"workflow run {run_id!r} already exists: resume it with resume({run_id!r}) or start "
            "a new run with another run_id"
        )
    return WorkflowConflictError(
        f"workflow run {run_id!r} was saved by another writer (revision {found}, this one read "
        f"{expected}): another process is running it; let that one finish, or inspect the run "
        "and resume it again"
    )


def open_workflow_store(
    location: str | os.PathLike[str],
) -> InMemoryWorkflowStore | SQLWorkflowStore:
    """The store named by ``location``: ``"memory"``, a ``sqlite://`` or ``postgresql://`` URL,
    or a path to a SQLite file (``.db``)."""
    from agentica.workflows.sql import SQLWorkflowStore

    text = os.fspath(location)
    if text == "memory":
        return InMemoryWorkflowStore()
    if "://" in text:
        return SQLWorkflowStore(text)
    if not text:
        raise StorageError("empty workflow store location: give 'memory', a URL or a .db file")
    return SQLWorkflowStore.sqlite(text)
