"""Workflow events: what ``Workflow.run_stream()`` and ``resume_stream()`` yield, in order.

``WorkflowStarted``, then for each step ``StepStarted`` and ``StepCompleted`` or ``StepFailed``
(the steps of parallel branches interleave), and last ``WorkflowCompleted`` or
``WorkflowPaused`` with the result; a failed run's stream raises ``WorkflowFailed`` after its
``StepFailed`` events. Every event has a ``kind`` string for ``match`` and serialisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from agentica.workflows.records import WorkflowResult

__all__ = [
    "StepCompleted",
    "StepFailed",
    "StepStarted",
    "WorkflowCompleted",
    "WorkflowEvent",
    "WorkflowPaused",
    "WorkflowStarted",
]


@dataclass(frozen=True, slots=True)
class WorkflowStarted:
    run_id: str
    workflow: str
    resumed: bool
    kind: Literal["workflow_started"] = "workflow_started"


@dataclass(frozen=True, slots=True)
class StepStarted:
    run_id: str
    step: str
    key: str
    iteration: int
    attempt: int
    kind: Literal["step_started"] = "step_started"


@dataclass(frozen=True, slots=True)
class StepCompleted:
    run_id: str
    step: str
    key: str
    iteration: int
    duration: float
    changes: dict[str, Any] = field(default_factory=dict)
    kind: Literal["step_completed"] = "step_completed"


@dataclass(frozen=True, slots=True)
class StepFailed:
    run_id: str
    step: str
    key: str
    iteration: int
    error: str
    kind: Literal["step_failed"] = "step_failed"


@dataclass(frozen=True, slots=True)
class WorkflowPaused:
    result: WorkflowResult[Any]
    kind: Literal["workflow_paused"] = "workflow_paused"


@dataclass(frozen=True, slots=True)
class WorkflowCompleted:
    result: WorkflowResult[Any]
    kind: Literal["workflow_completed"] = "workflow_completed"


WorkflowEvent: TypeAlias = (
    WorkflowStarted | StepStarted | StepCompleted | StepFailed | WorkflowPaused | WorkflowCompleted
)
