"""The supervisor of agent sessions: it owns the loops that run the agents, one task per session.

Request handlers never run agents: they append to a session's log and ``deliver`` a
``RuntimeEvent`` (``MessageQueued``, ``CancelRequested``, ``OperationCancelRequested``) to the
supervisor. The seam for part 2 is ``SessionRuntime``: the supervisor gives each active session
one task, an ``Inbox`` of its events and a ``SessionScope`` (its log, the event writer, an agent
factory), and calls ``runtime.run(inbox)``, which returns when the session is idle. It owns the
lifecycle (never two loops per session, crash recovery, shutdown, ``stop`` before a session is
deleted); the runtime owns the behaviour. Part 1's runtime
is ``SerialRuntime`` (messages one at a time, in order, one agent run each); part 2's
event-driven runtimes (lanes, operations, interruption and preemption) implement the same
protocol, take more event kinds (operation callbacks, executor connect/disconnect, timers) and
are chosen by the factory passed as ``runtime=``; several workers add a lease per session.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from agentica.agent import Agent
from agentica.deep.backends import StoreBackend
from agentica.deep.files import FileTools, WorkspaceOverview
from agentica.deep.todos import Todos
from agentica.errors import AgenticaError, RunCancelled
from agentica.knowledge import KnowledgeTools
from agentica.limits import RunLimits
from agentica.models.base import Model
from agentica.run.capability import Capability
from agentica.run.events import ContextCompacted, RunEvent, ToolCallCompleted, ToolCallStarted
from agentica.run.repetition import RepetitionGuard
from agentica.storage.sql import SQLStorage
from agentica.tools.commands import CommandBackend
from agentica.tools.files import FileBackend
from agentica.tools.toolkit import ToolLike
from agentica_team.cluster import BusMessage, Cluster
from agentica_team.course_knowledge import CourseKnowledge, SharedAnswers
from agentica_team.errors import TeamError
from agentica_team.security import redact
from agentica_team.sessions import (
    AgentSession,
    AuditNote,
    EventHub,
    EventWriter,
    MessageState,
    NewEvent,
    SessionEvent,
    Sessions,
    encode_run_event,
    interrupted_event,
    status_event,
)
from agentica_team.telemetry import NOT_TRACED, OFF, Attribute, Telemetry, Traced

if TYPE_CHECKING:
    from agentica_team.accounts import Accounts
    from agentica_team.audit import Audit
    from agentica_team.budgets import Budgets
    from agentica_team.course_models import CourseModels
    from agentica_team.db import Database

__all__ = [
    "INSTRUCTIONS",
    "OUTCOMES",
    "BatchRuntime",
    "CancelRequested",
    "ExecutorChanged",
    "Inbox",
    "MessageQueued",
    "OperationCancelRequested",
    "RuntimeEvent",
    "RuntimeFactory",
    "SerialRuntime",
    "SessionRuntime",
    "SessionScope",
    "Supervisor",
    "Workbench",
    "message_span",
]

log = logging.getLogger("agentica_team.supervisor")

INSTRUCTIONS = (
    "You are a coding assistant for a student in a class. You work in the session's workspace "
    "through the file tools (ls, read_file, write_file, edit_file, glob, grep); there is no "
    "shell, so you cannot run code: reason about it carefully instead. Read files before you "
    "change them. For a task with several steps, list them with write_todos and mark each one "
    "done. Explain what you did briefly, so the student learns from it."
)
CONTINUE_PROMPT = (
    "Your earlier work on the following instruction was interrupted (the server stopped). The "
    "workspace may already hold part of it: look before you redo anything, then finish it.\n\n"
    "The instruction was:\n{text}"
)
SHUTDOWN_REASON = "the server stopped while this message was running"
WORKER_LOST = "the worker running it stopped; another worker took the session over"
RUN_LIMITS = RunLimits(max_turns=60, max_tool_calls=300, max_wall_time=1800.0)
_AUDIT_TEXT = 2000
OUTCOMES: Mapping[str, str] = {"done": "answered", "failed": "failed", "interrupted": "cancelled"}
"""A message's final state as its event span's ``outcome``."""


# -- the seam ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageQueued:
    """A message was appended to (or re-queued in) the session's log: there is work to do.
    The log is the truth; this event only says to look."""

    seq: int
    kind: Literal["message_queued"] = "message_queued"


@dataclass(frozen=True, slots=True)
class CancelRequested:
    """Stop what the session is running now (its message becomes ``interrupted``)."""

    reason: str
    kind: Literal["cancel_requested"] = "cancel_requested"


@dataclass(frozen=True, slots=True)
class ExecutorChanged:
    """One of the student's executors connected (``connected``) or went away."""

    executor: str
    connected: bool
    kind: Literal["executor_changed"] = "executor_changed"


@dataclass(frozen=True, slots=True)
class OperationCancelRequested:
    """Stop one operation (``op``, e.g. a lane's command) and let its lane go on; runtimes
    without operations ignore it."""

    op: str
    reason: str
    kind: Literal["operation_cancel_requested"] = "operation_cancel_requested"


RuntimeEvent: TypeAlias = (
    MessageQueued | CancelRequested | ExecutorChanged | OperationCancelRequested
)
"""What the supervisor delivers to a session's runtime (operation callbacks and timers stay
inside the runtime that started them)."""


class Inbox:
    """The events delivered to one session's loop that its runtime has not taken yet."""

    __slots__ = ("_events", "_ready")

    def __init__(self) -> None:
        self._events: deque[RuntimeEvent] = deque()
        self._ready = asyncio.Event()

    def put(self, event: RuntimeEvent) -> None:
        self._events.append(event)
        self._ready.set()

    def take(self) -> list[RuntimeEvent]:
        """Every waiting event (never waits)."""
        events = list(self._events)
        self._events.clear()
        self._ready.clear()
        return events

    def empty(self) -> bool:
        return not self._events

    async def wait(self) -> None:
        """Wait until an event is waiting."""
        while not self._events:
            self._ready.clear()
            await self._ready.wait()


AgentFactory: TypeAlias = Callable[[], Awaitable[Agent[str]]]


@dataclass(frozen=True, slots=True)
class Workbench:
    """Where a session's agent works: its ``files`` and, when it has one, the ``commands``
    backend its operations run on (``executor`` names it: a student's computer, or
    ``"server"`` when the teacher lets the server run them), and the ``others`` it may choose
    instead. Without commands the agent has file tools only."""

    files: FileBackend
    commands: CommandBackend | None = None
    executor: str = "server"
    others: Callable[[], list[tuple[str, str, CommandBackend]]] | None = None
    """The student's connected executors as ``(id, name, commands)``, to choose one per
    command (``None``: only ``commands``)."""


@dataclass(frozen=True, slots=True)
class SessionScope:
    """What a runtime works with: its session, the log (``sessions``), the ``writer`` its
    events go through, a factory of the session's agent (its conversation loaded from the
    service database), the budgets (compaction savings are counted there), a factory of the
    session's metered model, the framework's ``storage`` (more conversations, e.g. one per
    lane), the ``workbench`` and the service's ``telemetry`` (its spans)."""

    session: AgentSession
    sessions: Sessions
    writer: EventWriter
    new_agent: AgentFactory
    budgets: Budgets
    new_model: Callable[[], Awaitable[Model]]
    storage: SQLStorage
    workbench: Workbench
    telemetry: Telemetry = OFF


class SessionRuntime(Protocol):
    """The behaviour of one session's loop: how it turns its events into agent work.

    ``run(inbox)`` handles the inbox's events (and the work in the session's log they point
    to) and returns when the session is idle: nothing to do and the inbox empty, checked with
    no ``await`` between the check and the return, so an event delivered later starts a new
    loop. It writes what happens through ``scope.writer`` and keeps each message's state in
    the log. When its task is cancelled (the server stops) it marks what it was running
    ``interrupted`` without awaiting (``writer.put``) and re-raises.
    """

    async def run(self, inbox: Inbox) -> None: ...


RuntimeFactory: TypeAlias = Callable[[SessionScope], SessionRuntime]


# -- part 1's runtime ----------------------------------------------------------------------------


class SerialRuntime:
    """Part 1's runtime: the session's pending messages one at a time, oldest first, each one
    run of the session's agent; ``CancelRequested`` cancels the run in progress.

    Each run's events are appended to the log (audited: tool calls and results); compaction
    savings are counted on the budgets; a refused model call (``BudgetExceeded``,
    ``RateLimited``) ends the run with an event saying so and the message ``failed``.
    """

    def __init__(self, scope: SessionScope) -> None:
        self.scope = scope
        self._agent: Agent[str] | None = None
        self._running: Any = None  # the RunStream in progress

    batch = False
    """Whether one run takes every message waiting (``BatchRuntime``) or only the oldest."""

    async def run(self, inbox: Inbox) -> None:
        while True:
            inbox.take()  # hints only (the log is the truth); a cancel with nothing running
            messages = await self._take_pending()
            if not messages:
                if inbox.empty():
                    return
                continue
            await self._run_messages(messages, inbox)

    async def _take_pending(self) -> list[SessionEvent]:
        """The oldest pending message, or (batch) every pending one, each marked running and
        durable as such before it runs (a crash then leaves it ``interrupted`` on start)."""
        scope = self.scope
        taken: list[SessionEvent] = []
        while (message := await scope.sessions.next_pending(scope.session.id)) is not None:
            scope.writer.put(status_event(scope.session, "run_started", message.seq, "running"))
            await scope.writer.flush()
            taken.append(message)
            if not self.batch:
                break
        return taken

    async def _run_messages(self, messages: list[SessionEvent], inbox: Inbox) -> None:
        scope, session = self.scope, self.scope.session
        span = message_span(scope, messages, "batch" if self.batch else "serial")
        watcher = asyncio.create_task(self._watch(inbox, span))
        try:
            with span.current():  # the agent's run is exported under the message's span
                state, detail = await self._run_agent(messages)
        except asyncio.CancelledError:
            span.end("cancelled")
            for message in messages:
                scope.writer.put(interrupted_event(session, message.seq, SHUTDOWN_REASON))
            raise
        finally:
            watcher.cancel()
        span.end(OUTCOMES.get(state, "cancelled"), str(detail.get("error", "")))
        await self._report_budget()
        for message in messages:
            scope.writer.put(status_event(session, "run_ended", message.seq, state, **detail))
        await scope.writer.flush()

    async def _watch(self, inbox: Inbox, span: Traced) -> None:
        """Cancel the run in progress when a ``CancelRequested`` arrives (traced under the
        span of the message it stops)."""
        while True:
            await inbox.wait()
            for event in inbox.take():
                if isinstance(event, CancelRequested) and self._running is not None:
                    self._running.cancel(event.reason)
                    telemetry = self.scope.telemetry
                    telemetry.event(event.kind, self.scope.session, parent=span).end("cancelled")

    async def _run_agent(self, messages: list[SessionEvent]) -> tuple[MessageState, dict[str, Any]]:
        """Run the agent once on the messages; its final state and what to say about it."""
        prompt = "\n\n".join(_prompt(message) for message in messages)
        try:
            if self._agent is None:
                self._agent = await self.scope.new_agent()
            async with self._agent.run_stream(prompt, limits=RUN_LIMITS) as stream:
                self._running = stream
                async for event in stream:
                    await self._on_event(event)
            return "done", {}
        except RunCancelled as exc:
            return "interrupted", {"reason": str(exc)}
        except TeamError as exc:  # a model call refused: budget, rate limit, model unavailable
            await self._put_run({"kind": exc.kind, "message": exc.message, **exc.detail})
            return "failed", {"error": exc.kind}
        except AgenticaError as exc:
            error = type(exc).__name__
            await self._put_run({"kind": "run_failed", "error": error, "message": _said(exc)})
            return "failed", {"error": error}
        except Exception as exc:
            log.error("session %s: the agent failed: %s: %s", self.scope.session.id,
                      type(exc).__name__, redact(str(exc))[:2000])  # fmt: skip
            text = "the agent failed unexpectedly (the server logged it)"
            await self._put_run({"kind": "run_failed", "error": "internal", "message": text})
            return "failed", {"error": "internal"}
        finally:
            self._running = None

    async def _put_run(self, data: dict[str, Any], audit: tuple[AuditNote, ...] = ()) -> None:
        await self.scope.writer.append(NewEvent(self.scope.session.id, "run", data, audit=audit))

    async def _on_event(self, event: RunEvent) -> None:
        await self._put_run(encode_run_event(event), self._audit_notes(event))
        if isinstance(event, ContextCompacted) and event.before > event.after:
            await self._count_savings(event.before - event.after)
        elif isinstance(event, ToolCallCompleted) and event.call.name == "write_todos":
            assert self._agent is not None
            todos = self._agent.memory.state.get("todos")
            await self._put_run(
                {"kind": "todos", "items": todos if isinstance(todos, list) else []}
            )

    def _audit_notes(self, event: RunEvent) -> tuple[AuditNote, ...]:
        session = self.scope.session
        if isinstance(event, ToolCallStarted):
            call = event.call
            kind = "tool_call"
            data: dict[str, Any] = {"arguments": call.call.arguments[:_AUDIT_TEXT]}
        elif isinstance(event, ToolCallCompleted):
            call = event.call
            kind = "tool_result"
            data = {"status": call.status, "result": call.content[:_AUDIT_TEXT],
                    "duration": round(call.duration, 4)}  # fmt: skip
        else:
            return ()
        data = {"session_id": session.id, "call_id": call.id, "tool": call.name, **data}
        return (AuditNote(kind, session.user_id, session.course_id, session.id, data),)

    async def _count_savings(self, tokens: int) -> None:
        session = self.scope.session
        try:
            await self.scope.budgets.add_compaction_savings(
                session.course_id, session.user_id, tokens, source="agent"
            )
        except Exception as exc:  # counting must never end the run
            log.warning("could not count compaction savings: %s", redact(str(exc))[:500])

    async def _report_budget(self) -> None:
        """A ``budget`` event: what is left of the student's budgets (when any apply)."""
        session = self.scope.session
        try:
            remaining = await self.scope.budgets.remaining(session.course_id, session.user_id)
        except Exception as exc:
            log.warning("could not read the remaining budget: %s", redact(str(exc))[:500])
            return
        if remaining:
            budgets = [
                {"scope": r.scope, "period": r.period, "remaining_tokens": r.remaining_tokens,
                 "remaining_cost_micros": r.remaining_cost_micros, "resets_at": r.resets_at}
                for r in remaining
            ]  # fmt: skip
            await self._put_run({"kind": "budget", "budgets": budgets})


class BatchRuntime(SerialRuntime):
    """The batch-locked runtime: what arrived while the agent worked is handed over together,
    as one run on all the waiting messages (in order), instead of one run each."""

    batch = True


def message_span(scope: SessionScope, messages: Sequence[SessionEvent], runtime: str) -> Traced:
    """A started ``team.event`` span of handling ``messages`` (one, or a batch's several): the
    first one's kind and seq, their seqs, their texts' length (never the text)."""
    if not scope.telemetry.enabled:
        return NOT_TRACED
    first = messages[0]
    kind = "teacher_message" if first.data.get("role") == "teacher" else "user_message"
    attributes: dict[str, Attribute] = {
        "message.seq": first.seq,
        "message.length": sum(len(str(m.data.get("text", ""))) for m in messages),
        "runtime": runtime,
    }
    if len(messages) > 1:
        attributes["message.seqs"] = [m.seq for m in messages]
    if any(m.data.get("continued") for m in messages):
        attributes["message.continued"] = True
    return scope.telemetry.event(kind, scope.session, attributes)


def _prompt(message: SessionEvent) -> str:
    text = str(message.data.get("text", ""))
    if message.data.get("role") == "teacher":
        text = f"The student's teacher says: {text}"
    return CONTINUE_PROMPT.format(text=text) if message.data.get("continued") else text


def _encode(event: RuntimeEvent) -> dict[str, Any]:
    if isinstance(event, MessageQueued):
        return {"kind": event.kind, "seq": event.seq}
    if isinstance(event, ExecutorChanged):
        return {"kind": event.kind, "executor": event.executor, "connected": event.connected}
    if isinstance(event, OperationCancelRequested):
        return {"kind": event.kind, "op": event.op, "reason": event.reason}
    return {"kind": event.kind, "reason": event.reason}


def _decode(data: object) -> RuntimeEvent | None:
    if not isinstance(data, dict):
        return None
    if data.get("kind") == "message_queued":
        return MessageQueued(int(data.get("seq", 0)))
    if data.get("kind") == "cancel_requested":
        return CancelRequested(str(data.get("reason", "")))
    if data.get("kind") == "operation_cancel_requested":
        return OperationCancelRequested(str(data.get("op", "")), str(data.get("reason", "")))
    return None


def _said(exc: BaseException) -> str:
    return redact(str(exc))[:2000] or type(exc).__name__


# -- the supervisor ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Loop:
    """One session's loop: its task and its inbox."""

    user_id: str
    inbox: Inbox = field(default_factory=Inbox)
    task: asyncio.Task[None] | None = None


class Supervisor:
    """Owns the agent loops of the service's sessions (see the module docstring).

    ``deliver(session, event)`` hands an event to the session's loop, starting one if it has
    none; a loop ends when its runtime is idle. ``start()`` marks messages a crash left
    ``running`` as ``interrupted`` (they are not rerun: ``Sessions.requeue`` continues them)
    and resumes sessions with pending messages; ``aclose()`` cancels the loops (their messages
    become ``interrupted``), writes the queued events and ends the live streams.

    The agent of a session is an ``Agent`` on the course's metered model for the session's
    owner, with its conversation in the framework's ``SQLStorage`` on the service database
    (``user_id`` the owner, ``session_id`` the session) and file tools over a ``StoreBackend``
    of that storage (namespace: the session): a per-session workspace, no shell.

    Alone (no ``cluster``) it is the only supervisor of its database: ``start()`` takes every
    ``running`` message for a crash's leftover. With a ``Cluster`` (several workers on one
    PostgreSQL database) a session's loop runs on the worker that holds its lease: ``deliver``
    of a session with no loop here posts a wake on the bus; every worker hearing it may claim
    the session, the one with the student's executors (``prefers``) at once and the others
    after ``affinity_delay``, longer the more loops they run (so sessions spread). Every
    ``sweep_every`` seconds each worker claims the sessions with pending or running messages
    whose lease nobody holds (a worker died, a wake was lost); the claimer puts the messages
    a dead worker left ``running`` back in the queue (``resumed``), so they run again, once,
    there. Live subscribers hear of events written on other workers through the bus.
    """

    def __init__(
        self,
        db: Database,
        *,
        accounts: Accounts,
        models: CourseModels,
        audit: Audit,
        budgets: Budgets,
        runtime: RuntimeFactory = SerialRuntime,
        subscriber_limit: int = 2000,
        workbench: Callable[[AgentSession], Workbench | None] | None = None,
        cluster: Cluster | None = None,
        prefers: Callable[[str], bool] | None = None,
        sweep_every: float = 1.0,
        affinity_delay: float = 0.2,
        knowledge: CourseKnowledge | None = None,
        telemetry: Telemetry = OFF,
    ) -> None:
        self.db = db
        self.telemetry = telemetry
        self.knowledge = knowledge
        self.accounts = accounts
        self.models = models
        self.budgets = budgets
        self.hub = EventHub(limit=subscriber_limit)
        self.sessions = Sessions(db, audit, self.hub)
        self.writer = self.sessions.writer
        self.storage = SQLStorage(db.url)
        self.runtime = runtime
        self._workbench = workbench
        self._loops: dict[str, _Loop] = {}
        self._closing = False
        self.cluster = cluster
        self._prefers = prefers
        self._sweep_every = sweep_every
        self._affinity_delay = affinity_delay
        self._claiming: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the framework's tables, mark crashed runs interrupted, resume pending work."""
        if self.cluster is not None:  # first: it is what fails when Redis is unreachable
            await self.cluster.start(self._heard, self._lost)
        self.writer.start()
        await self.storage.list_sessions("~team~", limit=1)  # creates or checks its schema now
        if self.cluster is not None:
            cluster = self.cluster
            self.hub.relay = lambda session_id, events: cluster.post(
                "committed", session_id, {"first": events[0].seq, "last": events[-1].seq}
            )
            self._spawn(self._sweep(), "agentica-team session sweep")
            return
        count = await self.sessions.interrupt_running(SHUTDOWN_REASON)
        if count:
            log.warning("%d agent runs were interrupted by a crash; they can be continued", count)
        for session in await self.sessions.with_messages("pending"):
            self.deliver(session, MessageQueued(0))

    async def aclose(self) -> None:
        """Cancel every loop (their messages become interrupted), write what is queued, end
        the live streams and close the framework's storage."""
        self._closing = True
        background = list(self._background)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        tasks = [loop.task for loop in self._loops.values() if loop.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.writer.aclose()
        if self.cluster is not None:
            await self.cluster.aclose()
        self.hub.close()
        await self.storage.aclose()

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        task.set_name(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- loops -------------------------------------------------------------------------------

    def deliver(self, session: AgentSession, event: RuntimeEvent) -> bool:
        """Give ``event`` to ``session``'s loop, starting one when it has none (a cancel, of
        the run or of an operation, with no loop is dropped); whether it was delivered."""
        if self._closing:
            return False
        loop = self._loops.get(session.id)
        if loop is None and self.cluster is not None:  # its loop is elsewhere, or nowhere yet
            data = {"user": session.user_id, "event": _encode(event)}
            self.cluster.post("wake", session.id, data)
            return True
        if loop is None:
            if isinstance(event, CancelRequested | OperationCancelRequested):
                return False
            loop = self._start_loop(session)
        loop.inbox.put(event)
        return True

    async def stop(self, session: AgentSession, reason: str) -> None:
        """Stop ``session``'s loop and wait until it has ended and its events are written
        (what it was running becomes ``interrupted``); a loop on another worker is sent a
        cancel instead. A message delivered later starts a new loop."""
        loop = self._loops.get(session.id)
        if loop is None or loop.task is None:
            if self.cluster is not None:
                data = {"user": session.user_id, "event": _encode(CancelRequested(reason))}
                self.cluster.post("wake", session.id, data)
            return
        loop.task.cancel()
        await asyncio.wait([loop.task])  # unlike awaiting the task, never raises its cancel
        await self.writer.flush()

    async def forget(self, session: AgentSession) -> None:
        """Delete what the framework's storage keeps for ``session``: its agent's conversation,
        its lanes' conversations and its workspace files (the session's rows are the
        ``Sessions``')."""
        user = session.user_id
        names = {session.id, StoreBackend(self.storage, user, namespace=session.id).session_id}
        for info in await self.storage.list_sessions(user, limit=100_000):
            if info.session_id.startswith(session.id + "~"):  # a lane's conversation
                names.add(info.session_id)
        for name in sorted(names):
            await self.storage.delete_session(user, name)

    def _start_loop(self, session: AgentSession) -> _Loop:
        loop = self._loops[session.id] = _Loop(session.user_id)
        loop.task = asyncio.create_task(self._own(session, loop), name=f"session {session.id}")
        return loop

    # -- several workers ---------------------------------------------------------------------

    async def _heard(self, message: BusMessage) -> None:
        """A message on the bus (see the class docstring)."""
        if message.kind == "committed":
            if message.worker != self._worker and self.hub.subscribers(message.session_id):
                first, last = int(message.data["first"]), int(message.data["last"])
                events = await self.sessions.events(
                    message.session_id, after=first - 1, before=last + 1, limit=last - first + 1
                )
                self.hub.push(message.session_id, events)
            return
        event = _decode(message.data.get("event"))
        loop = self._loops.get(message.session_id)
        if loop is not None:
            if event is not None:
                loop.inbox.put(event)
            return
        if isinstance(event, MessageQueued):
            prefers = self._prefers is not None and self._prefers(str(message.data.get("user")))
            # the less busy a worker, the sooner it claims: sessions spread over the workers
            delay = self._affinity_delay * (1 + len(self._loops) / 8)
            self._claim_soon(message.session_id, 0.0 if prefers else delay)

    @property
    def _worker(self) -> str:
        return self.cluster.worker if self.cluster is not None else ""

    def _claim_soon(self, session_id: str, delay: float) -> None:
        if session_id in self._claiming or session_id in self._loops or self._closing:
            return
        self._claiming.add(session_id)
        self._spawn(self._claim(session_id, delay), f"claim {session_id}")

    async def _claim(self, session_id: str, delay: float) -> None:
        """Take ``session_id``'s lease (after ``delay``) and, when this worker got it, resume
        what a lost worker left running and start the session's loop."""
        assert self.cluster is not None
        try:
            if delay:
                await asyncio.sleep(delay)
            if session_id in self._loops or not await self.cluster.acquire(session_id):
                return
            try:
                session = await self.sessions.get(session_id)
                resumed = await self.sessions.resume_running(session, WORKER_LOST)
            except BaseException:
                await self.cluster.release(session_id)
                raise
            if resumed:
                log.warning("session %s: resumed messages %s of a worker that stopped",
                            session_id, resumed)  # fmt: skip
            if self._closing:
                await self.cluster.release(session_id)
                return
            self._start_loop(session).inbox.put(MessageQueued(0))
        except (AgenticaError, OSError) as exc:  # a session deleted meanwhile, a DB hiccup
            log.warning("could not take session %s: %s", session_id, exc)
        finally:
            self._claiming.discard(session_id)

    def _lost(self, session_id: str) -> None:
        """Another worker holds the session's lease now: stop its loop here."""
        loop = self._loops.get(session_id)
        if loop is not None and loop.task is not None:
            loop.task.cancel()

    async def _sweep(self) -> None:
        """Claim the sessions with work whose lease nobody holds, every ``sweep_every`` s."""
        assert self.cluster is not None
        while True:
            try:
                sessions = await self.sessions.with_messages("pending", "running")
                free = [s.id for s in sessions if s.id not in self._loops]
                delay = self._affinity_delay * len(self._loops) / 8  # the least busy first
                for session_id, held in zip(free, await self.cluster.held(free), strict=True):
                    if not held:
                        self._claim_soon(session_id, delay)
            except Exception as exc:  # the sweep must survive a hiccup of Redis or the DB
                log.warning("the session sweep failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(self._sweep_every)

    def executor_changed(self, user_id: str, executor: str, *, connected: bool) -> None:
        """Tell the loops of ``user_id``'s sessions running here that one of the student's
        executors connected or went away (its unfinished operations fail at once)."""
        event = ExecutorChanged(executor, connected)
        for loop in list(self._loops.values()):
            if loop.user_id == user_id:
                loop.inbox.put(event)

    def active(self, session_id: str) -> bool:
        """Whether ``session_id`` has a loop now."""
        return session_id in self._loops

    @property
    def loops(self) -> int:
        """How many sessions have a loop now."""
        return len(self._loops)

    async def _own(self, session: AgentSession, loop: _Loop) -> None:
        """The task of one session's loop: run its runtime until idle, then end."""
        scope = SessionScope(
            session,
            self.sessions,
            self.writer,
            lambda: self._new_agent(session),
            self.budgets,
            lambda: self._new_model(session),
            self.storage,
            self.workbench_of(session),
            self.telemetry,
        )
        try:
            await self.runtime(scope).run(loop.inbox)
        except Exception as exc:
            log.error("the loop of session %s failed: %s: %s", session.id, type(exc).__name__,
                      redact(str(exc))[:2000])  # fmt: skip
        finally:
            if self.cluster is not None:  # still registered: what arrives meanwhile is kept
                await self.cluster.release(session.id)
            # no await from here: a later deliver() starts a new loop
            if self._loops.get(session.id) is loop:
                del self._loops[session.id]
            if self.cluster is not None and not loop.inbox.empty():
                self._claim_soon(session.id, 0.0)

    async def _new_model(self, session: AgentSession) -> Model:
        return await self.models.for_user(
            session.course_id, session.user_id, source="agent", session_id=session.id
        )

    def workbench_of(self, session: AgentSession) -> Workbench:
        """Where ``session``'s agent works: what the ``workbench`` given chooses, else (or when
        it chooses ``None``) its files in the service database and no commands."""
        chosen = self._workbench(session) if self._workbench is not None else None
        return chosen if chosen is not None else Workbench(self.workspace(session))

    async def _new_agent(self, session: AgentSession) -> Agent[str]:
        model = await self._new_model(session)
        files = FileTools(self.workbench_of(session).files)
        tools: list[ToolLike] = [files]
        capabilities: list[Capability] = [WorkspaceOverview(files), Todos(), RepetitionGuard()]
        capabilities += self.telemetry.capabilities()  # its runs exported (tracing on)
        if self.knowledge is not None and self.knowledge.missing() is None:
            # what the course's teacher shared, nothing else (a failure here costs only that)
            try:
                if await self.knowledge.materials(session.course_id):
                    base = await self.knowledge.base(session.course_id)
                    tools.append(KnowledgeTools(base, max_results=5))
                capabilities.append(SharedAnswers(self.knowledge, session.course_id))
            except TeamError as exc:
                log.warning("course knowledge of %s is unavailable: %s", session.course_id, exc)
        return Agent(
            model=model,
            name="assistant",
            instructions=INSTRUCTIONS,
            tools=tools,
            capabilities=capabilities,
            storage=self.storage,
            user_id=session.user_id,
            session_id=session.id,
        )

    def workspace(self, session: AgentSession) -> StoreBackend:
        """The session's files (kept in the service database)."""
        return StoreBackend(self.storage, session.user_id, namespace=session.id)
