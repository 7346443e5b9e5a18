"""``LanesRuntime``: a session's event-driven runtime in lanes, carrying out ``transition``.

Every event (a student's message, an operation's outcome, a routing, a step's end) is fed to
``agentica_team.transition.transition`` and written to the session's log (kind ``lane``, with a
snapshot of the lanes after it when they changed: ``lanes``); the actions it returns run as
tasks of the session's loop, and what they produce comes back as events:

- ``Route``: the event context (one model call with a structured answer) puts a message in a
  new lane, interrupts a lane, adds it to a lane for its next step, or answers it at once.
- ``Infer``: one step of a lane's agent (its own conversation, the session's files, and the
  operation tools ``start_command`` / ``stop_command`` / ``lane_done``) on what is new to it.
  ``start_command`` returns at once: the command runs on the session's ``Workbench`` (a
  student's executor, or this server when the teacher allows it) and its end is an event.
- ``HandleInterruptions``: the interruption context (one model call) decides whether to
  cancel operations, change the lane's intent, terminate it, or resume.
- ``CancelOperation`` stops a command; ``EndLane`` says the lane ended and finishes the
  messages it served.

An ``OperationCancelRequested`` (a student or teacher stops one command) stops that command
only: its lane sees the command fail and goes on.

Nothing blocks: a lane waiting for a long command costs no model call, and an interruption is
handled while the command runs. Cancelling the loop (the server stops) stops the commands and
marks the running messages interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from agentica.agent import Agent
from agentica.deep.files import FileTools
from agentica.errors import AgenticaError, RunCancelled, ToolError
from agentica.limits import RunLimits
from agentica.tools.commands import CommandBackend, CommandHandle, CommandResult
from agentica.tools.function import tool
from agentica_team.errors import TeamError
from agentica_team.security import redact
from agentica_team.sessions import (
    AuditNote,
    MessageState,
    NewEvent,
    SessionEvent,
    interrupted_event,
    status_event,
)
from agentica_team.supervisor import (
    OUTCOMES,
    CancelRequested,
    ExecutorChanged,
    Inbox,
    OperationCancelRequested,
    RuntimeEvent,
    SessionScope,
    message_span,
)
from agentica_team.telemetry import NOT_TRACED, Attribute, Traced
from agentica_team.transition import (
    DISCONNECTED,
    Action,
    AgentState,
    CancelOperation,
    EndLane,
    Event,
    ExecutorConnected,
    ExecutorDisconnected,
    HandleInterruptions,
    Infer,
    Interruption,
    InterruptionHandled,
    Lane,
    LaneStepDone,
    Operation,
    OperationCompleted,
    OperationFailed,
    OperationStarted,
    Route,
    Routed,
    StopStep,
    TeacherMessage,
    Timer,
    UserMessage,
    transition,
)

__all__ = ["InterruptChoice", "LanesRuntime", "RouteChoice"]

log = logging.getLogger("agentica_team.runtime")

ROUTER = (
    "You route a student's messages to the agent's lanes: each lane is one piece of work "
    "going on. Answer with one choice: `new_lane` for new work (give its intent in a few "
    "words), `interrupt` when the message changes or stops work in a lane (name the lane), "
    "`add_to_lane` when it adds to a lane's work without hurry (name the lane), or `answer` "
    "when you can reply at once (give the answer)."
)
INTERRUPTER = (
    "A lane of work was interrupted by the student. Decide: the lane's new intent if the "
    "student changed what they want (else empty), the operations to cancel (their ids) when "
    "they no longer serve the intent, and `terminate` with a short reason only if the student "
    "wants the lane stopped."
)
LANE = (
    "You work on one task for a student: {intent}. Use the file tools on the workspace. Run "
    "commands with start_command: it returns at once, and you are told when the command ends, "
    "so end your turn after starting one. Call lane_done with a short summary when the task is "
    "complete."
)
STEP_LIMITS = RunLimits(max_turns=20, max_tool_calls=60, max_wall_time=900.0)
_OUTPUT_TAIL = 2000


@dataclass
class RouteChoice:
    """The event context's answer for one message."""

    to: Literal["new_lane", "interrupt", "add_to_lane", "answer"]
    lane: str = ""
    intent: str = ""
    answer: str = ""


@dataclass
class InterruptChoice:
    """The interruption context's answer for one lane."""

    intent: str = ""
    cancel: list[str] = field(default_factory=list)
    terminate: str = ""


@dataclass
class _LaneWork:
    """What the runtime keeps for a lane besides the transition's state."""

    agent: Agent[str] | None = None
    step: Any = None  # the RunStream of the step in progress
    stop: str = ""  # why the step in progress must stop (StopStep), if it must
    messages: list[int] = field(default_factory=list)
    finished: bool = False
    summary: str = ""
    failure: str = ""
    span: Traced = NOT_TRACED  # of the message it serves last: its steps run under it


class LanesRuntime:
    """A session's loop in lanes (a ``SessionRuntime``; see the module docstring)."""

    def __init__(self, scope: SessionScope) -> None:
        self.scope = scope
        self.state = AgentState(mode="lanes")
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._handles: dict[str, CommandHandle] = {}
        self._lanes: dict[str, _LaneWork] = {}
        self._running: dict[int, str] = {}  # message seq -> lane ("" while routed)
        self._ids = {"lane": 0, "op": 0}
        self._snapshot: list[dict[str, Any]] = []  # the lanes as last logged
        self._stopped: dict[str, str] = {}  # op -> why it was cancelled on request
        self._spans: dict[int, Traced] = {}  # message seq -> its event span, until it ends

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, inbox: Inbox) -> None:
        try:
            while True:
                for delivered in inbox.take():
                    await self._delivered(delivered)
                while not self._events.empty():
                    self._feed(self._events.get_nowait())
                if self._idle() and inbox.empty() and self._events.empty():
                    return
                await self._wait(inbox)
        except asyncio.CancelledError:
            for seq in self._running:
                self.scope.writer.put(_interrupted(self.scope, seq))
            raise
        finally:
            for seq in list(self._spans):
                self._end_span(seq, "interrupted")
            await self._stop_everything()

    def _idle(self) -> bool:
        return (
            not self._tasks
            and not self._running
            and not any(lane.active for lane in self.state.lanes)
        )

    async def _wait(self, inbox: Inbox) -> None:
        delivered = asyncio.ensure_future(inbox.wait())
        got: asyncio.Future[Event] = asyncio.ensure_future(self._events.get())
        try:
            await asyncio.wait((delivered, got), return_when=asyncio.FIRST_COMPLETED)
        finally:
            delivered.cancel()
            got.cancel()  # a get cancelled before it took an item leaves the item queued
        if got.done() and not got.cancelled():
            self._feed(got.result())

    async def _delivered(self, delivered: RuntimeEvent) -> None:
        if isinstance(delivered, OperationCancelRequested):
            self._cancel_one(delivered.op, delivered.reason)
            return
        if isinstance(delivered, ExecutorChanged):
            change = ExecutorConnected if delivered.connected else ExecutorDisconnected
            self._feed(change(delivered.executor))
            return
        if isinstance(delivered, CancelRequested):
            self._cancel_all(delivered)
            return
        scope = self.scope
        while (message := await scope.sessions.next_pending(scope.session.id)) is not None:
            scope.writer.put(status_event(scope.session, "run_started", message.seq, "running"))
            await scope.writer.flush()  # durable before it is handled
            self._running[message.seq] = ""
            self._spans[message.seq] = message_span(scope, [message], "lanes")
            self._feed(_message_event(message))

    def _cancel_all(self, cancel: CancelRequested) -> None:
        """Stop every active lane (their operations cancelled)."""
        stopped = 0
        for lane in self.state.lanes:
            if lane.active:
                stopped += 1
                ops = tuple(op.id for op in lane.operations if op.unfinished)
                self._events.put_nowait(
                    InterruptionHandled(lane.id, cancel=ops, terminate=cancel.reason)
                )
        span = self.scope.telemetry.event(cancel.kind, self.scope.session, {"lanes": stopped})
        span.end("cancelled" if stopped else "ignored")

    def _feed(self, event: Event) -> None:
        """Apply ``event``, log it (with the lanes' snapshot when they changed), start the
        actions."""
        if isinstance(event, Routed) and event.to != "answered" and event.seq in self._running:
            self._assign(event)
        self.state, actions = transition(self.state, event)
        record: dict[str, Any] = {"kind": "event", "event": _describe(event)}
        lanes = _snapshot(self.state.lanes)
        if lanes != self._snapshot:
            record["lanes"] = self._snapshot = lanes
        self._put(record)
        for action in actions:
            self._start(action)

    def _cancel_one(self, op: str, reason: str) -> None:
        """Stop operation ``op`` if it is unfinished; its lane hears of it as the operation's
        failure and goes on (``CancelOperation`` directly: an ``InterruptionHandled`` would
        put a lane whose step is running back to rest)."""
        lane = self.state.lane_of(op)
        telemetry, session = self.scope.telemetry, self.scope.session
        span = telemetry.event("operation_cancel_requested", session, {"operation.id": op})
        if lane is None or not any(o.id == op and o.unfinished for o in lane.operations):
            span.end("ignored")
            return  # it ended meanwhile (the request saw an older snapshot)
        span.set("lane", lane.id)
        span.end("cancelled")
        self._stopped[op] = reason
        self._put({"kind": "operation_cancel_requested", "lane": lane.id, "op": op,
                   "reason": reason})  # fmt: skip
        self._start(CancelOperation(op))

    def _assign(self, event: Routed) -> None:
        """Which lane the routed message belongs to, as ``transition`` decides it (a lane that
        ended meanwhile gets a successor)."""
        target = self.state.lane(event.lane)
        lane = event.lane
        if event.to != "new" and (target is None or not target.active):
            lane = f"{event.lane}.{event.seq}"
        work = self._lanes.setdefault(lane, _LaneWork())
        work.messages.append(event.seq)
        work.span = self._spans.get(event.seq, work.span)
        self._running[event.seq] = lane

    def _start(self, action: Action) -> None:
        work: Coroutine[Any, Any, None]
        if isinstance(action, Route):
            work = self._route(action)
        elif isinstance(action, Infer):
            work = self._infer(action)
        elif isinstance(action, HandleInterruptions):
            work = self._interrupt(action)
        elif isinstance(action, CancelOperation):
            work = self._cancel(action.op)
        elif isinstance(action, EndLane):
            self._end_lane(action)
            return
        elif isinstance(action, StopStep):
            self._stop_step(action.lane)
            return
        else:  # RunStep belongs to the serial and batch runtimes
            raise AssertionError(f"the lanes runtime cannot run {action!r}")
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _stop_step(self, lane: str) -> None:
        """Stop ``lane``'s inference step now, or as soon as it begins."""
        lane_work = self._lanes.setdefault(lane, _LaneWork())
        lane_work.stop = "the student interrupted this lane"
        if lane_work.step is not None:
            lane_work.step.cancel(lane_work.stop)

    def _put(self, data: dict[str, Any], audit: tuple[AuditNote, ...] = ()) -> None:
        self.scope.writer.put(NewEvent(self.scope.session.id, "lane", data, audit=audit))

    # -- actions -----------------------------------------------------------------------------

    async def _route(self, action: Route) -> None:
        message = action.message
        seq = message.seq
        prompt = self._routing_prompt(message)
        try:
            with self._spans.get(seq, NOT_TRACED).current():  # the router's run under it
                choice = await self._ask("router", ROUTER, prompt, RouteChoice)
        except Exception as exc:  # a task's failure must come back as an event, never hang
            self._fail_message(seq, exc)
            self._events.put_nowait(Routed(seq, "answered"))
            return
        if choice.to == "answer" and choice.answer.strip():  # an empty answer: a lane does it
            self._answer(seq, choice.answer)
            self._events.put_nowait(Routed(seq, "answered"))
            return
        intent = choice.intent.strip() or _text(message)
        if choice.to in ("new_lane", "answer") or self.state.lane(choice.lane) is None:
            self._ids["lane"] += 1
            self._events.put_nowait(Routed(seq, "new", f"L{self._ids['lane']}", intent))
            return
        to: Literal["interrupt", "preempt"] = "interrupt" if choice.to == "interrupt" else "preempt"
        self._events.put_nowait(Routed(seq, to, choice.lane, intent))

    def _routing_prompt(self, message: UserMessage | TeacherMessage | Interruption) -> str:
        lanes = [
            f"- {lane.id}: {lane.intent} ({lane.status}; operations: "
            + (", ".join(f"{op.id} `{op.what}` {op.status}" for op in lane.operations) or "none")
            + ")"
            for lane in self.state.lanes
            if lane.active
        ]
        who = "The teacher" if isinstance(message, TeacherMessage) else "The student"
        listing = "\n".join(lanes) or "(no lanes yet)"
        return f"Lanes now:\n{listing}\n\n{who} writes: {message.text}"

    async def _infer(self, action: Infer) -> None:
        work = self._lanes.setdefault(action.lane, _LaneWork())
        try:
            if work.agent is None:
                work.agent = await self._lane_agent(action.lane, action.intent)
            with work.span.current(), self.scope.telemetry.lane(action.lane):
                await self._step(work, action)
        except RunCancelled:
            pass  # stopped for an interruption (StopStep): handled next
        except Exception as exc:  # the step ends either way; the lane ends as failed
            said = _failure(exc, self.scope.session.id)
            work.failure = f"failed: {said}"
            self._put({"kind": "lane_failed", "lane": action.lane, "error": said})
        finally:
            work.step, work.stop = None, ""
        self._events.put_nowait(LaneStepDone(action.lane, finished=work.finished))

    async def _step(self, work: _LaneWork, action: Infer) -> None:
        assert work.agent is not None
        async with work.agent.run_stream(_step_prompt(action), limits=STEP_LIMITS) as stream:
            work.step = stream
            if work.stop:  # stopped before it began
                stream.cancel(work.stop)
            async for _ in stream:
                pass

    async def _interrupt(self, action: HandleInterruptions) -> None:
        lane = self.state.lane(action.lane)
        ops = [op for op in (lane.operations if lane else ()) if op.unfinished]
        said = "\n".join(f"- {_text(event)}" for event in action.events)
        running = "\n".join(f"- {op.id}: `{op.what}`" for op in ops) or "(none)"
        prompt = (
            f"The lane's intent: {action.intent}\nIts running operations:\n{running}\n\n"
            f"The student interrupted it:\n{said}"
        )
        span, failed = self._interruption_span(action, len(ops)), ""
        try:
            with span.current():  # the interruption context's run under it
                choice = await self._ask("interrupter", INTERRUPTER, prompt, InterruptChoice)
        except asyncio.CancelledError:
            span.end("cancelled")
            raise
        except Exception as exc:
            said = _failure(exc, self.scope.session.id)
            choice = InterruptChoice(terminate=f"the interruption could not be handled: {said}")
            failed = type(exc).__name__
        known = {op.id for op in ops}
        cancel = tuple(op for op in choice.cancel if op in known)
        span.set("operations.cancelled", len(cancel))
        span.set("terminated", bool(choice.terminate.strip()))
        span.end("failed" if failed else "answered", failed)
        self._events.put_nowait(
            InterruptionHandled(action.lane, choice.intent.strip(), cancel, choice.terminate)
        )

    def _interruption_span(self, action: HandleInterruptions, running: int) -> Traced:
        """A ``team.event interruption`` span under the span of the message that interrupted
        (a new message routed to interrupt the lane)."""
        seqs = [event.seq for event in action.events if isinstance(event, Interruption)]
        parent = self._spans.get(seqs[0]) if seqs else None
        attributes: dict[str, Attribute] = {
            "lane": action.lane, "operations.running": running, "message.seqs": seqs,
        }  # fmt: skip
        return self.scope.telemetry.event("interruption", self.scope.session, attributes,
                                          parent=parent)  # fmt: skip

    async def _cancel(self, op: str) -> None:
        handle = self._handles.get(op)
        if handle is not None:
            with contextlib.suppress(Exception):
                await handle.stop()

    def _end_lane(self, action: EndLane) -> None:
        work = self._lanes.get(action.lane, _LaneWork())
        reason = work.failure or action.reason
        self._put({"kind": "lane_ended", "lane": action.lane, "reason": reason,
                   "summary": work.summary})  # fmt: skip
        state: MessageState = (
            "done" if reason == "done" else "failed" if work.failure else "interrupted"
        )
        for seq in work.messages:
            if self._running.pop(seq, None) is not None:
                self.scope.writer.put(
                    status_event(self.scope.session, "run_ended", seq, state, lane=action.lane)
                )
                self._end_span(seq, state, "lane_failed" if work.failure else "")

    # -- the agents --------------------------------------------------------------------------

    async def _ask(self, name: str, instructions: str, prompt: str, output: type[Any]) -> Any:
        model = await self.scope.new_model()
        agent: Agent[Any] = Agent(
            model=model, name=name, instructions=instructions, output_type=output,
            capabilities=self.scope.telemetry.capabilities(),
        )  # fmt: skip
        result = await agent.run(prompt, limits=RunLimits(max_turns=3))
        return result.output

    async def _lane_agent(self, lane: str, intent: str) -> Agent[str]:
        scope = self.scope
        model = await scope.new_model()
        return Agent(
            model=model,
            name=f"lane {lane}",
            instructions=LANE.format(intent=intent),
            tools=[FileTools(scope.workbench.files), *self._operation_tools(lane)],
            capabilities=scope.telemetry.capabilities(),
            storage=scope.storage,
            user_id=scope.session.user_id,
            session_id=f"{scope.session.id}~{lane}",
        )

    def _operation_tools(self, lane: str) -> list[Any]:
        runtime = self

        @tool
        async def start_command(command: str, executor: str = "") -> str:
            """Start a shell command in the workspace; returns its operation id at once. You
            are told when it ends: end your turn after starting it. ``executor``: which of the
            student's computers runs it (list_executors; default: the session's)."""
            return await runtime._start_command(lane, command, executor)

        @tool
        def list_executors() -> str:
            """The student's computers that can run commands."""
            return runtime._list_executors()

        @tool
        async def stop_command(id: str) -> str:
            """Stop a running command by its operation id."""
            if id not in runtime._handles:
                raise ToolError(f"there is no operation {id!r}; the ids are like op1")
            await runtime._cancel(id)
            return f"{id} stopped"

        @tool
        def lane_done(summary: str) -> str:
            """Say the task is complete, with a short summary for the student."""
            work = runtime._lanes.setdefault(lane, _LaneWork())
            work.finished, work.summary = True, summary[:2000]
            return "noted: the lane ends when this turn ends"

        return [start_command, stop_command, lane_done, list_executors]

    def _list_executors(self) -> str:
        workbench = self.scope.workbench
        if workbench.others is None:
            return f"{workbench.executor} (the session's)" if workbench.commands else "none"
        lines = [
            f"{ident}: {name}" + (" (the session's)" if ident == workbench.executor else "")
            for ident, name, _ in workbench.others()
        ]
        return "\n".join(lines) or "none: ask the student to run `agentica connect`"

    def _commands(self, executor: str) -> tuple[str, CommandBackend]:
        workbench = self.scope.workbench
        if executor and executor != workbench.executor:
            for ident, _, commands in workbench.others() if workbench.others else ():
                if ident == executor:
                    return ident, commands
            raise ToolError(f"there is no executor {executor!r}; list_executors shows them")
        if workbench.commands is None:
            raise ToolError(
                "no computer is connected to run commands: ask the student to run "
                "`agentica connect` on theirs, or work with the file tools only"
            )
        return workbench.executor, workbench.commands

    async def _start_command(self, lane: str, command: str, executor: str = "") -> str:
        executor, commands = self._commands(executor)
        span = self.scope.telemetry.operation(
            "command", executor=executor, lane=lane, command=command, session=self.scope.session
        )
        try:
            with span.current():  # a call to the student's computer under it
                handle = await commands.start(command)
        except BaseException as exc:
            span.end("failed", type(exc).__name__)
            raise
        self._ids["op"] += 1
        op = f"op{self._ids['op']}"
        span.set("operation.id", op)
        self._handles[op] = handle
        self._audit_operation("operation_started", op, lane, {"command": command[:2000]})
        self._events.put_nowait(OperationStarted(lane, op, command[:500], executor))
        task = asyncio.create_task(self._watch(lane, op, handle, span))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return f"started {op}: `{command[:200]}`"

    async def _watch(self, lane: str, op: str, handle: CommandHandle, span: Traced) -> None:
        try:
            result = await handle.wait(None)
        except BaseException:  # the loop stops
            span.end("cancelled")
            raise
        if result is None:  # pragma: no cover - wait(None) returns only at the end
            return
        _end_command(span, result)
        tail = result.output[-_OUTPUT_TAIL:]
        data = {"exit_code": result.exit_code, "status": result.status, "output": tail}
        self._audit_operation("operation_ended", op, lane, data)
        if result.stopped:
            why = self._stopped.get(op)
            self._events.put_nowait(OperationFailed(op, f"stopped: {why}" if why else "stopped"))
        elif result.exit_code < 0:  # the executor went away: the command's end is unknown
            self._events.put_nowait(OperationFailed(op, DISCONNECTED))
        else:
            self._events.put_nowait(OperationCompleted(op, f"exit {result.exit_code}\n{tail}"))

    def _audit_operation(self, kind: str, op: str, lane: str, data: dict[str, Any]) -> None:
        session = self.scope.session
        note = AuditNote(kind, session.user_id, session.course_id, session.id,
                         {"session_id": session.id, "lane": lane, "op": op, **data})  # fmt: skip
        self._put({"kind": kind, "lane": lane, "op": op, **data}, (note,))

    # -- answers and failures ----------------------------------------------------------------

    def _answer(self, seq: int, text: str) -> None:
        self._put({"kind": "answer", "message_seq": seq, "text": text[:8000]})
        if self._running.pop(seq, None) is not None:
            self.scope.writer.put(status_event(self.scope.session, "run_ended", seq, "done"))
            self._end_span(seq, "done")

    def _fail_message(self, seq: int, exc: BaseException) -> None:
        said = _failure(exc, self.scope.session.id)
        self._put({"kind": "run_failed", "message_seq": seq, "message": said})
        if self._running.pop(seq, None) is not None:
            error = type(exc).__name__
            ended = status_event(self.scope.session, "run_ended", seq, "failed", error=error)
            self.scope.writer.put(ended)
            self._end_span(seq, "failed", error)

    def _end_span(self, seq: int, state: MessageState, error: str = "") -> None:
        """End the span of message ``seq`` as its final ``state`` says."""
        span = self._spans.pop(seq, None)
        if span is not None:
            span.end(OUTCOMES.get(state, "cancelled"), error)

    async def _stop_everything(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for handle in self._handles.values():
            if handle.status == "running":
                with contextlib.suppress(Exception):
                    await handle.stop()


# -- helpers ---------------------------------------------------------------------------------


def _message_event(message: SessionEvent) -> UserMessage | TeacherMessage:
    text = str(message.data.get("text", ""))
    if message.data.get("role") == "teacher":
        return TeacherMessage(message.seq, text)
    return UserMessage(message.seq, text)


def _end_command(span: Traced, result: CommandResult) -> None:
    """End a command's span: its exit code and status, never its output."""
    span.set("operation.exit_code", result.exit_code)
    span.set("operation.status", result.status)
    if result.stopped:
        span.end("cancelled")
    elif result.timed_out:
        span.end("failed", "timed_out")
    elif result.exit_code < 0:
        span.end("failed", "executor_lost")
    else:
        span.end("completed")


def _interrupted(scope: SessionScope, seq: int) -> NewEvent:
    return interrupted_event(scope.session, seq, "the server stopped while this message ran")


def _step_prompt(action: Infer) -> str:
    lines = []
    for event in action.inputs:
        if isinstance(event, UserMessage | Interruption):
            lines.append(f"The student: {event.text}")
        elif isinstance(event, TeacherMessage):
            lines.append(f"The teacher: {event.text}")
        elif isinstance(event, InterruptionHandled):
            lines.append(f"Your task is now: {event.intent}" if event.intent else "Go on.")
        elif isinstance(event, OperationCompleted):
            lines.append(f"Operation {event.op} ended: {event.result}")
        elif isinstance(event, OperationFailed):
            lines.append(f"Operation {event.op} did not finish: {event.error}")
        elif isinstance(event, Timer):
            lines.append(f"Timer {event.name} fired.")
    return "\n".join(lines) or "Go on."


def _text(event: Any) -> str:
    return str(getattr(event, "text", ""))[:200]


def _failure(exc: BaseException, session_id: str) -> str:
    """What the student is told of a failure: an error of the framework or the service says
    itself; anything else is logged (redacted) and told as unexpected."""
    if isinstance(exc, AgenticaError | TeamError):
        return _said(exc)
    log.error("session %s: the lanes runtime failed: %s: %s", session_id, type(exc).__name__,
              redact(str(exc))[:2000])  # fmt: skip
    return "the agent failed unexpectedly (the server logged it)"


def _said(exc: BaseException) -> str:
    message = exc.message if isinstance(exc, TeamError) else str(exc)
    return redact(message)[:2000] or type(exc).__name__


def _snapshot(lanes: tuple[Lane, ...]) -> list[dict[str, Any]]:
    """The lanes as a UI shows them (see ``EventOut``): each lane's id, intent, status,
    whether it is active, the seq of the message that opened it, why it ends (``termination``)
    and its operations (id, what, executor, status, the last progress)."""
    return [
        {
            "id": lane.id,
            "intent": lane.intent[:2000],
            "status": lane.status,
            "active": lane.active,
            "created": lane.created,
            "termination": lane.termination[:2000],
            "operations": [_operation(op) for op in lane.operations],
        }
        for lane in lanes
    ]


def _operation(op: Operation) -> dict[str, Any]:
    return {
        "id": op.id,
        "what": op.what,
        "executor": op.executor,
        "status": op.status,
        "progress": op.progress,
    }


def _describe(event: Event) -> dict[str, Any]:
    """An event as the log keeps it (texts capped)."""
    data: dict[str, Any] = {"type": event.kind}
    for name in getattr(event, "__dataclass_fields__", {}):
        if name == "kind":
            continue
        value = getattr(event, name)
        if isinstance(value, str):
            value = value[:2000]
        elif isinstance(value, tuple):
            value = [_describe(item) if hasattr(item, "kind") else item for item in value]
        data[name] = value
    return data
