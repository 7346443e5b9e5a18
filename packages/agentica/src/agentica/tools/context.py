"""The run context: what a tool may know about the run that called it.

A tool that needs it declares a parameter annotated ``RunContext`` (the name is free); the engine
passes the context and leaves the parameter out of the schema the model sees. The context is
created per run and dropped with it. It reaches the agent only through a weak reference, so no
tool ever keeps an agent alive.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from agentica.messages import RunUsage

__all__ = ["RunContext"]

DepsT = TypeVar("DepsT")


class RunContext(Generic[DepsT]):
    """Per-run information handed to tools that ask for it.

    Attributes:
        run_id: the id of the current run.
        deps: the dependencies passed to ``agent.run(..., deps=...)``.
        usage: the run's usage so far; a tool that calls a model itself may add to it.
        user_id, session_id: who and which conversation the run belongs to, when known.
        storage: the agent's ``agentica.storage.Storage``, or ``None``.
        input: the text of the user's message that started the run.
        state: a dict private to this run, for capabilities (keyed by their names).
        budget: the ``agentica.run.limits.RunBudget`` of the run tree (the top-level run and
            its subagent runs) this run belongs to: what the tree used so far, and its limits
            (typed ``Any`` here because the tools layer sits below ``run``).
    """

    __slots__ = (
        "_agent",
        "_cancel",
        "_progress",
        "budget",
        "deps",
        "input",
        "run_id",
        "session_id",
        "state",
        "storage",
        "usage",
        "user_id",
    )

    def __init__(
        self,
        *,
        run_id: str,
        deps: DepsT,
        usage: RunUsage,
        agent: object | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        storage: Any = None,
        input: str = "",
        budget: Any = None,
    ) -> None:
        self.run_id = run_id
        self.deps = deps
        self.usage = usage
        self.user_id = user_id
        self.session_id = session_id
        self.storage = storage
        self.input = input
        self.budget = budget
        self.state: dict[str, Any] = {}
        self._agent: weakref.ReferenceType[Any] | None = (
            weakref.ref(agent) if agent is not None else None
        )
        self._cancel = threading.Event()
        self._progress: Callable[[str, object], None] | None = None

    @property
    def agent(self) -> Any:
        """The agent running this run, or ``None`` if it is gone (held weakly)."""
        return self._agent() if self._agent is not None else None

    def report(self, source: str, update: object) -> None:
        """Send a progress update of a running tool to whoever streams the run.

        ``run_stream()`` yields it as a ``ToolProgress(source, update)`` event while the turn's
        tools are still running (a subagent reports its own run's events this way); without a
        stream consumer the update is dropped.
        """
        if self._progress is not None:
            self._progress(source, update)

    def set_progress(self, sink: Callable[[str, object], None] | None) -> None:
        """Where ``report()`` sends updates (the run engine sets it while tools run)."""
        self._progress = sink

    @property
    def cancelled(self) -> bool:
        """True once the run was cancelled. Blocking tools running in a thread should poll it."""
        return self._cancel.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Block (in a tool's thread) until the run is cancelled or ``timeout`` passes."""
        return self._cancel.wait(timeout)

    def request_cancel(self) -> None:
        """Mark the run as cancelled (the engine does this when the run's task is cancelled)."""
        self._cancel.set()
