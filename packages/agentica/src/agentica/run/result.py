"""The outcome of a run (``RunResponse``) and the memory of a conversation (``AgentMemory``).

An agent is its own session: ``AgentMemory`` holds the record of every run (``RunRecord``: input,
the messages the run added, usage, status) and an optional summary of older turns. The next run
replays it through the token-budgeted history assembly, so multi-turn needs no session code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from agentica.messages import Message, RunUsage
from agentica.run.approval import PendingCall
from agentica.storage.records import RunRecord, ToolCallRecord
from agentica.tools.call import FunctionCall

__all__ = ["AgentMemory", "RunRecord", "RunResponse", "ToolCallRecord"]

OutT = TypeVar("OutT", default=Any)
"""The type of a run's ``output``: ``str`` for an agent without ``output_type``."""


@dataclass(slots=True, kw_only=True)
class RunResponse(Generic[OutT]):
    """What a finished run produced (``RunResponse[Invoice]`` for ``Agent(output_type=Invoice)``).

    Attributes:
        content: the final answer text (``None`` if the model gave none).
        output: the structured output when the agent has an ``output_type``, else ``content``;
            when the run stopped on a tool's ``StopRun``, what the tool gave it; ``None`` when
            it paused.
        messages: the messages this run added to the conversation (user input first).
        tool_calls: every tool call of the run, in order, with arguments, results and errors.
        usage: requests, tool calls, tokens and cost (``None`` when a price is unknown).
        stop_reason: ``"completed"`` (the model answered), ``"stopped"`` (a tool returned
            ``StopRun``) or ``"paused"`` (calls wait for approval: see ``pending`` and
            ``Agent.resume``).
        duration: seconds the run took.
        pending: the calls waiting for a decision when the run paused.
    """

    run_id: str
    content: str | None
    output: OutT
    messages: list[Message]
    tool_calls: list[FunctionCall]
    usage: RunUsage
    model: str
    stop_reason: Literal["completed", "stopped", "paused"]
    duration: float
    pending: list[PendingCall] = field(default_factory=list)


@dataclass(slots=True)
class AgentMemory:
    """The conversation an agent carries: its runs, in order, a summary of older turns, and the
    per-session state of its capabilities (saved with the session)."""

    runs: list[RunRecord] = field(default_factory=list)
    summary: str | None = None
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def messages(self) -> list[Message]:
        """Every message of every run, oldest first."""
        return [m for run in self.runs for m in run.messages]

    @property
    def usage(self) -> RunUsage:
        """The session's totals over all runs."""
        total = RunUsage()
        for run in self.runs:
            total.merge(run.usage)
        return total

    def clear(self) -> None:
        self.runs.clear()
        self.summary = None
        self.state.clear()
