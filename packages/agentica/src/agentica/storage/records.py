"""What a session remembers, as plain data: runs, their tool calls, and session metadata.

``RunRecord`` is one run as stored: its messages (the user input first), every tool call with
arguments, result or error and timing, the final output, usage, status and timing.
``SpanRecord`` is the run's timeline (model calls, compactions, tool calls, subagent runs).
``SessionInfo`` describes a stored session; ``SessionData`` is everything needed to resume one.
These types are what ``agentica.storage.codec`` serialises (versioned) and what every storage
backend reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from agentica.messages import Message, RunUsage, UserMessage

__all__ = [
    "HandoffRecord",
    "RunRecord",
    "RunStatus",
    "SessionData",
    "SessionInfo",
    "SpanAttribute",
    "SpanRecord",
    "ToolCallRecord",
]

RunStatus = Literal["completed", "failed", "cancelled", "paused"]
SpanAttribute = str | int | float | bool | list[str] | None


@dataclass(slots=True, kw_only=True)
class SpanRecord:
    """One timed step of a run: the run itself (``kind="run"``), a model call (``"model"``), a
    compaction of its conversation (``"compaction"``) or a tool call (``"tool"``); a run a tool
    started (a subagent's) is a child of that tool call.

    Attributes:
        name: the model, the tool or the agent.
        start: wall-clock start (``time.time()``); ``duration`` in seconds.
        error: what went wrong (``"ExceptionType: message"`` or the tool's error), else ``None``.
        attributes: OpenTelemetry GenAI attribute names (``gen_ai.usage.input_tokens``, ...) and
            ``agentica.*`` ones, as ``agentica.tracing`` exports them.
    """

    kind: Literal["run", "model", "compaction", "tool"]
    name: str
    start: float
    duration: float = 0.0
    error: str | None = None
    attributes: dict[str, SpanAttribute] = field(default_factory=dict)
    children: list[SpanRecord] = field(default_factory=list)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, SpanRecord]]:
        """This span and its descendants, depth first, with their depth."""
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)


@dataclass(slots=True, kw_only=True)
class ToolCallRecord:
    """One tool call of a run, as remembered."""

    id: str
    name: str
    arguments: str
    status: Literal["success", "error", "pending"]
    content: str
    duration: float = 0.0
    ref: str | None = None  # the evidence reference of its archived output, if archived


@dataclass(slots=True, kw_only=True)
class HandoffRecord:
    """One handoff of a run: agent ``source`` handed the conversation to agent ``target``
    (names), saying ``reason``; ``at`` is the index in the run's ``messages`` of the first
    message after the handoff (what ``target`` produced, until the next handoff)."""

    source: str
    target: str
    reason: str = ""
    at: int = 0


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """One run as the session remembers it (and as storage keeps it).

    ``agent`` names the agent that took the input and ``handoffs`` the handoffs during the run,
    so ``agent_of(i)`` says which agent produced each message (both are empty in records
    stored before handoffs existed).
    """

    run_id: str
    messages: list[Message]
    usage: RunUsage
    status: RunStatus
    started_at: float
    duration: float
    error: str | None = None
    output: str | None = None
    model: str | None = None  # the model of the run's last model call
    models: list[str] = field(default_factory=list)  # the model that answered each call, in order
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)  # of a paused run: ids awaiting a decision
    trace: SpanRecord | None = None  # the run's timeline (None: stored before it was recorded)
    agent: str | None = None  # the agent that took the input (None: stored before handoffs)
    handoffs: list[HandoffRecord] = field(default_factory=list)

    @property
    def input(self) -> str:
        """The user's input text (the run's first message)."""
        first = self.messages[0] if self.messages else None
        return first.text if isinstance(first, UserMessage) else ""

    @property
    def last_agent(self) -> str | None:
        """The agent active when the run ended (the last handoff's target, else ``agent``)."""
        return self.handoffs[-1].target if self.handoffs else self.agent

    def agent_of(self, index: int) -> str | None:
        """The agent whose turn produced ``messages[index]`` (the input counts as the first
        agent's); ``None`` for a record stored before handoffs existed."""
        agent = self.agent
        for handoff in self.handoffs:
            if handoff.at > index:
                break
            agent = handoff.target
        return agent


@dataclass(slots=True, kw_only=True)
class SessionInfo:
    """A stored session: its identity, title, size and times.

    A session made by a fork or a rewind names the session it branched from (``parent_id``) and
    how many runs it shares with it (``forked_at``); both are ``None`` for any other session.
    """

    user_id: str
    session_id: str
    title: str
    runs: int
    created_at: float
    updated_at: float
    parent_id: str | None = None
    forked_at: int | None = None


@dataclass(slots=True, kw_only=True)
class SessionData:
    """Everything needed to resume a session: its info, runs in order, summary and state.

    ``state`` holds what capabilities keep per session (todo lists, files of the state backend,
    paused approvals), as JSON. ``revision`` counts the runs saved into the session (0: none
    yet); a writer passes the revision it loaded as ``append_run(expected_revision=...)``, so a
    save based on an outdated copy is refused instead of overwriting another writer's state.
    """

    info: SessionInfo
    runs: list[RunRecord]
    summary: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    revision: int = 0
