"""The event-driven agent's state and its transition function: ``S' = E(S, event)``.

``transition(state, event)`` returns the new ``AgentState`` and the ``Action``s to start now. It
is pure (no I/O, no clock, no ids of its own: they come in the events), so it is tested with
tables of (state, event -> state, actions). A runtime stores each event durably, feeds it to
``transition`` in the order stored and carries out the actions; what an action produced (a step
finished, a message routed, an interruption handled, an operation's outcome) comes back as an
event. Three modes, chosen per agent:

- ``serial``: one event at a time; what arrives while the agent works waits, each event its own
  step (the talk's serial-locked agent).
- ``batch``: what arrives while the agent works is handed over together at the next step
  (batch-locked).
- ``lanes``: each piece of work is a ``Lane`` (intent, status, operations, an interruption and a
  preemption queue, a termination reason). A user's or teacher's message is first ``Route``d by
  the event context, one at a time: to a new lane, as an interruption or a preemption of a lane,
  or answered at once. Each lane runs the priority loop: interruptions first (even while its
  operations run; an inference step in progress is stopped for them), then it waits while
  operations are unfinished, then preemptions, then termination, otherwise the next inference
  step on what is new to it. A step that leaves no
  operation running and does not finish the lane ends it as idle, so nothing loops forever.

An executor that disconnects fails the operations running on it; the lane sees the failure as
an input of its next step and can retry elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

__all__ = [
    "Action",
    "AgentState",
    "CancelOperation",
    "EndLane",
    "Event",
    "ExecutorConnected",
    "ExecutorDisconnected",
    "HandleInterruptions",
    "Infer",
    "Interruption",
    "InterruptionHandled",
    "Lane",
    "LaneStepDone",
    "Mode",
    "Operation",
    "OperationCompleted",
    "OperationFailed",
    "OperationProgress",
    "OperationStarted",
    "Route",
    "Routed",
    "RunStep",
    "StepDone",
    "StopStep",
    "TeacherMessage",
    "Timer",
    "UserMessage",
    "replay",
    "transition",
]

Mode: TypeAlias = Literal["serial", "batch", "lanes"]
LaneStatus: TypeAlias = Literal["ready", "working", "waiting", "ended"]
OperationStatus: TypeAlias = Literal["running", "cancelling", "completed", "failed"]
DISCONNECTED = "the executor disconnected while the operation ran"


# -- events ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserMessage:
    """The student wrote ``text`` (``seq``: its place in the session's log)."""

    seq: int
    text: str
    kind: Literal["user_message"] = "user_message"


@dataclass(frozen=True, slots=True)
class TeacherMessage:
    """The course's teacher wrote ``text`` to the agent."""

    seq: int
    text: str
    kind: Literal["teacher_message"] = "teacher_message"


@dataclass(frozen=True, slots=True)
class Interruption:
    """The student interrupts ``lane`` directly (a button on the lane), saying ``text``."""

    seq: int
    lane: str
    text: str
    kind: Literal["interruption"] = "interruption"


@dataclass(frozen=True, slots=True)
class OperationStarted:
    """``lane`` started operation ``op`` (``what``: e.g. the command) on ``executor``."""

    lane: str
    op: str
    what: str
    executor: str = ""
    kind: Literal["operation_started"] = "operation_started"


@dataclass(frozen=True, slots=True)
class OperationProgress:
    """Operation ``op`` reported ``text`` (a line of output)."""

    op: str
    text: str
    kind: Literal["operation_progress"] = "operation_progress"


@dataclass(frozen=True, slots=True)
class OperationCompleted:
    """Operation ``op`` finished with ``result``."""

    op: str
    result: str
    kind: Literal["operation_completed"] = "operation_completed"


@dataclass(frozen=True, slots=True)
class OperationFailed:
    """Operation ``op`` failed (or was cancelled): ``error`` says how."""

    op: str
    error: str
    kind: Literal["operation_failed"] = "operation_failed"


@dataclass(frozen=True, slots=True)
class ExecutorConnected:
    """A student's executor connected."""

    executor: str
    kind: Literal["executor_connected"] = "executor_connected"


@dataclass(frozen=True, slots=True)
class ExecutorDisconnected:
    """A student's executor went away: its running operations fail."""

    executor: str
    kind: Literal["executor_disconnected"] = "executor_disconnected"


@dataclass(frozen=True, slots=True)
class Timer:
    """A timer ``name`` fired for ``lane`` ("": the agent)."""

    name: str
    lane: str = ""
    kind: Literal["timer"] = "timer"


@dataclass(frozen=True, slots=True)
class StepDone:
    """A ``RunStep`` (serial, batch) finished."""

    step: int
    kind: Literal["step_done"] = "step_done"


@dataclass(frozen=True, slots=True)
class Routed:
    """The event context decided where message ``seq`` goes: a ``new`` lane ``lane`` with
    ``intent``, an ``interrupt`` or a ``preempt`` of ``lane``, or ``answered`` at once."""

    seq: int
    to: Literal["new", "interrupt", "preempt", "answered"]
    lane: str = ""
    intent: str = ""
    kind: Literal["routed"] = "routed"


@dataclass(frozen=True, slots=True)
class LaneStepDone:
    """An ``Infer`` step of ``lane`` ended; ``finished``: the lane's work is done."""

    lane: str
    finished: bool = False
    kind: Literal["lane_step_done"] = "lane_step_done"


@dataclass(frozen=True, slots=True)
class InterruptionHandled:
    """The interruption context decided for ``lane``: a new ``intent`` (""; unchanged), the
    operations to ``cancel``, or to ``terminate`` the lane with that reason."""

    lane: str
    intent: str = ""
    cancel: tuple[str, ...] = ()
    terminate: str = ""
    kind: Literal["interruption_handled"] = "interruption_handled"


Message: TypeAlias = UserMessage | TeacherMessage | Interruption
Event: TypeAlias = (
    UserMessage | TeacherMessage | Interruption | OperationStarted | OperationProgress
    | OperationCompleted | OperationFailed | ExecutorConnected | ExecutorDisconnected | Timer
    | StepDone | Routed | LaneStepDone | InterruptionHandled
)  # fmt: skip


# -- actions -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run the agent once on ``events`` (serial: one; batch: all that waited)."""

    step: int
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class Route:
    """Ask the event context where ``message`` goes (answer with ``Routed``)."""

    message: Message


@dataclass(frozen=True, slots=True)
class Infer:
    """One step of ``lane`` on its intent and ``inputs`` (what is new to it); answer with
    ``LaneStepDone``."""

    lane: str
    intent: str
    inputs: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class HandleInterruptions:
    """Ask the interruption context what ``events`` mean for ``lane`` (answer with
    ``InterruptionHandled``)."""

    lane: str
    intent: str
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class StopStep:
    """Stop ``lane``'s inference step now: an interruption is waiting (the step ends with
    ``LaneStepDone`` as usual, and the interruption is handled next)."""

    lane: str


@dataclass(frozen=True, slots=True)
class CancelOperation:
    """Stop operation ``op`` (its outcome comes back as ``OperationFailed``)."""

    op: str


@dataclass(frozen=True, slots=True)
class EndLane:
    """``lane`` ended for ``reason`` (``done``, ``idle`` or what terminated it): say so."""

    lane: str
    reason: str


Action: TypeAlias = (
    RunStep | Route | Infer | HandleInterruptions | StopStep | CancelOperation | EndLane
)


# -- state -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Operation:
    """An operation of a lane on an executor."""

    id: str
    what: str
    executor: str
    status: OperationStatus = "running"
    progress: str = ""

    @property
    def unfinished(self) -> bool:
        return self.status in ("running", "cancelling")


@dataclass(frozen=True, slots=True)
class Lane:
    """One piece of the agent's work (see the module docstring); ``created``: the seq of the
    message that opened it; ``inputs``: what its model has not seen yet."""

    id: str
    created: int
    intent: str
    status: LaneStatus = "ready"
    operations: tuple[Operation, ...] = ()
    interruptions: tuple[Event, ...] = ()
    preemptions: tuple[Event, ...] = ()
    inputs: tuple[Event, ...] = ()
    termination: str = ""
    inferring: bool = False  # the step in progress is an Infer (it may be stopped)
    stopping: bool = False  # a StopStep was asked for it

    @property
    def active(self) -> bool:
        return self.status != "ended"

    @property
    def busy(self) -> bool:
        """Whether an operation of the lane is unfinished."""
        return any(op.unfinished for op in self.operations)


@dataclass(frozen=True, slots=True)
class AgentState:
    """An agent's state: its ``mode``, the messages ``queued`` for a step (serial, batch) or
    for routing (lanes), whether a step or a routing is ``working``, the ``step`` count, its
    ``lanes`` (in creation order) and the ``executors`` connected."""

    mode: Mode = "serial"
    queued: tuple[Event, ...] = ()
    working: bool = False
    step: int = 0
    lanes: tuple[Lane, ...] = ()
    executors: frozenset[str] = field(default_factory=frozenset)

    def lane(self, lane_id: str) -> Lane | None:
        for lane in self.lanes:
            if lane.id == lane_id:
                return lane
        return None

    def with_lane(self, lane: Lane) -> AgentState:
        """This state with ``lane`` replaced (or added last)."""
        if self.lane(lane.id) is None:
            return replace(self, lanes=(*self.lanes, lane))
        return replace(self, lanes=tuple(lane if old.id == lane.id else old for old in self.lanes))

    def lane_of(self, op_id: str) -> Lane | None:
        for lane in self.lanes:
            if any(op.id == op_id for op in lane.operations):
                return lane
        return None


# -- the transition function -------------------------------------------------------------------


def transition(state: AgentState, event: Event) -> tuple[AgentState, tuple[Action, ...]]:
    """``S' = E(S, event)``: the new state and the actions to start now."""
    state, actions = _apply(state, event)
    state, scheduled = _schedule(state)
    return state, actions + scheduled


def _apply(state: AgentState, event: Event) -> tuple[AgentState, tuple[Action, ...]]:
    """Record ``event`` in the state; the actions it calls for directly (cancellations)."""
    if isinstance(event, UserMessage | TeacherMessage | Interruption):
        return _message(state, event), ()
    if isinstance(event, StepDone | Routed):
        return _finished_routing(state, event), ()
    if isinstance(event, LaneStepDone):
        return _lane_step_done(state, event), ()
    if isinstance(event, InterruptionHandled):
        return _interruption_handled(state, event)
    if isinstance(event, ExecutorConnected | ExecutorDisconnected):
        return _executor(state, event), ()
    if isinstance(event, Timer):
        return _timer(state, event), ()
    return _operation(state, event), ()


def _message(state: AgentState, event: Message) -> AgentState:
    if isinstance(event, Interruption) and state.mode == "lanes":
        lane = state.lane(event.lane)
        if lane is not None and lane.active:
            return state.with_lane(replace(lane, interruptions=(*lane.interruptions, event)))
    return replace(state, queued=(*state.queued, event))


def _finished_routing(state: AgentState, event: StepDone | Routed) -> AgentState:
    state = replace(state, working=False)
    if isinstance(event, StepDone):
        return state
    queued = tuple(e for e in state.queued if getattr(e, "seq", None) != event.seq)
    message = next((e for e in state.queued if getattr(e, "seq", None) == event.seq), None)
    state = replace(state, queued=queued)
    if message is None or event.to == "answered":
        return state
    if event.to == "new":
        return state.with_lane(Lane(event.lane, event.seq, event.intent, inputs=(message,)))
    lane = state.lane(event.lane)
    if lane is None or not lane.active:  # to a lane that ended meanwhile: a new one instead
        fresh = Lane(f"{event.lane}.{event.seq}", event.seq, event.intent or _text(message),
                     inputs=(message,))  # fmt: skip
        return state.with_lane(fresh)
    if event.to == "interrupt":
        return state.with_lane(replace(lane, interruptions=(*lane.interruptions, message)))
    return state.with_lane(replace(lane, preemptions=(*lane.preemptions, message)))


def _lane_step_done(state: AgentState, event: LaneStepDone) -> AgentState:
    lane = state.lane(event.lane)
    if lane is None or not lane.active:
        return state
    termination = lane.termination
    if event.finished and not termination:
        termination = "done"
    elif not (lane.busy or lane.inputs or lane.interruptions or lane.preemptions or termination):
        termination = "idle"  # nothing running, nothing new, not finished: stop here
    lane = replace(lane, termination=termination, inferring=False, stopping=False)
    return state.with_lane(replace(lane, status=_resting(lane)))


def _interruption_handled(
    state: AgentState, event: InterruptionHandled
) -> tuple[AgentState, tuple[Action, ...]]:
    lane = state.lane(event.lane)
    if lane is None or not lane.active:
        return state, ()
    cancel = set(event.cancel)
    operations = tuple(
        replace(op, status="cancelling") if op.id in cancel and op.status == "running" else op
        for op in lane.operations
    )
    actions = tuple(CancelOperation(op.id) for op in operations
                    if op.id in cancel and op.status == "cancelling")  # fmt: skip
    inputs = lane.inputs
    if event.intent and event.intent != lane.intent:
        inputs = (*inputs, event)  # the lane's model learns of the new intent
    elif not lane.busy and not inputs and not event.terminate and not cancel:
        inputs = (*inputs, event)  # resumed with nothing running: take the next step
    lane = replace(
        lane,
        intent=event.intent or lane.intent,
        operations=operations,
        inputs=inputs,
        termination=event.terminate or lane.termination,
    )
    return state.with_lane(replace(lane, status=_resting(lane))), actions


def _executor(state: AgentState, event: ExecutorConnected | ExecutorDisconnected) -> AgentState:
    if isinstance(event, ExecutorConnected):
        return replace(state, executors=state.executors | {event.executor})
    state = replace(state, executors=state.executors - {event.executor})
    for lane in state.lanes:
        for op in lane.operations:
            if op.unfinished and op.executor == event.executor:
                state = _operation(state, OperationFailed(op.id, DISCONNECTED))
    return state


def _timer(state: AgentState, event: Timer) -> AgentState:
    lane = state.lane(event.lane) if event.lane else None
    if lane is None or not lane.active:
        return replace(state, queued=(*state.queued, event)) if not event.lane else state
    return state.with_lane(replace(lane, inputs=(*lane.inputs, event)))


def _operation(
    state: AgentState,
    event: OperationStarted | OperationProgress | OperationCompleted | OperationFailed,
) -> AgentState:
    if isinstance(event, OperationStarted):
        lane = state.lane(event.lane)
        if lane is None or not lane.active:
            return state
        op = Operation(event.op, event.what, event.executor)
        return state.with_lane(replace(lane, operations=(*lane.operations, op)))
    lane = state.lane_of(event.op)
    if lane is None:
        return state
    operations = tuple(_updated(op, event) if op.id == event.op else op
                       for op in lane.operations)  # fmt: skip
    inputs = lane.inputs
    if isinstance(event, OperationCompleted | OperationFailed):
        inputs = (*inputs, event)
    lane = replace(lane, operations=operations, inputs=inputs)
    if lane.status == "waiting":
        lane = replace(lane, status=_resting(lane))
    return state.with_lane(lane)


def _updated(
    op: Operation, event: OperationProgress | OperationCompleted | OperationFailed
) -> Operation:
    if not op.unfinished:
        return op
    if isinstance(event, OperationProgress):
        return replace(op, progress=event.text[-500:])
    return replace(op, status="completed" if isinstance(event, OperationCompleted) else "failed")


def _resting(lane: Lane) -> LaneStatus:
    """The status of a lane between steps."""
    return "waiting" if lane.busy else "ready"


# -- scheduling --------------------------------------------------------------------------------


def _schedule(state: AgentState) -> tuple[AgentState, tuple[Action, ...]]:
    """Start what can start now: a step or a routing, and each idle lane's next action."""
    actions: list[Action] = []
    if not state.working and state.queued:
        state, action = _next_of_agent(state)
        if action is not None:
            actions.append(action)
    for lane in state.lanes:
        lane, action = _next_of_lane(lane)
        if action is not None:
            state = state.with_lane(lane)
            actions.append(action)
    return state, tuple(actions)


def _next_of_agent(state: AgentState) -> tuple[AgentState, Action | None]:
    if state.mode == "lanes":
        message = next((e for e in state.queued if _is_message(e)), None)
        if message is None:
            return replace(state, queued=()), None  # lane-less timers have no one to wake
        assert isinstance(message, UserMessage | TeacherMessage | Interruption)
        return replace(state, working=True), Route(message)
    take = state.queued if state.mode == "batch" else state.queued[:1]
    step = state.step + 1
    rest = state.queued[len(take) :]
    return replace(state, queued=rest, working=True, step=step), RunStep(step, take)


def _next_of_lane(lane: Lane) -> tuple[Lane, Action | None]:
    """The priority loop: interruptions > wait for operations > preemptions > termination >
    the next inference step."""
    action: Action
    if lane.status == "working" and lane.inferring and lane.interruptions and not lane.stopping:
        return replace(lane, stopping=True), StopStep(lane.id)
    if lane.status in ("working", "ended"):
        return lane, None
    if lane.interruptions:
        action = HandleInterruptions(lane.id, lane.intent, lane.interruptions)
        return replace(lane, status="working", interruptions=()), action
    if lane.busy:
        return replace(lane, status="waiting"), None
    if lane.preemptions:
        inputs = (*lane.inputs, *lane.preemptions)
        action = Infer(lane.id, lane.intent, inputs)
        return replace(lane, status="working", preemptions=(), inputs=(), inferring=True), action
    if lane.termination:
        return replace(lane, status="ended"), EndLane(lane.id, lane.termination)
    if lane.inputs:
        action = Infer(lane.id, lane.intent, lane.inputs)
        return replace(lane, status="working", inputs=(), inferring=True), action
    return lane, None


def _is_message(event: Event) -> bool:
    return isinstance(event, UserMessage | TeacherMessage | Interruption)


def _text(event: Event) -> str:
    return str(getattr(event, "text", ""))[:200]


def replay(events: Iterable[Event], state: AgentState | None = None) -> AgentState:
    """The state after ``events`` (from ``state``, default an empty serial agent): how a
    runtime rebuilds an agent from its stored events."""
    current = state or AgentState()
    for event in events:
        current, _ = transition(current, event)
    return current
