"""Run limits hold for a whole run tree (a run and the subagent runs under it), counted as the
usage happens: turns, tool calls, tokens, cost and wall time."""

from __future__ import annotations

import asyncio
import gc

import pytest

from agentica import Agent, LimitExceeded, RunLimits, tool
from agentica.deep.subagents import SubAgent, SubAgents
from agentica.messages import AssistantMessage, Message, ToolMessage, Usage, UserMessage
from agentica.models.base import ModelRequest
from agentica.models.pricing import ModelPrice
from agentica.run import ToolCallCompleted
from agentica.testing import FunctionModel, call
from agentica.tools.call import FunctionCall


class Tree:
    """Agents that never stop calling tools: every reply asks for ``work`` and, while the
    ``task`` tool is offered, ``fan_out`` subagents. Counts what really happened."""

    def __init__(
        self,
        *,
        fan_out: int = 1,
        tokens: int = 100,
        work_delay: float = 0.0,
        answer_after: int | None = None,
    ) -> None:
        self.fan_out = fan_out
        self.tokens = tokens
        self.work_delay = work_delay
        self.answer_after = answer_after  # a subagent answers after this many tool turns
        self.executed = 0  # tool calls that ran: work calls and subagents started
        self.responses = 0
        self.spent = 0  # tokens of every response
        self.cancelled = 0

    def reply(self, messages: list[Message], request: ModelRequest) -> AssistantMessage:
        user = next(m for m in messages if isinstance(m, UserMessage))
        if not any(isinstance(m, AssistantMessage) for m in messages) and user.text != "go":
            self.executed += 1  # a subagent's first request: its task call ran
        self.responses += 1
        self.spent += self.tokens
        usage = Usage(input_tokens=self.tokens - 10, output_tokens=10)
        turns = sum(isinstance(m, ToolMessage) for m in messages)
        if self.answer_after is not None and turns >= self.answer_after:
            return AssistantMessage(content=f"done: {user.text}", usage=usage)
        calls = [call("work")]
        if any(t.name == "task" for t in request.tools):
            calls += [
                call("task", description=f"part {i}", agent="worker") for i in range(self.fan_out)
            ]
        return AssistantMessage(tool_calls=calls, usage=usage)

    def agent(
        self,
        depth: int,
        *,
        price: ModelPrice | None = None,
        top: FunctionModel | None = None,
        limits: RunLimits | None = None,
    ) -> Agent:
        """The top agent; its subagents (``worker``) nest ``depth`` levels deep."""
        tree = self

        @tool
        async def work() -> str:
            """Do a piece of work."""
            tree.executed += 1
            try:
                await asyncio.sleep(tree.work_delay)
            except asyncio.CancelledError:
                tree.cancelled += 1
                raise
            return "worked"

        worker = SubAgent("worker", "does a part", model=FunctionModel(self.reply, price=price))
        return Agent(
            model=top or FunctionModel(self.reply, price=price),
            tools=[work],
            capabilities=[SubAgents([worker], general=False, max_depth=depth)],
            limits=limits,
        )


async def test_max_tool_calls_holds_for_a_depth_3_tree() -> None:
    tree = Tree()
    completed: list[FunctionCall] = []
    with pytest.raises(LimitExceeded) as caught:
        async with tree.agent(depth=3).run_stream(
            "go", limits=RunLimits(max_tool_calls=4)
        ) as stream:
            async for event in stream:
                if isinstance(event, ToolCallCompleted):
                    completed.append(event.call)
    assert caught.value.limit == "max_tool_calls"
    # the parent saw its subagent fail on the tree's limit, then stopped itself
    assert [(c.name, c.status) for c in completed] == [("work", "success"), ("task", "error")]
    assert "LimitExceeded: run limit max_tool_calls=4 reached" in (completed[1].content or "")
    assert "max_tool_calls=4" in str(caught.value) and "RunLimits(max_tool_calls" in str(
        caught.value
    )
    assert 0 < tree.executed <= 4


async def test_max_tokens_stops_at_the_first_response_crossing_it() -> None:
    tree = Tree(tokens=700)
    with pytest.raises(LimitExceeded) as caught:
        await tree.agent(depth=3).run("go", limits=RunLimits(max_tokens=3000))
    assert caught.value.limit == "max_tokens"
    assert 3000 <= tree.spent <= 3000 + 700  # one response over at most
    assert tree.responses == 5


async def test_max_turns_counts_every_model_call_of_the_tree() -> None:
    tree = Tree()
    with pytest.raises(LimitExceeded) as caught:
        await tree.agent(depth=3).run("go", limits=RunLimits(max_turns=5))
    assert caught.value.limit == "max_turns"
    assert tree.responses == 5


async def test_max_cost_holds_for_the_tree() -> None:
    tree = Tree(tokens=1000)  # 990 input + 10 output tokens at $1/$1 per million: $0.001
    price = ModelPrice(input=1.0, output=1.0)
    with pytest.raises(LimitExceeded) as caught:
        await tree.agent(depth=3, price=price).run("go", limits=RunLimits(max_cost=0.0035))
    assert caught.value.limit == "max_cost"
    assert tree.responses == 4


async def test_parallel_subagents_share_one_budget() -> None:
    tree = Tree(fan_out=3, work_delay=0.01)
    with pytest.raises(LimitExceeded) as caught:
        await tree.agent(depth=2).run("go", limits=RunLimits(max_tool_calls=10))
    assert caught.value.limit == "max_tool_calls"
    assert 0 < tree.executed <= 10


async def test_the_wall_time_runs_from_the_top_level_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tree = Tree(fan_out=2, work_delay=30)
    with pytest.raises(LimitExceeded) as caught:
        await tree.agent(depth=3).run("go", limits=RunLimits(max_wall_time=0.3))
    assert caught.value.limit == "max_wall_time"
    assert tree.cancelled == tree.responses == 15  # each agent's work call was stopped
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    gc.collect()
    # every run of the tree stops at the same deadline: no error is left unretrieved
    assert "never retrieved" not in caplog.text


async def test_a_subagents_own_limit_stops_only_the_subagent() -> None:
    tree = Tree()
    parent = FunctionModel(
        lambda messages, request: (
            AssistantMessage(content="gave up on the part")
            if any(isinstance(m, ToolMessage) for m in messages)
            else AssistantMessage(tool_calls=[call("task", description="part", agent="worker")])
        )
    )
    # each run's own limit (subagents copy the agent's): tighter than the tree's
    agent = tree.agent(depth=2, top=parent, limits=RunLimits(max_turns=2))
    response = await agent.run("go", limits=RunLimits(max_turns=50))
    (task,) = response.tool_calls
    assert task.status == "error" and "LimitExceeded" in (task.content or "")
    assert "max_turns=2" in (task.content or "")


async def test_the_final_usage_is_the_sum_of_the_tree() -> None:
    tree = Tree(fan_out=2, answer_after=1)
    answered: list[int] = []

    def top(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in messages):
            answered.append(1)
            return AssistantMessage(content="all done", usage=Usage(input_tokens=5))
        return tree.reply(messages, request)

    agent = tree.agent(depth=3, top=FunctionModel(top))
    response = await agent.run("go", limits=RunLimits(max_tool_calls=100))
    usage = response.usage
    assert response.content == "all done" and answered
    assert usage.requests == tree.responses + 1
    assert usage.total_tokens == tree.spent + 5
    assert usage.tool_calls == tree.executed


async def test_an_agent_used_as_a_tool_shares_the_callers_budget() -> None:
    executed = 0

    @tool
    def work() -> str:
        """Do a piece of work."""
        nonlocal executed
        executed += 1
        return "worked"

    def busy(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        names = [t.name for t in request.tools]
        calls = [call("work")] + ([call("helper", task="more")] if "helper" in names else [])
        return AssistantMessage(tool_calls=calls, usage=Usage(input_tokens=90, output_tokens=10))

    helper = Agent(model=FunctionModel(busy), tools=[work], name="helper")
    top = Agent(
        model=FunctionModel(busy),
        tools=[work, helper.as_tool()],
        limits=RunLimits(max_tool_calls=6),
    )
    with pytest.raises(LimitExceeded) as error:
        await top.run("go")
    assert error.value.limit == "max_tool_calls"
    assert executed <= 6  # a fresh allowance for the helper let it run until its own limit
