"""``RunContext``: what a tool or a capability may know about, and use of, the run that called it.

A tool that needs it declares a parameter annotated ``RunContext`` (the name is free); the engine
passes the context and leaves the parameter out of the schema the model sees. The context is
created per run and dropped with it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentica.limits import RunBudget
from agentica.messages import RunUsage
from agentica.models.base import Model
from agentica.storage.base import Storage

if TYPE_CHECKING:
    from agentica.tools.files import FileBackend
    from agentica.tools.function import Function
    from agentica.tools.toolkit import Tool

__all__ = ["RunContext"]

DepsT = TypeVar("DepsT")


class RunContext(Generic[DepsT]):
    """Per-run information handed to tools and capabilities: the typed seam between a run and
    what plugs into it.

    Attributes:
        run_id: the id of the current run.
        deps: the dependencies passed to ``agent.run(..., deps=...)``.
        usage: the run's usage so far; a tool that calls a model itself may add to it.
        user_id, session_id: who and which conversation the run belongs to, when known.
        input: the text of the user's message that started the run.
        state: a dict private to this run, for capabilities (keyed by their names).
        session_state: the conversation's state, saved with the session (a capability keeps
            what must outlive the run here, under its own key: the todo list, the files of a
            ``StateBackend``).
        functions: every function the agent has, by name.
        offered: the functions offered to the model for the current turn (the capabilities'
            ``allowed_tools`` applied); ``functions`` until the first turn starts.
        model: the model the run calls, or ``None`` outside a run.
        storage: the agent's ``Storage``, or ``None``.
        budget: the ``RunBudget`` of the run tree (the top-level run and its subagent runs):
            what the tree used so far, and its limits; ``None`` outside a run.
        files: the ``FileBackend`` the agent's file tools work on for this run (its workspace,
            see ``Tool.file_backend``), or ``None`` when the agent has none.
    """

    __slots__ = (
        "_agent",
        "_cancel",
        "_progress",
        "_toolkits",
        "budget",
        "deps",
        "functions",
        "input",
        "model",
        "offered",
        "run_id",
        "session_id",
        "session_state",
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
        storage: Storage | None = None,
        input: str = "",
        budget: RunBudget | None = None,
        model: Model | None = None,
        functions: Mapping[str, Function] | None = None,
        session_state: dict[str, Any] | None = None,
        toolkits: Sequence[Tool] = (),
    ) -> None:
        self.run_id = run_id
        self.deps = deps
        self.usage = usage
        self.user_id = user_id
        self.session_id = session_id
        self.storage = storage
        self.input = input
        self.budget = budget
        self.model = model
        self.functions: Mapping[str, Function] = functions if functions is not None else {}
        self.offered: Mapping[str, Function] = self.functions
        self.session_state: dict[str, Any] = session_state if session_state is not None else {}
        self.state: dict[str, Any] = {}
        self._toolkits = tuple(toolkits)
        self._agent: weakref.ReferenceType[Any] | None = (
            weakref.ref(agent) if agent is not None else None
        )
        self._cancel = threading.Event()
        self._progress: Callable[[str, object], None] | None = None

    @property
    def agent(self) -> Any:
        """The ``Agent`` running this run, or ``None`` if it is gone (held weakly).

        For the subagent machinery (which builds children from its configuration) and
        guardrails; a capability or tool uses the typed attributes above instead.
        """
        return self._agent() if self._agent is not None else None

    @property
    def files(self) -> FileBackend | None:
        """The file backend of the agent's file tools for this run, or ``None``."""
        for toolkit in self._toolkits:
            backend = toolkit.file_backend(self)
            if backend is not None:
                return backend
        return None

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
