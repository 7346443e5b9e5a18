"""Workflows: typed steps, routes, parallel branches, bounded loops, approvals, graph checks,
events, Mermaid and PNG, and the stores' compare-and-set (in memory, SQLite, PostgreSQL).

Crash-and-resume with a real ``kill -9`` is in ``test_workflow_resume.py``.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import create_async_engine

from agentica import Agent, RunResponse
from agentica.errors import StorageError, UsageError
from agentica.messages import Message
from agentica.models import ModelRequest
from agentica.storage import InMemoryStorage
from agentica.teams import Team
from agentica.testing import FunctionModel, ScriptedModel
from agentica.workflows import (
    END,
    Approval,
    InMemoryWorkflowStore,
    SQLWorkflowStore,
    StepCompleted,
    StepContext,
    StepFailed,
    StepRecord,
    StepStarted,
    Workflow,
    WorkflowCompleted,
    WorkflowConflictError,
    WorkflowFailed,
    WorkflowGraphError,
    WorkflowPaused,
    WorkflowStarted,
    WorkflowStore,
)
from tests.postgres import Cluster

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Ticket:
    text: str
    kind: str = ""
    reply: str = ""
    notes: list[str] = field(default_factory=list)
    approved: bool | None = None
    rounds: int = 0


class Order(BaseModel):
    item: str
    quantity: int = 1
    price: float = 0.0
    left: int = 0
    right: int = 0


async def classify(state: Ticket) -> dict[str, Any]:
    return {"kind": "bug" if "crash" in state.text else "question"}


async def fix(state: Ticket) -> dict[str, Any]:
    return {"reply": "we fixed it"}


async def answer(state: Ticket) -> dict[str, Any]:
    return {"reply": "see the manual"}


def triage(store: WorkflowStore | None = None) -> Workflow[Ticket]:
    flow = Workflow("triage", Ticket, store=store)
    flow.step("classify", classify).step("fix", fix).step("answer", answer)
    flow.route("classify", lambda s: s.kind, {"bug": "fix", "question": "answer"})
    return flow


# -- steps, state, routes -----------------------------------------------------------------------


async def test_a_route_picks_the_next_step_from_the_typed_state() -> None:
    flow = triage()
    bug = await flow.run(Ticket("the app crashes"))
    question = await flow.run(Ticket("how do I log in?"))
    assert (bug.status, bug.state.kind, bug.state.reply) == ("completed", "bug", "we fixed it")
    assert [s.step for s in bug.steps] == ["classify", "fix"]
    assert [s.step for s in question.steps] == ["classify", "answer"]
    assert question.state.reply == "see the manual"
    assert bug.steps[0].changes == {"kind": "bug"}
    assert bug.steps[1].key == f"{bug.run_id}/fix/1"
    assert bug.next == [] and bug.errors == []


async def test_steps_return_a_whole_state_a_partial_update_or_nothing() -> None:
    async def price(order: Order) -> Order:
        return order.model_copy(update={"price": 9.5 * order.quantity})

    async def double(order: Order) -> None:
        order.quantity *= 2  # changed in place

    async def discount(order: Order, ctx: StepContext) -> dict[str, Any]:
        assert (ctx.step, ctx.iteration, ctx.attempt) == ("discount", 1, 1)
        return {"price": order.price - 1}

    flow = Workflow("order", Order).step("double", double).step("price", price)
    flow.step("discount", discount).edge("double", "price").edge("price", "discount")
    result = await flow.run(Order(item="pen", quantity=2))
    assert result.state == Order(item="pen", quantity=4, price=37.0)
    assert [s.changes for s in result.steps] == [{"quantity": 4}, {"price": 38.0}, {"price": 37.0}]


async def test_a_step_that_writes_a_wrong_type_or_an_unknown_field_fails_at_that_step() -> None:
    async def wrong_type(order: Order) -> dict[str, Any]:
        return {"quantity": "many"}

    async def unknown(order: Order) -> dict[str, Any]:
        return {"colour": "red"}

    async def text(order: Order) -> str:
        return "done"

    for step, message in [
        (wrong_type, "left the state invalid"),
        (unknown, r"unknown fields \['colour'\]"),
        (text, "returned a str"),
    ]:
        flow = Workflow("bad", Order).step("only", step)  # type: ignore[arg-type]
        with pytest.raises(WorkflowFailed, match=message) as failed:
            await flow.run(Order(item="pen"))
        assert failed.value.steps == ["only"]
        stored = await flow.inspect(failed.value.run_id)
        assert stored.status == "failed" and stored.next == ["only"]
        assert stored.state == Order(item="pen")


async def test_a_route_label_that_is_not_declared_fails_the_routing_step() -> None:
    flow = Workflow("routes", Ticket).step("classify", classify).step("fix", fix)
    flow.route("classify", lambda s: "unknown", {"bug": "fix", "done": END})
    with pytest.raises(WorkflowFailed, match=r"chose 'unknown'.*\['bug', 'done'\]"):
        await flow.run(Ticket("x"))


async def test_an_agent_step_maps_state_to_prompt_and_answer_to_state() -> None:
    model = ScriptedModel(["It is a login question."])
    agent = Agent(model=model, name="support")

    def keep(state: Ticket, response: RunResponse[str]) -> dict[str, Any]:
        return {"reply": response.content or ""}

    flow = Workflow("support", Ticket).step("classify", classify)
    flow.step("explain", agent, prompt=lambda s: f"Explain: {s.text}", update=keep)
    flow.edge("classify", "explain")
    result = await flow.run(Ticket("how do I log in?"))
    assert result.state.reply == "It is a login question."
    assert model.requests[0].messages[-1].content == "Explain: how do I log in?"


def drafting(agent: Agent, store: WorkflowStore, *, broken: list[bool]) -> Workflow[Ticket]:
    async def check(t: Ticket) -> dict[str, Any]:
        if broken and broken.pop():
            raise RuntimeError("the checker crashed")
        return {"rounds": t.rounds + 1}

    def keep(t: Ticket, response: RunResponse[str]) -> dict[str, Any]:
        return {"notes": [*t.notes, response.content or ""]}

    flow = Workflow("drafts", Ticket, store=store)
    flow.step("draft", agent, prompt=lambda t: f"Draft {t.rounds + 1}", update=keep,
              max_iterations=3)  # fmt: skip
    flow.step("check", check).edge("draft", "check")
    return flow.route("check", lambda t: "again" if t.rounds < 2 else "done",
                      {"again": "draft", "done": END})  # fmt: skip


async def test_an_agent_step_has_one_conversation_per_run_kept_across_a_resume() -> None:
    storage, store = InMemoryStorage(), InMemoryWorkflowStore()
    first = ScriptedModel(["draft one"])
    with pytest.raises(WorkflowFailed, match="the checker crashed"):
        await drafting(Agent(model=first, storage=storage), store, broken=[True]).run(
            Ticket("x"), run_id="d-1"
        )
    # a new process: a new agent object with the same storage resumes the conversation
    second = ScriptedModel(["draft two"])
    agent = Agent(model=second, storage=storage)
    result = await drafting(agent, store, broken=[]).resume("d-1")
    assert result.state.notes == ["draft one", "draft two"]
    seen = [m.content for m in second.requests[0].messages if m.role in ("user", "assistant")]
    assert seen == ["Draft 1", "draft one", "Draft 2"]
    assert agent.memory.runs == []  # the declared agent itself ran nothing
    session = await storage.load_session(agent.user_id, "d-1/draft")
    assert session is not None and len(session.runs) == 2


async def test_a_step_can_be_any_object_with_async_run_such_as_a_team() -> None:
    @dataclass
    class Answer:
        content: str

    class Panel:  # no clone(): it runs as it is
        def __init__(self) -> None:
            self.tasks: list[str] = []

        async def run(self, task: str) -> Answer:
            self.tasks.append(task)
            return Answer(f"{len(self.tasks)} opinion(s) on {task}")

    panel = Panel()
    flow = Workflow("panel", Ticket).step(
        "ask", panel, prompt=lambda t: t.text, update=lambda t, a: {"reply": a.content}
    )
    assert (await flow.run(Ticket("Oslo"))).state.reply == "1 opinion(s) on Oslo"
    assert panel.tasks == ["Oslo"]


async def test_runs_sharing_an_agent_step_run_concurrently_in_separate_conversations() -> None:
    model = ScriptedModel(["a", "b", "c", "d"], latency=0.01)
    flow = drafting(Agent(model=model), InMemoryWorkflowStore(), broken=[])
    results = await asyncio.gather(flow.run(Ticket("x")), flow.run(Ticket("y")))
    assert all(r.status == "completed" and len(r.state.notes) == 2 for r in results)
    assert all(len(request.messages) in (1, 3) for request in model.requests)  # never 5


async def test_runs_sharing_a_team_step_run_concurrently_in_separate_conversations() -> None:
    gate = asyncio.Barrier(2)  # both runs' leads in a model call at once

    async def lead_reply(messages: list[Message], request: ModelRequest) -> str:
        async with asyncio.timeout(10):  # one run after the other would wait here forever
            await gate.wait()
        return f"{sum(m.role == 'user' for m in messages)} task(s) seen"

    async def member_reply(messages: list[Message], request: ModelRequest) -> str:
        return "part"

    team = Team(
        name="desk", coordinator=Agent(name="lead", model=FunctionModel(lead_reply)),
        members=[Agent(name="m", model=FunctionModel(member_reply))],
    )  # fmt: skip
    flow = Workflow("desk", Ticket).step(
        "ask", team, prompt=lambda t: t.text, update=lambda t, r: {"reply": r.content}
    )
    results = await asyncio.gather(flow.run(Ticket("a")), flow.run(Ticket("b")))
    assert [r.state.reply for r in results] == ["1 task(s) seen"] * 2
    assert team.coordinator.memory.runs == []  # the declared team itself ran nothing


async def test_several_runs_of_one_workflow_run_at_once() -> None:
    gate = asyncio.Barrier(3)

    async def wait(state: Ticket) -> dict[str, Any]:
        await gate.wait()
        return {"reply": state.text.upper()}

    flow = Workflow("many", Ticket).step("wait", wait)
    async with asyncio.timeout(10):  # sequential runs would wait at the barrier forever
        results = await asyncio.gather(*(flow.run(Ticket(t)) for t in "abc"))
    assert [r.state.reply for r in results] == ["A", "B", "C"]
    assert len({r.run_id for r in results}) == 3


# -- parallel branches --------------------------------------------------------------------------


def fan_out(left: Any, right: Any, *, merge: Any = None) -> Workflow[Order]:
    async def start(order: Order) -> None:
        return None

    async def total(order: Order) -> dict[str, Any]:
        return {"price": float(order.left + order.right)}

    flow = Workflow("fan", Order).step("start", start).step("left", left).step("right", right)
    flow.step("total", total).parallel("start", ["left", "right"], join="total", merge=merge)
    return flow.edge("left", "total").edge("right", "total")


async def test_parallel_branches_run_concurrently_and_join() -> None:
    both_running = asyncio.Barrier(2)

    async def left(order: Order) -> dict[str, Any]:
        await both_running.wait()  # only passes when the other branch runs at the same time
        return {"left": 2}

    async def right(order: Order) -> dict[str, Any]:
        await both_running.wait()
        return {"right": 3}

    async with asyncio.timeout(10):
        result = await fan_out(left, right).run(Order(item="x"))
    assert result.status == "completed"
    assert (result.state.left, result.state.right, result.state.price) == (2, 3, 5.0)
    assert [s.step for s in result.steps][-1] == "total"


async def test_a_failing_branch_does_not_cancel_its_sibling_and_only_it_runs_again() -> None:
    calls: list[str] = []
    fixed = False
    left_started = asyncio.Event()

    async def left(order: Order) -> dict[str, Any]:
        calls.append("left")
        left_started.set()
        if not fixed:
            raise RuntimeError("left is broken")
        return {"left": 1}

    async def right(order: Order) -> dict[str, Any]:
        calls.append("right")
        await left_started.wait()  # still running after its sibling failed
        await asyncio.sleep(0)
        return {"right": 2}

    flow = fan_out(left, right)
    with pytest.raises(WorkflowFailed, match="left is broken") as failed:
        await flow.run(Order(item="x"))
    stored = await flow.inspect(failed.value.run_id)
    assert stored.status == "failed" and stored.next == ["left"]
    assert {(s.step, s.status) for s in stored.steps} >= {
        ("left", "failed"),
        ("right", "completed"),
    }
    fixed = True
    result = await flow.resume(failed.value.run_id)
    assert (result.status, result.state.price) == ("completed", 3.0)
    assert calls == ["left", "right", "left"]
    assert [s.attempt for s in result.steps if s.step == "left"] == [1, 2]


async def test_branches_that_change_one_field_differently_fail_at_the_join_unless_merged() -> None:
    async def left(order: Order) -> dict[str, Any]:
        return {"quantity": 2}

    async def right(order: Order) -> dict[str, Any]:
        return {"quantity": 3}

    with pytest.raises(WorkflowFailed, match=r"'left' and 'right' both changed the field"):
        await fan_out(left, right).run(Order(item="x"))

    def add(base: Order, branches: list[Order]) -> Order:
        extra = sum(b.quantity - base.quantity for b in branches)
        return base.model_copy(update={"quantity": base.quantity + extra})

    result = await fan_out(left, right, merge=add).run(Order(item="x"))
    assert result.state.quantity == 4  # 1 + (2 - 1) + (3 - 1)


async def test_a_branch_may_be_a_chain_of_steps_with_a_route() -> None:
    async def start(t: Ticket) -> None:
        return None

    def note(text: str) -> Any:
        async def step(t: Ticket) -> dict[str, Any]:
            return {"notes": [*t.notes, text]} if text != "b" else {"kind": text}

        return step

    async def join(t: Ticket) -> dict[str, Any]:
        return {"reply": f"{t.kind}:{','.join(t.notes)}"}

    flow = Workflow("chains", Ticket).step("start", start)
    flow.step("a1", note("a1")).step("a2", note("a2")).step("b", note("b"))
    flow.step("join", join).parallel("start", ["a1", "b"], join="join")
    flow.route("a1", lambda t: "more", {"more": "a2", "skip": "join"}).edge("a2", "join")
    flow.edge("b", "join")
    result = await flow.run(Ticket("x"))
    assert result.state.reply == "b:a1,a2"


# -- loops ------------------------------------------------------------------------------------


def review_loop(bound: int, good_after: int) -> Workflow[Ticket]:
    async def draft(t: Ticket, ctx: StepContext) -> dict[str, Any]:
        return {"rounds": ctx.iteration, "reply": f"draft {ctx.iteration}"}

    async def check(t: Ticket) -> dict[str, Any]:
        return {"approved": t.rounds >= good_after}

    flow = Workflow("loop", Ticket).step("draft", draft, max_iterations=bound)
    flow.step("check", check).edge("draft", "check")
    return flow.route("check", lambda t: "ok" if t.approved else "again",
                      {"ok": END, "again": "draft"})  # fmt: skip


async def test_a_bounded_loop_runs_until_its_route_leaves_it() -> None:
    result = await review_loop(bound=5, good_after=3).run(Ticket("x"))
    assert result.state.reply == "draft 3"
    drafts = [s for s in result.steps if s.step == "draft"]
    assert [s.iteration for s in drafts] == [1, 2, 3]
    assert [s.key.rsplit("/", 1)[1] for s in drafts] == ["1", "2", "3"]


async def test_a_loop_that_reaches_its_bound_fails_naming_the_bound_and_resumes_when_raised() -> (
    None
):
    flow = review_loop(bound=2, good_after=3)
    with pytest.raises(WorkflowFailed, match=r"'draft' would run a 3rd time.*max_iterations=2"):
        await flow.run(Ticket("x"), run_id="loop-1")
    raised = review_loop(bound=3, good_after=3)
    raised.store = flow.store  # the fixed code, the same store
    with pytest.raises(UsageError, match="'loop-1' is failed, not waiting for an approval"):
        await raised.resume("loop-1", approval=Approval(True))
    result = await raised.resume("loop-1")
    assert (result.status, result.state.reply) == ("completed", "draft 3")


# -- human approval -----------------------------------------------------------------------------


def approval_flow(store: WorkflowStore) -> Workflow[Ticket]:
    async def send(t: Ticket) -> dict[str, Any]:
        return {"reply": "sent"}

    async def drop(t: Ticket) -> dict[str, Any]:
        return {"reply": f"dropped: {t.notes[-1]}"}

    def decide(t: Ticket, approval: Approval) -> dict[str, Any]:
        return {"approved": approval.approved, "notes": [*t.notes, approval.comment]}

    flow = Workflow("approve", Ticket, store=store).step("answer", answer)
    flow.approval("review", lambda t: f"Send {t.reply!r}?", apply=decide)
    flow.step("send", send).step("drop", drop).edge("answer", "review")
    return flow.route("review", lambda t: "yes" if t.approved else "no",
                      {"yes": "send", "no": "drop"})  # fmt: skip


async def test_an_approval_step_pauses_the_run_until_a_decision_resumes_it() -> None:
    store = InMemoryWorkflowStore()
    paused = await approval_flow(store).run(Ticket("q"), run_id="t-1")
    assert paused.status == "paused" and paused.next == ["review"]
    assert [(p.step, p.question) for p in paused.pending] == [("review", "Send 'see the manual'?")]
    # later, another Workflow object (as in another process) over the same store
    again = approval_flow(store)
    assert (await again.inspect("t-1")).status == "paused"
    with pytest.raises(UsageError, match=r"paused at approval step\(s\) \['review'\]"):
        await again.resume("t-1")
    result = await again.resume("t-1", approval=Approval(False, comment="too curt"))
    assert (result.status, result.state.reply) == ("completed", "dropped: too curt")
    assert [s.step for s in result.steps] == ["answer", "review", "drop"]
    for retry in (again.resume("t-1"), again.resume("t-1", approval=Approval(True))):
        assert (await retry).state.reply == "dropped: too curt"  # completed: returned as is


async def test_a_run_failed_in_one_branch_shows_the_approval_its_other_branch_waits_for() -> None:
    broken = [True]

    async def left(order: Order) -> dict[str, Any]:
        if broken and broken.pop():
            raise RuntimeError("left is down")
        return {"left": 1}

    async def noop(order: Order) -> None:
        return None

    flow = Workflow("fan", Order)
    flow.step("start", noop).step("left", left).step("total", noop)
    flow.approval("right", "Go right?", apply=lambda o, a: {"right": int(a.approved)})
    flow.parallel("start", ["left", "right"], join="total")
    flow.edge("left", "total").edge("right", "total")
    with pytest.raises(WorkflowFailed):
        await flow.run(Order(item="x"), run_id="f-1")
    failed = await flow.inspect("f-1")
    assert failed.status == "failed"
    assert [(p.step, p.question) for p in failed.pending] == [("right", "Go right?")]
    with pytest.raises(UsageError, match=r"also waits at approval step\(s\) \['right'\]"):
        await flow.resume("f-1")
    done = await flow.resume("f-1", approval=Approval(True))
    assert (done.status, done.state.left, done.state.right, done.pending) == (
        "completed", 1, 1, []
    )  # fmt: skip


# -- events -------------------------------------------------------------------------------------


async def test_a_run_streams_its_steps_as_events() -> None:
    kinds: list[str] = []
    async with aclosing(triage().run_stream(Ticket("crash"), run_id="r")) as events:
        async for event in events:
            kinds.append(event.kind)
            if isinstance(event, StepStarted):
                assert (event.key, event.attempt) == (f"r/{event.step}/1", 1)
            if isinstance(event, StepCompleted) and event.step == "fix":
                assert event.changes == {"reply": "we fixed it"}
            if isinstance(event, WorkflowCompleted):
                assert event.result.state.reply == "we fixed it"
    assert kinds == ["workflow_started", "step_started", "step_completed", "step_started",
                     "step_completed", "workflow_completed"]  # fmt: skip


async def test_a_failed_run_streams_the_failure_then_raises() -> None:
    async def broken(t: Ticket) -> None:
        raise ValueError("no")

    flow = Workflow("fail", Ticket).step("broken", broken)
    seen: list[Any] = []
    with pytest.raises(WorkflowFailed) as failed:
        async for event in flow.run_stream(Ticket("x")):
            seen.append(event)
    assert isinstance(seen[0], WorkflowStarted)
    assert isinstance(seen[-1], StepFailed) and seen[-1].error == "ValueError: no"
    assert isinstance(failed.value.__cause__, ValueError)


async def test_a_paused_run_ends_its_stream_with_the_pause() -> None:
    events = [e async for e in approval_flow(InMemoryWorkflowStore()).run_stream(Ticket("q"))]
    assert isinstance(events[-1], WorkflowPaused)
    assert events[-1].result.pending[0].step == "review"


async def test_leaving_a_stream_early_stops_the_run() -> None:
    stopped = asyncio.Event()

    async def slow(t: Ticket) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    flow = Workflow("early", Ticket).step("first", classify).step("slow", slow)
    flow.edge("first", "slow")
    async with aclosing(flow.run_stream(Ticket("x"), run_id="e")) as events:
        async for event in events:
            if isinstance(event, StepStarted) and event.step == "slow":
                break
    assert stopped.is_set()
    assert (await flow.inspect("e")).next == ["slow"]  # resumable


# -- side effects recorded once -----------------------------------------------------------------


async def test_once_replays_a_recorded_effect_when_a_failed_step_runs_again() -> None:
    effects: list[str] = []
    attempts: list[int] = []

    async def charge(t: Ticket, ctx: StepContext) -> dict[str, Any]:
        async def effect() -> list[str]:
            effects.append(ctx.key)
            return ["receipt", ctx.key]

        receipt = await ctx.once("charge", effect)
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("the mail server is down")
        return {"notes": receipt}

    flow = Workflow("pay", Ticket).step("charge", charge)
    with pytest.raises(WorkflowFailed):
        await flow.run(Ticket("x"), run_id="p")
    result = await flow.resume("p")
    assert result.state.notes == ["receipt", "p/charge/1"]
    assert effects == ["p/charge/1"] and attempts == [1, 2]


async def test_once_refuses_a_result_that_is_not_json() -> None:
    async def step(t: Ticket, ctx: StepContext) -> None:
        await ctx.once("x", lambda: asyncio.sleep(0, result=object()))

    with pytest.raises(WorkflowFailed, match=r"ctx.once\('x', ...\) returned a value that is not"):
        await Workflow("j", Ticket).step("step", step).run(Ticket("x"))


# -- graph checks -------------------------------------------------------------------------------


async def noop(t: Ticket) -> None:
    return None


def graph(*steps: str, **bounds: int) -> Workflow[Ticket]:
    flow = Workflow("g", Ticket)
    for name in steps:
        flow.step(name, noop, max_iterations=bounds.get(name))
    return flow


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Workflow("g", Ticket), "has no steps"),
        (lambda: graph("a").edge("a", "b"), r"leads to 'b', which is not a step \(a dangling"),
        (lambda: graph("a", "b").edge("x", "b"), "leaves 'x', which is not a step"),
        (lambda: graph("a", "b"), r"steps \['b'\] cannot be reached from the start step 'a'"),
        (
            lambda: graph("a", "b", "c").edge("a", "b").edge("b", "c").edge("c", "b"),
            r"the steps b -> c -> b form a cycle with no bound: give one of them max_iterations",
        ),
        (
            lambda: graph("a", "b", "c", "d").parallel("a", ["b", "c"], join="d")
            .route("b", lambda t: "x", {"x": "d", "stop": END}).edge("c", "d"),
            "branch 'b' of the parallel section after 'a' can end the workflow",
        ),
        (
            lambda: graph("a", "b", "c", "d").parallel("a", ["b", "c"], join="d")
            .edge("b", "c").edge("c", "d"),
            "step 'c' is in both branch 'b' and branch 'c'",
        ),
        (
            lambda: graph("a", "b", "c", "d", "e").edge("a", "e").edge("e", "b")
            .parallel("b", ["c", "d"], join="a", ).edge("c", "a").edge("d", "a"),
            "form a cycle with no bound",
        ),
        (
            lambda: graph("a", "b", "c", "d").parallel("a", ["b", "c", "b"], join="d"),
            "needs at least two different branches",
        ),
    ],
)  # fmt: skip
def test_a_graph_that_cannot_run_is_rejected_when_built(build: Any, message: str) -> None:
    with pytest.raises(WorkflowGraphError, match=message):
        build().validate()


def test_a_bounded_cycle_is_accepted() -> None:
    flow = graph("a", "b", "c", b=3).edge("a", "b").edge("b", "c")
    flow.route("c", lambda t: "x", {"again": "b", "done": END})
    flow.validate()


def test_building_mistakes_are_reported_at_once() -> None:
    def blocking(t: Ticket) -> None:
        return None

    async def three(t: Ticket, ctx: StepContext, extra: int) -> None:
        return None

    flow = graph("a", "b").edge("a", "b")
    with pytest.raises(WorkflowGraphError, match="already has an edge to 'b'; a step has one way"):
        flow.route("a", lambda t: "b", {"b": "b"})
    with pytest.raises(WorkflowGraphError, match="already a step named 'a'"):
        flow.step("a", noop)
    with pytest.raises(WorkflowGraphError, match="step name 'a b'"):
        flow.step("a b", noop)
    with pytest.raises(UsageError, match="a plain def would block the event loop"):
        flow.step("c", blocking)  # type: ignore[arg-type]
    with pytest.raises(WorkflowGraphError, match="takes \\(state\\) or \\(state, ctx\\), not 3"):
        flow.step("c", three)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="give prompt="):
        flow.step("c", Agent(model=ScriptedModel([])))  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="pydantic model or a dataclass"):
        Workflow("w", dict)
    with pytest.raises(UsageError, match="run_id"):
        flow.run_stream(Ticket("x"), run_id="a/b")


# -- drawing ------------------------------------------------------------------------------------


def test_mermaid_text_shows_steps_routes_branches_and_bounds() -> None:
    flow = graph("start", "left", "right", "join", join=2)
    flow.approval("ok", "Ship it?", apply=lambda t, a: {"approved": a.approved})
    flow.parallel("start", ["left", "right"], join="join").edge("left", "join")
    flow.edge("right", "join").edge("join", "ok")
    flow.route("ok", lambda t: "y" if t.approved else "n", {"y": END, "n": "join"})
    text = flow.mermaid()
    assert text.startswith("flowchart TD\n")
    for line in ['join["join ≤2×"]', 'ok{{"ok"}}', "__start__ --> start", "start ==> left",
                 "start ==> right", "ok -->|y| __end__", "ok -->|n| join"]:  # fmt: skip
        assert f"    {line}\n" in text


def test_mermaid_ids_avoid_reserved_words() -> None:
    text = graph("end", "graph-2").edge("end", "graph-2").mermaid()
    assert 's0["end"]' in text and 's1["graph-2"]' in text and "s0 --> s1" in text


async def test_draw_png_writes_an_image(tmp_path: Path) -> None:
    flow = review_loop(bound=3, good_after=2)
    path = await asyncio.to_thread(flow.draw_png, tmp_path / "loop.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_draw_png_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from tests.test_workflows import triage\n"
        "from agentica.errors import UsageError\n"
        "try:\n"
        f"    triage().draw_png({str(tmp_path / 'x.png')!r})\n"
        "except UsageError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=60, check=True).stdout  # fmt: skip
    assert "pip install 'agentica[eval]'" in out and "mermaid()" in out


# -- stores -------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """``"memory"`` or the URL of an empty database."""
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database(f"wf_{os.getpid()}_{random.randrange(10**9)}")


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[WorkflowStore]:
    opened = InMemoryWorkflowStore() if store_url == "memory" else SQLWorkflowStore(store_url)
    yield opened
    await opened.aclose()


def step_record(seq: int) -> StepRecord:
    return StepRecord(seq=seq, step="s", key=f"r/s/{seq}", iteration=seq, attempt=1,
                      status="completed", started_at=1.0, finished_at=2.0,
                      changes={"x": [seq, "ü\x00"]})  # fmt: skip


async def test_a_store_saves_with_compare_and_set(store: WorkflowStore) -> None:
    assert await store.load_run("r") is None
    assert await store.save_run("r", "w", "running", "{}", expected_revision=0) == 1
    with pytest.raises(WorkflowConflictError, match="already exists"):
        await store.save_run("r", "w", "running", "{}", expected_revision=0)
    two = await store.save_run("r", "w", "paused", '{"a": 1}', expected_revision=1,
                               step=step_record(1))  # fmt: skip
    with pytest.raises(WorkflowConflictError, match="another process is running it"):
        await store.save_run("r", "w", "failed", "{}", expected_revision=1, step=step_record(2))
    stored = await store.load_run("r")
    assert stored is not None and (stored.status, stored.revision, stored.record) == (
        "paused",
        two,
        '{"a": 1}',
    )
    assert await store.load_steps("r") == [step_record(1)]  # the refused step was not written
    await store.save_run("q", "w", "completed", "{}", expected_revision=0)
    await store.save_run("o", "other", "paused", "{}", expected_revision=0)
    assert {r.run_id for r in await store.list_runs("w")} == {"r", "q"}
    assert [r.run_id for r in await store.list_runs("w", status="paused")] == ["r"]


async def test_a_workflow_runs_on_every_store(store: WorkflowStore) -> None:
    paused = await approval_flow(store).run(Ticket("q"), run_id="a-1")
    result = await approval_flow(store).resume(paused.run_id, approval=Approval(True))
    assert (result.status, result.state.reply) == ("completed", "sent")
    assert [s.seq for s in result.steps] == [1, 2, 3]


async def test_two_resumers_of_one_run_cannot_both_go_on(store: WorkflowStore) -> None:
    paused = await approval_flow(store).run(Ticket("q"), run_id="twice")
    first, second = approval_flow(store), approval_flow(store)  # as in two processes
    outcomes = await asyncio.gather(
        first.resume(paused.run_id, approval=Approval(True)),
        second.resume(paused.run_id, approval=Approval(True)),
        return_exceptions=True,
    )
    # the loser either lost the compare-and-set or found the run no longer paused
    refused = [o for o in outcomes if isinstance(o, WorkflowConflictError | UsageError)]
    assert len(refused) == 1, outcomes
    assert [s.step for s in (await first.inspect("twice")).steps] == ["answer", "review", "send"]


async def test_sql_tables_of_a_newer_agentica_are_refused(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    first = SQLWorkflowStore(url)
    await first.save_run("r", "w", "running", "{}", expected_revision=0)
    await first.aclose()
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(sa.text("UPDATE workflow_schema_version SET version = 99"))
    await engine.dispose()
    newer = SQLWorkflowStore(url)
    try:
        with pytest.raises(StorageError, match="newer agentica"):
            await newer.load_run("r")
    finally:
        await newer.aclose()
