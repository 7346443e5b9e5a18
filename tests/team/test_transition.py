"""The transition function ``S' = E(S, event)``: tables of (state, event -> state, actions),
then the talk's scenario and the serial and batch modes as sequences of events."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

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
    OperationProgress,
    OperationStarted,
    Route,
    Routed,
    RunStep,
    StepDone,
    StopStep,
    TeacherMessage,
    Timer,
    UserMessage,
    replay,
    transition,
)

ASK = UserMessage(1, "implement a sort for this list")
CHANGE = UserMessage(2, "wait, use merge sort instead")
OTHER = UserMessage(3, "what does git status do?")
RUN = Operation("op1", "python sort.py --big", "laptop")
DONE = Operation("op1", "python sort.py --big", "laptop", status="completed")
LANES = AgentState(mode="lanes", executors=frozenset({"laptop"}))


def lane(**changes: object) -> Lane:
    return replace(Lane("L1", 1, "implement a sort"), **changes)  # type: ignore[arg-type]


def lanes(*items: Lane, **changes: object) -> AgentState:
    return replace(LANES, lanes=items, **changes)  # type: ignore[arg-type]


# (name, state, event, expected state, expected actions)
TABLE: list[tuple[str, AgentState, Event, AgentState, tuple[Action, ...]]] = [
    # -- serial and batch --------------------------------------------------------------------
    ("serial: a message to an idle agent starts a step",
     AgentState(), ASK,
     AgentState(working=True, step=1), (RunStep(1, (ASK,)),)),
    ("serial: a message while working waits",
     AgentState(working=True, step=1), CHANGE,
     AgentState(working=True, step=1, queued=(CHANGE,)), ()),
    ("serial: the next step takes one waiting message",
     AgentState(working=True, step=1, queued=(CHANGE, OTHER)), StepDone(1),
     AgentState(working=True, step=2, queued=(OTHER,)), (RunStep(2, (CHANGE,)),)),
    ("serial: the last step done leaves the agent idle",
     AgentState(working=True, step=3), StepDone(3),
     AgentState(step=3), ()),
    ("batch: the next step takes every waiting message",
     AgentState(mode="batch", working=True, step=1, queued=(CHANGE, OTHER)), StepDone(1),
     AgentState(mode="batch", working=True, step=2), (RunStep(2, (CHANGE, OTHER)),)),
    ("batch: a teacher's message waits like a student's",
     AgentState(mode="batch", working=True, step=1), TeacherMessage(4, "wrap up"),
     AgentState(mode="batch", working=True, step=1, queued=(TeacherMessage(4, "wrap up"),)), ()),
    # -- lanes: routing ----------------------------------------------------------------------
    ("lanes: a message is routed by the event context",
     LANES, ASK,
     lanes(working=True, queued=(ASK,)), (Route(ASK),)),
    ("lanes: one routing at a time",
     lanes(working=True, queued=(ASK,)), OTHER,
     lanes(working=True, queued=(ASK, OTHER)), ()),
    ("lanes: routed to a new lane, which infers on the message",
     lanes(working=True, queued=(ASK,)), Routed(1, "new", "L1", "implement a sort"),
     lanes(lane(status="working", inferring=True)), (Infer("L1", "implement a sort", (ASK,)),)),
    ("lanes: after routing, the next message is routed",
     lanes(lane(status="waiting", operations=(RUN,)), working=True, queued=(CHANGE, OTHER)),
     Routed(2, "interrupt", "L1"),
     lanes(lane(status="working", operations=(RUN,)), working=True, queued=(OTHER,)),
     (Route(OTHER), HandleInterruptions("L1", "implement a sort", (CHANGE,)))),
    ("lanes: answered at once, no lane",
     lanes(working=True, queued=(OTHER,)), Routed(3, "answered"),
     LANES, ()),
    ("lanes: a preemption waits for the running operation",
     lanes(lane(status="waiting", operations=(RUN,)), working=True, queued=(OTHER,)),
     Routed(3, "preempt", "L1"),
     lanes(lane(status="waiting", operations=(RUN,), preemptions=(OTHER,))), ()),
    ("lanes: routed to a lane that ended meanwhile opens a new one",
     lanes(lane(status="ended", termination="done"), working=True, queued=(CHANGE,)),
     Routed(2, "interrupt", "L1"),
     lanes(lane(status="ended", termination="done"),
           Lane("L1.2", 2, CHANGE.text, status="working", inferring=True)),
     (Infer("L1.2", CHANGE.text, (CHANGE,)),)),
    # -- lanes: the priority loop ------------------------------------------------------------
    ("lanes: an interruption comes first, even while an operation runs",
     lanes(lane(status="waiting", operations=(RUN,))), Interruption(5, "L1", "stop"),
     lanes(lane(status="working", operations=(RUN,))),
     (HandleInterruptions("L1", "implement a sort", (Interruption(5, "L1", "stop"),)),)),
    ("lanes: an interruption during an interruption's handling waits for it",
     lanes(lane(status="working")), Interruption(5, "L1", "stop"),
     lanes(lane(status="working", interruptions=(Interruption(5, "L1", "stop"),))), ()),
    ("lanes: an interruption stops the inference step in progress, once",
     lanes(lane(status="working", inferring=True)), Interruption(5, "L1", "stop"),
     lanes(lane(status="working", inferring=True, stopping=True,
                interruptions=(Interruption(5, "L1", "stop"),))),
     (StopStep("L1"),)),
    ("lanes: the stopped step's end hands over to the interruption",
     lanes(lane(status="working", inferring=True, stopping=True,
                interruptions=(Interruption(5, "L1", "stop"),))), LaneStepDone("L1"),
     lanes(lane(status="working")),
     (HandleInterruptions("L1", "implement a sort", (Interruption(5, "L1", "stop"),)),)),
    ("lanes: a step that started an operation waits for it",
     lanes(lane(status="working", operations=(RUN,))), LaneStepDone("L1"),
     lanes(lane(status="waiting", operations=(RUN,))), ()),
    ("lanes: the operation's outcome is the next step's input",
     lanes(lane(status="waiting", operations=(RUN,))), OperationCompleted("op1", "sorted 1e6"),
     lanes(lane(status="working", operations=(DONE,), inferring=True)),
     (Infer("L1", "implement a sort", (OperationCompleted("op1", "sorted 1e6"),)),)),
    ("lanes: progress changes nothing but the operation",
     lanes(lane(status="waiting", operations=(RUN,))), OperationProgress("op1", "50%"),
     lanes(lane(status="waiting", operations=(replace(RUN, progress="50%"),))), ()),
    ("lanes: preemptions before termination",
     lanes(lane(status="ready", operations=(DONE,), termination="done", preemptions=(OTHER,))),
     Timer("tick"),
     lanes(lane(status="working", operations=(DONE,), termination="done", inferring=True)),
     (Infer("L1", "implement a sort", (OTHER,)),)),
    ("lanes: a finished step with nothing running ends the lane",
     lanes(lane(status="working", operations=(DONE,))), LaneStepDone("L1", finished=True),
     lanes(lane(status="ended", operations=(DONE,), termination="done")),
     (EndLane("L1", "done"),)),
    ("lanes: a step that starts nothing and does not finish ends the lane as idle",
     lanes(lane(status="working")), LaneStepDone("L1"),
     lanes(lane(status="ended", termination="idle")), (EndLane("L1", "idle"),)),
    ("lanes: a step with new inputs waiting goes on",
     lanes(lane(status="working", inputs=(Timer("t", "L1"),))), LaneStepDone("L1"),
     lanes(lane(status="working", inferring=True)),
     (Infer("L1", "implement a sort", (Timer("t", "L1"),)),)),
    # -- lanes: the interruption context's decisions ----------------------------------------
    ("lanes: cancel the operation and change the intent; wait for the cancellation",
     lanes(lane(status="working", operations=(RUN,))),
     InterruptionHandled("L1", intent="implement merge sort", cancel=("op1",)),
     lanes(lane(status="waiting", intent="implement merge sort",
                operations=(replace(RUN, status="cancelling"),),
                inputs=(InterruptionHandled("L1", "implement merge sort", ("op1",)),))),
     (CancelOperation("op1"),)),
    ("lanes: terminate",
     lanes(lane(status="working")), InterruptionHandled("L1", terminate="the student stopped it"),
     lanes(lane(status="ended", termination="the student stopped it")),
     (EndLane("L1", "the student stopped it"),)),
    ("lanes: resume with nothing running takes the next step",
     lanes(lane(status="working")), InterruptionHandled("L1"),
     lanes(lane(status="working", inferring=True)),
     (Infer("L1", "implement a sort", (InterruptionHandled("L1"),)),)),
    ("lanes: resume while the operation runs goes back to waiting",
     lanes(lane(status="working", operations=(RUN,))), InterruptionHandled("L1"),
     lanes(lane(status="waiting", operations=(RUN,))), ()),
    # -- executors ---------------------------------------------------------------------------
    ("an executor connects",
     AgentState(mode="lanes"), ExecutorConnected("laptop"), LANES, ()),
    ("an executor that disconnects fails its running operations",
     lanes(lane(status="waiting", operations=(RUN,))), ExecutorDisconnected("laptop"),
     lanes(lane(status="working", operations=(replace(RUN, status="failed"),), inferring=True),
           executors=frozenset()),
     (Infer("L1", "implement a sort", (OperationFailed("op1", DISCONNECTED),)),)),
    ("an operation's late outcome after a cancellation is ignored",
     lanes(lane(status="ready", operations=(replace(RUN, status="failed"),))),
     OperationCompleted("op1", "late"),
     lanes(lane(status="working", operations=(replace(RUN, status="failed"),), inferring=True)),
     (Infer("L1", "implement a sort", (OperationCompleted("op1", "late"),)),)),
    ("an operation of an unknown lane is ignored",
     LANES, OperationStarted("L9", "op9", "ls"), LANES, ()),
]  # fmt: skip


@pytest.mark.parametrize(("name", "state", "event", "expected", "actions"), TABLE,
                         ids=[row[0] for row in TABLE])  # fmt: skip
def test_the_table(
    name: str,
    state: AgentState,
    event: Event,
    expected: AgentState,
    actions: tuple[Action, ...],
) -> None:
    got, started = transition(state, event)
    assert started == actions, name
    assert got == expected, name


def run(state: AgentState, *events: Event) -> tuple[AgentState, list[Action]]:
    """Feed ``events`` in order; every action started."""
    started: list[Action] = []
    for event in events:
        state, actions = transition(state, event)
        started.extend(actions)
    return state, started


def test_the_talks_scenario() -> None:
    """A sort is asked for; while its lane runs a long command the student says "use merge
    sort instead": the lane is interrupted, its command cancelled, its intent changed, and it
    continues; a question in between gets a lane of its own."""
    events: list[Event] = [
        ExecutorConnected("laptop"),
        ASK,
        Routed(1, "new", "L1", "implement a sort"),
        OperationStarted("L1", "op1", "python sort.py --big", "laptop"),
        LaneStepDone("L1"),
        CHANGE,
        Routed(2, "interrupt", "L1"),
        OTHER,
        InterruptionHandled("L1", intent="implement merge sort", cancel=("op1",)),
        Routed(3, "new", "L2", "explain git status"),
        OperationFailed("op1", "cancelled"),
        LaneStepDone("L2", finished=True),
        OperationStarted("L1", "op2", "python merge_sort.py", "laptop"),
        LaneStepDone("L1"),
        OperationCompleted("op2", "sorted"),
        LaneStepDone("L1", finished=True),
    ]
    state, actions = run(AgentState(mode="lanes"), *events)
    assert actions == [
        Route(ASK),
        Infer("L1", "implement a sort", (ASK,)),
        Route(CHANGE),
        HandleInterruptions("L1", "implement a sort", (CHANGE,)),
        Route(OTHER),
        CancelOperation("op1"),
        Infer("L2", "explain git status", (OTHER,)),
        Infer("L1", "implement merge sort", (
            InterruptionHandled("L1", "implement merge sort", ("op1",)),
            OperationFailed("op1", "cancelled"),
        )),
        EndLane("L2", "done"),
        Infer("L1", "implement merge sort", (OperationCompleted("op2", "sorted"),)),
        EndLane("L1", "done"),
    ]  # fmt: skip
    first, second = state.lanes
    assert (first.id, first.status, first.termination) == ("L1", "ended", "done")
    assert [op.status for op in first.operations] == ["failed", "completed"]
    assert (second.id, second.status) == ("L2", "ended")
    assert not state.working and not state.queued
    assert replay(events, AgentState(mode="lanes")) == state  # rebuilt from the stored events


@pytest.mark.parametrize(("mode", "steps"), [("serial", 3), ("batch", 2)])
def test_serial_and_batch_on_the_same_events(mode: str, steps: int) -> None:
    """Three messages, the last two while the first step runs: serial takes three steps,
    batch two (the last two together)."""
    state, actions = run(AgentState(mode=mode), ASK, CHANGE, OTHER, StepDone(1))  # type: ignore[arg-type]
    while state.working:
        state, more = transition(state, StepDone(state.step))
        actions.extend(more)
    assert len(actions) == steps
    assert all(isinstance(a, RunStep) for a in actions)
    handed = [e for a in actions if isinstance(a, RunStep) for e in a.events]
    assert handed == [ASK, CHANGE, OTHER]  # each once, in order


def test_nothing_is_lost_or_handled_twice_in_any_order_of_outcomes() -> None:
    """Every message reaches exactly one place, whatever the interleaving of outcomes."""
    messages = [ASK, CHANGE, OTHER]
    outcomes = [
        Routed(1, "new", "L1", "a"),
        Routed(2, "preempt", "L1"),
        Routed(3, "new", "L2", "b"),
    ]
    for order in itertools.permutations(range(3)):
        state, actions = run(AgentState(mode="lanes"), *[messages[i] for i in order])
        for i in order:  # routings come back in the order they were asked for
            state, more = transition(state, outcomes[i])
            actions.extend(more)
        routed = [a.message for a in actions if isinstance(a, Route)]
        assert sorted(m.seq for m in routed) == [1, 2, 3], order
        seen = [e for a in actions if isinstance(a, Infer) for e in a.inputs]
        seen += [e for ln in state.lanes for e in (*ln.inputs, *ln.preemptions)]
        assert sorted(getattr(e, "seq", 0) for e in seen) == [1, 2, 3], order
