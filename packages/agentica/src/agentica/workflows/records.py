"""What a workflow run is made of, as the caller and the store see it.

- ``WorkflowResult``: a run's status, state, next steps, pending approvals, errors and history
- ``StepRecord``: one step execution (its idempotency key, attempt, outcome, changed fields)
- ``PendingApproval`` / ``Approval``: a paused run's question and the person's decision
- ``StoredRun``: a run as a ``WorkflowStore`` keeps it (an opaque JSON record and a revision)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar

__all__ = [
    "Approval",
    "PendingApproval",
    "RunStatus",
    "StepRecord",
    "StoredRun",
    "WorkflowResult",
]

S = TypeVar("S")

RunStatus: TypeAlias = Literal["running", "paused", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class Approval:
    """A person's decision for an approval step: ``approved`` and an optional comment."""

    approved: bool
    comment: str = ""


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """An approval step a paused run waits at: ``resume(run_id, approval=Approval(...))``."""

    step: str
    key: str
    question: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One execution of a step, as stored after it ended.

    Attributes:
        seq: its number in the run (1, 2, ...).
        key: the idempotency key ``<run_id>/<step>/<iteration>``: the same on every attempt.
        iteration: which time the step ran in this run (loops run a step several times).
        attempt: 1, or more when the run was resumed after a crash or failure at this step.
        status: ``"completed"`` or ``"failed"``.
        changes: the state fields the step changed (JSON values).
        error: ``"<type>: <message>"`` when it failed.
    """

    seq: int
    step: str
    key: str
    iteration: int
    attempt: int
    status: Literal["completed", "failed"]
    started_at: float
    finished_at: float
    changes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True, kw_only=True)
class WorkflowResult(Generic[S]):
    """A workflow run as stored: what ``run``, ``resume`` and ``inspect`` return.

    Attributes:
        status: ``"completed"``, ``"paused"`` (waiting at approval steps: ``pending``),
            ``"failed"`` (``errors``; resumable after a fix; ``pending`` names the approvals
            its other branches wait for) or ``"running"`` (in progress, or its process died:
            ``resume`` continues it).
        state: the state after the last completed step (before a parallel section's join,
            the state the branches started from).
        next: the steps that run next (several inside a parallel section).
        steps: every step execution so far, in order (failed attempts included).
    """

    run_id: str
    workflow: str
    status: RunStatus
    state: S
    next: list[str] = field(default_factory=list)
    pending: list[PendingApproval] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """A run in a ``WorkflowStore``: ``record`` is the engine's JSON text, ``revision`` is
    bumped by every save (a save states the revision it was based on)."""

    run_id: str
    workflow: str
    status: RunStatus
    revision: int
    record: str
    created_at: float
    updated_at: float
