"""Agent: agent-as-session, concurrency rules, limits, history budget, output types, usage."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from pydantic import BaseModel

from agentica import (
    Agent,
    ConcurrentRunError,
    HistoryPolicy,
    LimitExceeded,
    ModelError,
    ModelPrice,
    OutputValidationError,
    RunContext,
    RunLimits,
    UsageError,
    tool,
)
from agentica.messages import (
    AssistantMessage,
    Message,
    RunUsage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentica.models import ModelRequest
from agentica.run.events import (
    AnswerSentBack,
    ModelRequestStarted,
    ModelResponseReceived,
    RunCompleted,
    RunStarted,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from agentica.testing import FunctionModel, ScriptedModel, call, model_error, text, tool_calls


@tool
async def echo(value: str) -> str:
    """Echo a value back."""
    return value


def user_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


async def test_multi_turn_needs_no_session_code() -> None:
    model = ScriptedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent(model=model, instructions="Be brief.")
    await agent.run("My name is Ada.")
    second = await agent.run("What is my name?")
    assert second.content == "Your name is Ada."
    sent = model.requests[1].messages
    assert isinstance(sent[0], SystemMessage) and sent[0].content == "Be brief."
    assert user_texts(list(sent)) == ["My name is Ada.", "What is my name?"]
    assert any(
        isinstance(m, AssistantMessage) and m.content == "Nice to meet you, Ada." for m in sent
    )
    assert len(agent.memory.runs) == 2
    assert agent.usage.requests == 2


async def test_a_second_concurrent_run_on_one_agent_is_refused() -> None:
    model = ScriptedModel(["one", "two"], latency=0.05)
    agent = Agent(model=model)
    first = asyncio.create_task(agent.run("first"))
    await asyncio.sleep(0.01)
    with pytest.raises(ConcurrentRunError, match="clone"):
        await agent.run("second")
    assert (await first).content == "one"
    assert (await agent.run("third")).content == "two"  # usable again afterwards


async def test_clones_share_configuration_not_memory() -> None:
    model = FunctionModel(lambda messages, request: f"seen {len(messages)}", latency=0.02)
    agent = Agent(model=model, tools=[echo], instructions="sys")
    twin = agent.clone(name="twin")
    await asyncio.gather(agent.run("a"), twin.run("b"))  # concurrently: different sessions
    assert twin.model is agent.model and twin.functions is agent.functions
    assert twin.name == "twin" and twin.instructions == "sys"
    assert len(agent.memory.runs) == len(twin.memory.runs) == 1
    assert agent.memory.runs[0].messages[0] != twin.memory.runs[0].messages[0]
    with pytest.raises(UsageError, match="unknown settings"):
        agent.clone(colour="red")


async def test_two_agents_sharing_a_model_never_mix_histories() -> None:
    def reply(messages: list[Message], request: ModelRequest) -> Any:
        users = user_texts(messages)
        if not any(isinstance(m, ToolMessage) for m in messages[-1:]):
            return tool_calls(call("echo", value=users[-1]))
        return f"history={'|'.join(users)}"

    model = FunctionModel(reply, latency=0.01)
    agents = [Agent(model=model, tools=[echo], name=f"a{i}") for i in range(5)]
    for round_ in range(3):
        results = await asyncio.gather(*(agent.run(f"{agent.name}-{round_}") for agent in agents))
        for agent, result in zip(agents, results, strict=True):
            expected = "|".join(f"{agent.name}-{r}" for r in range(round_ + 1))
            assert result.content == f"history={expected}"


async def test_stream_events_come_in_order() -> None:
    model = ScriptedModel([tool_calls(call("echo", value="x")), "all done now"])
    agent = Agent(model=model, tools=[echo])
    kinds = [type(e) async for e in agent.run_stream("go")]
    assert kinds[0] is RunStarted
    assert kinds[1] is ModelRequestStarted
    tool_part = kinds.index(ToolCallStarted)
    assert kinds[tool_part - 1] is ModelResponseReceived
    assert kinds[tool_part + 1] is ToolCallCompleted
    assert TextDelta in kinds[tool_part:]
    assert kinds[-1] is RunCompleted


async def test_run_stream_response_and_early_exit() -> None:
    agent = Agent(model=ScriptedModel(["hello there", "again"]))
    stream = agent.run_stream("hi")
    with pytest.raises(UsageError, match="not completed"):
        _ = stream.response
    async with stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break  # leave early: the run is closed, the agent free again
    assert not agent.is_running
    assert agent.memory.runs[-1].status == "cancelled"
    assert (await agent.run("again")).content == "again"


def test_run_sync_and_misuse_inside_a_loop() -> None:
    agent = Agent(model=ScriptedModel(["sync works"]))
    assert agent.run_sync("hi").content == "sync works"

    async def inside() -> None:
        with pytest.raises(UsageError, match=r"await agent\.run"):
            agent.run_sync("no")

    asyncio.run(inside())


def test_an_agent_needs_a_model_and_a_tool_list() -> None:
    with pytest.raises(UsageError, match="needs a model"):
        Agent(model=42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="unknown provider"):
        Agent(model="nonsense:model")
    with pytest.raises(UsageError, match="list"):
        Agent(model=ScriptedModel([]), tools=echo)  # type: ignore[arg-type]


async def test_instructions_can_use_the_run_context_and_deps() -> None:
    async def instructions(ctx: RunContext[dict[str, str]]) -> str:
        return f"The user is {ctx.deps['user']}."

    @tool
    def whoami(ctx: RunContext[dict[str, str]]) -> str:
        return ctx.deps["user"]

    model = ScriptedModel([tool_calls("whoami"), "ok"])
    agent = Agent(model=model, tools=[whoami], instructions=instructions)
    await agent.run("who?", deps={"user": "grace"})
    sent = model.requests[1].messages
    assert sent[0] == SystemMessage(content="The user is grace.")
    assert [m.content for m in sent if isinstance(m, ToolMessage)] == ["grace"]


async def test_a_provider_error_is_raised_never_returned_as_the_answer() -> None:
    agent = Agent(model=ScriptedModel([model_error("upstream exploded")]))
    with pytest.raises(ModelError, match="upstream exploded"):
        await agent.run("hi")
    record = agent.memory.runs[-1]
    assert record.status == "failed" and "upstream exploded" in (record.error or "")
    assert user_texts(record.messages) == ["hi"]  # the input is kept


# ----------------------------------------------------------------------------- limits


@tool
async def step(i: int) -> int:
    return i


def looping_model() -> FunctionModel:
    """Calls `step` forever."""

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        n = sum(isinstance(m, ToolMessage) for m in messages)
        return tool_calls(call("step", i=n))

    return FunctionModel(reply)


@pytest.mark.parametrize(
    ("limits", "name"),
    [
        (RunLimits(max_turns=3), "max_turns"),
        (RunLimits(max_tool_calls=4), "max_tool_calls"),
        (RunLimits(max_tokens=100), "max_tokens"),
        (RunLimits(max_wall_time=0.2), "max_wall_time"),
        (RunLimits(max_cost=0.0001), "max_cost"),
    ],
)
async def test_each_limit_stops_the_run_with_a_named_error(limits: RunLimits, name: str) -> None:
    model = looping_model()
    model.price = ModelPrice(input=10.0, output=10.0)
    if name == "max_wall_time":
        model.latency = 0.05
    agent = Agent(model=model, tools=[step])
    with pytest.raises(LimitExceeded) as info:
        await agent.run("loop forever", limits=limits)
    assert info.value.limit == name
    assert f"RunLimits({name}=...)" in str(info.value)
    record = agent.memory.runs[-1]
    assert record.status == "failed"
    calls = [c.id for m in record.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in record.messages if isinstance(m, ToolMessage)]
    assert calls == results  # no dangling tool call is left in the session


async def test_wall_time_limit_interrupts_a_slow_tool() -> None:
    @tool
    async def slow() -> str:
        await asyncio.sleep(10)
        return "late"

    agent = Agent(model=ScriptedModel([tool_calls("slow")]), tools=[slow])
    begin = time.perf_counter()
    with pytest.raises(LimitExceeded, match="max_wall_time"):
        await agent.run("go", limits=RunLimits(max_wall_time=0.1))
    assert time.perf_counter() - begin < 1


async def test_default_limits_let_a_fifty_step_task_finish() -> None:
    def reply(messages: list[Message], request: ModelRequest) -> Any:
        n = sum(isinstance(m, ToolMessage) for m in messages)
        return tool_calls(call("step", i=n)) if n < 50 else "finished after 50 steps"

    agent = Agent(model=FunctionModel(reply), tools=[step])
    response = await agent.run("do fifty steps")
    assert response.content == "finished after 50 steps"
    assert response.usage.tool_calls == 50 and response.usage.requests == 51


def test_negative_limits_are_rejected() -> None:
    with pytest.raises(UsageError, match="max_turns"):
        RunLimits(max_turns=-1)


# ----------------------------------------------------------------------------- history


async def test_history_is_token_budgeted_newest_first_and_never_splits_pairs() -> None:
    @tool
    def big(i: int) -> str:
        return f"result {i} " + "x" * 6000

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        if isinstance(messages[-1], UserMessage):
            return tool_calls(call("big", i=len(messages)))
        return "noted"

    model = FunctionModel(reply)
    agent = Agent(
        model=model,
        tools=[big],
        history=HistoryPolicy(max_tokens=1900, tool_result_max_chars=4000),
    )
    for i in range(8):
        await agent.run(f"turn {i}")
    last_run_first_request = list(model.requests[-2].messages)
    replayed = last_run_first_request[:-1]
    # newest earlier runs come first, older ones are dropped
    texts = user_texts(replayed)
    assert texts and texts[-1] == "turn 6" and "turn 0" not in texts
    # pairs are intact: every tool result has its call just before it
    call_ids = {c.id for m in replayed if isinstance(m, AssistantMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in call_ids for m in replayed if isinstance(m, ToolMessage))
    assert not isinstance(replayed[0], ToolMessage)
    # older tool results are truncated more aggressively than newer ones
    lengths = [len(m.content) for m in replayed if isinstance(m, ToolMessage)]
    assert lengths == sorted(lengths) and lengths[-1] < 6000 and lengths[0] < lengths[-1]
    # and the replayed history fits the budget (estimate: bytes / 4)
    assert sum(len(json.dumps(getattr(m, "content", "") or "")) for m in replayed) / 4 < 2000
    assert 2 <= len(texts) < 7


# ----------------------------------------------------------------------------- empty replies


async def test_an_empty_reply_is_sent_back_once_then_the_answer_ends_the_run() -> None:
    model = ScriptedModel(["", "answer"])
    agent = Agent(model=model)
    async with agent.run_stream("hi") as events:
        sent = [e async for e in events if isinstance(e, AnswerSentBack)]
    response = events.response
    assert response.content == "answer" and response.stop_reason == "completed"
    assert [e.source for e in sent] == ["empty_reply"]
    again = model.requests[1].messages
    assert [type(m).__name__ for m in again] == ["UserMessage", "UserMessage"]  # no empty turn
    assert again[-1].text == sent[0].message and "empty" in sent[0].message
    assert response.usage.requests == 2  # the empty reply was charged
    plain = await Agent(model=ScriptedModel(["", "answer"])).run("hi")
    assert plain.content == "answer" and plain.usage.requests == 2


async def test_two_empty_replies_in_a_row_fail_the_run_and_both_are_charged() -> None:
    model = ScriptedModel(["   ", ""])
    agent = Agent(model=model, tools=[echo], limits=RunLimits(max_tokens=10_000))
    with pytest.raises(ModelError, match="two empty replies in a row") as caught:
        await agent.run("hi")
    assert type(caught.value).__name__ == "ModelResponseError"
    assert not caught.value.retryable
    record = agent.memory.runs[-1]
    assert record.status == "failed" and "two empty replies in a row" in (record.error or "")
    assert record.usage.requests == 2 and record.usage.output_tokens >= 2
    assert not any(  # the empty replies are charged, not kept in the conversation
        isinstance(m, AssistantMessage) and not m.tool_calls for m in record.messages
    )


async def test_empty_replies_apart_are_each_sent_back() -> None:
    model = ScriptedModel(["", tool_calls(call("echo", value="x")), "", "answer"])
    agent = Agent(model=model, tools=[echo])
    async with agent.run_stream("hi") as events:
        sent = [e async for e in events if isinstance(e, AnswerSentBack)]
    assert events.response.content == "answer"
    assert [e.source for e in sent] == ["empty_reply", "empty_reply"]
    assert events.response.usage.requests == 4


# ----------------------------------------------------------------------------- output


class Weather(BaseModel):
    city: str
    celsius: float


async def test_structured_output_is_validated_and_retried() -> None:
    model = ScriptedModel(
        [
            "It is warm in Paris.",  # not JSON: the model is asked again
            '```json\n{"city": "Paris", "celsius": 21.5}\n```',
        ]
    )
    agent = Agent(model=model, output_type=Weather)
    async with agent.run_stream("weather?") as stream:
        sources = [e.source async for e in stream if isinstance(e, AnswerSentBack)]
    response = stream.response
    assert sources == ["output_type"]
    assert response.output == Weather(city="Paris", celsius=21.5)
    schema = model.requests[0].output_schema
    assert schema is not None and schema.name == "Weather"
    assert set(schema.schema["properties"]) == {"city", "celsius"}
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage) and "does not match" in retry.text


async def test_structured_output_gives_up_after_the_retry_limit() -> None:
    agent = Agent(model=ScriptedModel(["nope", "still nope"]), output_type=Weather)
    with pytest.raises(OutputValidationError, match="Weather"):
        await agent.run("weather?", limits=RunLimits(max_output_retries=1))


async def test_non_object_output_types_are_wrapped() -> None:
    model = ScriptedModel(['{"value": [1, 2, 3]}'])
    agent = Agent(model=model, output_type=list[int])
    assert (await agent.run("numbers")).output == [1, 2, 3]
    schema = model.requests[0].output_schema
    assert schema is not None and schema.schema["required"] == ["value"]


# ----------------------------------------------------------------------------- agents as tools


async def test_agent_as_tool_runs_beside_other_tools_and_adds_its_usage() -> None:
    @tool
    async def lookup(q: str) -> str:
        await asyncio.sleep(0.1)
        return f"found {q}"

    researcher = Agent(
        model=ScriptedModel([text("sub answer 1"), text("sub answer 2")], latency=0.1),
        name="researcher",
        description="Researches a question.",
    )
    parent_model = ScriptedModel(
        [
            tool_calls(
                call("researcher", task="q1"), call("researcher", task="q2"), call("lookup", q="x")
            ),
            "combined",
        ]
    )
    parent = Agent(model=parent_model, tools=[researcher.as_tool(), lookup])
    begin = time.perf_counter()
    response = await parent.run("go")
    assert time.perf_counter() - begin < 0.3  # both sub-agents and the tool ran together
    results = sorted(
        m.content for m in parent_model.requests[1].messages if isinstance(m, ToolMessage)
    )
    assert results == ["found x", "sub answer 1", "sub answer 2"]
    assert response.usage.requests == 4  # two own model calls plus one per sub-agent
    assert researcher.memory.runs == []  # each call ran in a fresh clone
    definition = parent.functions["researcher"].definition
    assert definition.description == "Researches a question."
    assert list(definition.parameters["properties"]) == ["task"]


# ----------------------------------------------------------------------------- usage and cost


async def test_usage_and_cost_per_run_and_per_session() -> None:
    reply = AssistantMessage(content="hi", usage=Usage(input_tokens=1000, output_tokens=500))
    priced = ScriptedModel([reply, reply], price=ModelPrice(input=2.0, output=8.0))
    agent = Agent(model=priced)
    first = await agent.run("a")
    await agent.run("b")
    assert first.usage.input_tokens == 1000 and first.usage.output_tokens == 500
    assert first.usage.cost == pytest.approx(1000 * 2.0 / 1e6 + 500 * 8.0 / 1e6)
    assert agent.usage.cost == pytest.approx(2 * first.usage.cost)
    assert agent.usage.requests == 2

    unpriced = Agent(model=ScriptedModel([reply]))
    assert (await unpriced.run("a")).usage.cost is None  # unknown price: unknown cost, not 0


async def test_clone_of_a_subclass_with_its_own_constructor_is_a_plain_agent() -> None:
    class Greeter(Agent):
        def __init__(self, greeting: str) -> None:
            super().__init__(model=ScriptedModel(["hi"]), instructions=greeting, name="greeter")

    twin = Greeter("Say hi.").clone(name="twin")
    assert type(twin) is Agent  # Greeter(**config) cannot work: its constructor differs
    assert (twin.name, twin.instructions) == ("twin", "Say hi.")
    assert (await twin.run("hello")).content == "hi"


async def test_a_tool_agent_adds_only_its_own_runs_usage() -> None:
    from agentica.run.child import run_child

    worker = Agent(model=ScriptedModel(["one", "two"]))
    await worker.run("earlier")  # a conversation with history: its usage is not the call's
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage())
    response = await run_child(worker, "now", ctx)
    assert response.content == "two"
    assert ctx.usage.requests == 1
    assert ctx.usage.total_tokens == worker.memory.runs[-1].usage.total_tokens
