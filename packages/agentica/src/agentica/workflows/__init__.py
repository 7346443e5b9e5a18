"""Workflows: typed steps (async functions, agents, teams) in a graph, run durably.

- ``Workflow``: the builder and runner: ``step``, ``approval``, ``edge``, ``route`` (a function
  of the state picks the next step), ``parallel`` (concurrent branches that join), ``run``,
  ``resume``, ``run_stream``, ``inspect``, ``mermaid``, ``draw_png``; ``END``
- ``StepContext``: a step's run id, idempotency key, iteration and attempt; ``once`` records a
  side effect so a resumed step replays it instead of repeating it
- ``Approval``, ``PendingApproval``, ``StepRecord``, ``WorkflowResult``: what a run is made of
- stores: ``WorkflowStore``, ``InMemoryWorkflowStore``, ``SQLWorkflowStore`` (SQLite or
  PostgreSQL), ``StoredRun``; events: ``WorkflowEvent`` and its kinds
- errors: ``WorkflowGraphError`` (at build time), ``WorkflowFailed`` (a step failed: resumable),
  ``WorkflowConflictError`` (another process is running the same run)
"""

from agentica.workflows.engine import StepContext, WorkflowFailed
from agentica.workflows.events import (
    StepCompleted,
    StepFailed,
    StepStarted,
    WorkflowCompleted,
    WorkflowEvent,
    WorkflowPaused,
    WorkflowStarted,
)
from agentica.workflows.graph import END, WorkflowGraphError
from agentica.workflows.records import (
    Approval,
    PendingApproval,
    StepRecord,
    StoredRun,
    WorkflowResult,
)
from agentica.workflows.sql import SQLWorkflowStore
from agentica.workflows.store import InMemoryWorkflowStore, WorkflowConflictError, WorkflowStore
from agentica.workflows.workflow import Runnable, Workflow

__all__ = [
    "END",
    "Approval",
    "InMemoryWorkflowStore",
    "PendingApproval",
    "Runnable",
    "SQLWorkflowStore",
    "StepCompleted",
    "StepContext",
    "StepFailed",
    "StepRecord",
    "StepStarted",
    "StoredRun",
    "Workflow",
    "WorkflowCompleted",
    "WorkflowConflictError",
    "WorkflowEvent",
    "WorkflowFailed",
    "WorkflowGraphError",
    "WorkflowPaused",
    "WorkflowResult",
    "WorkflowStarted",
    "WorkflowStore",
]
