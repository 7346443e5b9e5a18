"""The run loop's seams: ``ctx.offered`` is what each request offers, ``run_child`` runs an agent
inside a tool call (tree budget, usage, events), and one run holds its agent at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import pytest

from agentica import Agent, ContextPolicy, LimitExceeded, RunContext, RunLimits, tool
from agentica.errors import ConcurrentRunError, ModelResponseError
from agentica.messages import Message
from agentica.models import ModelRequest
from agentica.run import ModelRequestStarted, RunEvent
from agentica.run.capability import Capability
from agentica.run.child import run_child
from agentica.testing import FunctionModel, ScriptedModel, call, tool_calls


@tool
def look(path: str) -> str:
    """Look at a file."""
    return f"contents of {path}"


@tool
def write(path: str) -> str:
    """Write a file."""
    return f"wrote {path}"


class ReadOnly(Capability):
    """Offers only ``look`` from the second turn on; keeps the run's context to inspect it."""

    name = "read_only"

    def __init__(self) -> None:
        self.ctx: RunContext[Any] | None = None

    async def allowed_tools(self, ctx: RunContext[Any]) -> Collection[str] | None:
        self.ctx = ctx
        return ["look"] if ctx.usage.requests else None


def offered_model(capability: ReadOnly, replies: list[Any], seen: list[tuple[str, ...]]) -> Any:
    """Checks, at every request, that ``ctx.offered`` names exactly the tools sent."""

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        assert capability.ctx is not None
        sent = tuple(t.name for t in request.tools)
        assert tuple(capability.ctx.offered) == sent
        seen.append(sent)
        return replies.pop(0)

    return reply


async def test_ctx_offered_is_what_each_request_offers() -> None:
    capability = ReadOnly()
    seen: list[tuple[str, ...]] = []
    replies = [tool_calls(call("write", path="a")), tool_calls(call("look", path="a")), "done"]
    model = FunctionModel(offered_model(capability, replies, seen))
    agent = Agent(model=model, tools=[look, write], capabilities=[capability])
    response = await agent.run("go")
    assert response.content == "done"
    assert seen == [("look", "write"), ("look",), ("look",)]


async def test_a_capability_refuses_a_call_before_it_runs_and_siblings_still_run() -> None:
    ran: list[str] = []

    @tool
    def put(path: str) -> str:
        """Put a file."""
        ran.append(path)
        return f"put {path}"

    class NoSecrets(Capability):
        name = "no_secrets"

        async def refuse_call(self, ctx: RunContext[Any], call: Any) -> str | None:
            return "not there: pick another path" if "secret" in call.call.arguments else None

    class Counter(Capability):  # (asked only about calls nobody refused before it)
        name = "counter"

        def __init__(self) -> None:
            self.asked: list[str] = []

        async def refuse_call(self, ctx: RunContext[Any], call: Any) -> str | None:
            self.asked.append(call.call.arguments)
            return None

    counter = Counter()
    model = ScriptedModel([
        tool_calls(call("put", path="secret.txt"), call("put", path="a.txt")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[put], capabilities=[NoSecrets(), counter])
    assert (await agent.run("go")).content == "done"
    assert ran == ["a.txt"]
    results = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [(r.is_error, r.content) for r in results] == [  # type: ignore[attr-defined]
        (True, "not there: pick another path"), (False, "put a.txt"),
    ]  # fmt: skip
    assert counter.asked == ['{"path": "a.txt"}']


async def test_ctx_offered_is_empty_when_the_context_window_forces_the_final_answer() -> None:
    capability = ReadOnly()
    seen: list[tuple[str, ...]] = []
    model = FunctionModel(offered_model(capability, ["the answer"], seen), context_window=4_600)

    async def summarizer(text: str, budget: int) -> str:
        return "summary"

    policy = ContextPolicy(summarizer=summarizer, reserve_output=600)
    agent = Agent(model=model, tools=[look, write], capabilities=[capability], context=policy)
    events = [e async for e in agent.run_stream("Process:\n" + "data " * 3_000)]
    assert next(e for e in events if isinstance(e, ModelRequestStarted)).final_only
    assert seen == [()]
    assert capability.ctx is not None
    assert dict(capability.ctx.offered) == {}


# ----------------------------------------------------------------------------- run_child


async def test_run_child_shares_the_tree_budget_merges_usage_and_reports_events() -> None:
    child = Agent(model=ScriptedModel([tool_calls(call("look", path="x")), "child done"]),
                  tools=[look], name="child")  # fmt: skip
    events: list[RunEvent] = []

    @tool
    async def delegate(ctx: RunContext[Any]) -> str:
        """Delegate."""
        response = await run_child(child, "look at x", ctx, on_event=events.append)
        assert ctx.budget is not None
        assert ctx.budget.turns == 3  # the parent's first call and the child's two
        return response.content or ""

    parent = Agent(model=ScriptedModel([tool_calls(call("delegate")), "parent done"]),
                   tools=[delegate])  # fmt: skip
    response = await parent.run("go")
    assert response.content == "parent done"
    assert [e.kind for e in events] == [
        "run_started", "model_request_started", "model_response_received", "tool_call_started",
        "tool_call_completed", "model_request_started", "model_response_received",
        "run_completed",
    ]  # fmt: skip
    assert response.usage.requests == 2 + 2  # the child's requests count in the parent's run
    assert response.usage.tool_calls == 1 + 1


async def test_run_child_adds_the_usage_of_a_child_that_fails() -> None:
    child = Agent(model=ScriptedModel([tool_calls(call("look", path="x"))] * 3), tools=[look])

    @tool
    async def delegate(ctx: RunContext[Any]) -> str:
        """Delegate."""
        await run_child(child, "look", ctx)
        return "unreachable"

    parent = Agent(model=ScriptedModel([tool_calls(call("delegate"))]), tools=[delegate],
                   limits=RunLimits(max_turns=3))  # fmt: skip
    with pytest.raises(LimitExceeded) as error:
        await parent.run("go")
    assert error.value.limit == "max_turns"
    record = parent.memory.runs[-1]
    assert record.status == "failed"
    assert record.usage.requests == 1 + 2  # the child's two calls before the tree's limit


# ----------------------------------------------------------------------------- one run at a time


async def test_a_refused_second_run_leaves_the_first_holding_the_agent() -> None:
    agent = Agent(model=ScriptedModel(["first"], latency=0.05))
    first = asyncio.create_task(agent.run("one"))
    await asyncio.sleep(0.01)
    with pytest.raises(ConcurrentRunError):
        await agent.run("two")
    assert agent.is_running
    assert (await first).content == "first"
    assert not agent.is_running


async def test_a_reply_that_repeats_the_harness_note_is_sent_back() -> None:
    """A small model copies its checkpoint note as its answer: the run asks again instead of
    ending with the note as the answer."""
    from agentica.run.capability import Capability
    from agentica.run.events import AnswerSentBack

    note = "Checkpoint: is the task really done? If not, continue with the next step."

    class Checkpoint(Capability):
        async def system_slot(self, ctx: RunContext[Any]) -> str | None:
            return note

    model = ScriptedModel(["Is the task really done? If not, continue with the next step.",
                           "The answer is 42."])  # fmt: skip
    agent = Agent(model=model, capabilities=[Checkpoint()])
    sent = []
    async with agent.run_stream("What is 6 * 7?") as stream:
        async for event in stream:
            if isinstance(event, AnswerSentBack):
                sent.append(event.source)
    assert stream.response.content == "The answer is 42." and sent == ["echo_reply"]


async def test_a_reply_that_repeats_an_earlier_turns_note_is_sent_back() -> None:
    """As seen in a deep agent's run: the checkpoint note came with one turn, another note with
    the next, and the model answered with the first note's last line."""
    from agentica.run.capability import Capability

    class EveryOther(Capability):
        def __init__(self) -> None:
            self.turn = 0

        async def system_slot(self, ctx: RunContext[Any]) -> str | None:
            self.turn += 1
            if self.turn == 1:
                return (
                    "Checkpoint.\n- is the task really done? If not, continue with the next step."
                )
            return "Open todos: none."

    @tool
    def look() -> str:
        """Look around."""
        return "nothing here"

    model = ScriptedModel([tool_calls(call("look")),
                           "Is the task really done? If not, continue with the next step.",
                           "The answer is 42."])  # fmt: skip
    agent = Agent(model=model, tools=[look], capabilities=[EveryOther()])
    assert (await agent.run("What is 6 * 7?")).content == "The answer is 42."
    # after an echo the next call must call a tool (a small model echoes instead of acting)
    assert [r.settings.tool_choice for r in model.requests] == [None, None, "required"]


async def test_a_capability_chooses_the_tool_of_the_next_call_if_it_is_offered() -> None:
    """``Capability.tool_choice``: the first capability's choice goes into that one request's
    settings; a tool that is not offered this turn is no choice."""

    class RunItNow(Capability):
        def __init__(self, choice: str) -> None:
            self.choice = choice

        async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
            return self.choice if ctx.usage.requests == 0 else None

    @tool
    def run_python(code: str) -> str:
        """Run code."""
        return "42"

    model = ScriptedModel([tool_calls(call("run_python", code="print(42)")), "42"])
    agent = Agent(model=model, tools=[run_python], capabilities=[RunItNow("run_python")])
    await agent.run("6 * 7?")
    assert [r.settings.tool_choice for r in model.requests] == ["run_python", None]
    model = ScriptedModel(["42"])
    agent = Agent(model=model, tools=[run_python], capabilities=[RunItNow("execute")])
    await agent.run("6 * 7?")
    assert model.requests[0].settings.tool_choice is None


async def test_a_choice_is_for_one_turn_and_an_echo_loop_still_ends() -> None:
    """Review findings: a second capability's choice waited for a later turn; a model that
    echoed every other turn (the forced call in between) never stopped."""

    class Once(Capability):
        def __init__(self, name: str, choice: str) -> None:
            self.name, self.choice = name, choice

        async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
            if ctx.state.get(self.name):
                return None
            ctx.state[self.name] = True
            return self.choice

    @tool
    def look() -> str:
        """Look around."""
        return "nothing"

    model = ScriptedModel([tool_calls(call("look")), tool_calls(call("look")), "done"])
    agent = Agent(model=model, tools=[look], capabilities=[Once("a", "look"), Once("b", "look")])
    await agent.run("go")
    assert [r.settings.tool_choice for r in model.requests] == ["look", None, None]

    class Note(Capability):
        async def system_slot(self, ctx: RunContext[Any]) -> str | None:
            return "Remember: the user's name is Ada and she lives in Lisbon."

    echo = "Remember: the user's name is Ada and she lives in Lisbon."
    model = ScriptedModel([echo, tool_calls(call("look")), echo])
    agent = Agent(model=model, tools=[look], capabilities=[Note()])
    with pytest.raises(ModelResponseError, match="two replies that only repeat a system note"):
        await agent.run("What do you know about me?")
