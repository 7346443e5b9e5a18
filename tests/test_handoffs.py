"""Handoffs: one agent hands the conversation to another within the same run and session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp.web  # noqa: F401  (the fake servers' import, at collection, not in a test)
import pytest

from agentica import (
    Agent,
    Claude,
    LimitExceeded,
    OpenAILike,
    RunLimits,
    RunResponse,
    UsageError,
)
from agentica.messages import (
    AssistantMessage,
    Message,
    RunUsage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentica.models import ModelRequest, RetryPolicy
from agentica.run import (
    Decision,
    Handoff,
    HandoffOccurred,
    HumanApproval,
    RunEvent,
    drop_tool_calls,
    keep_history,
    last_turns,
)
from agentica.storage import RunRecord, SQLiteStorage, load_run
from agentica.testing import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    FunctionModel,
    ScriptedModel,
    call,
    text,
    tool_calls,
)


async def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: 2 items, 42 EUR"


def _agents(
    triage_replies: list[Any], billing_replies: list[Any], **handoff: Any
) -> tuple[Agent, Agent, ScriptedModel, ScriptedModel]:
    triage_model, billing_model = ScriptedModel(triage_replies), ScriptedModel(billing_replies)
    billing = Agent(
        name="billing", model=billing_model, instructions="You are billing.",
        description="Invoices and payments.", tools=[lookup],
    )  # fmt: skip
    target: Agent | Handoff = Handoff(billing, **handoff) if handoff else billing
    triage = Agent(
        name="triage", model=triage_model, instructions="You are triage.", handoffs=[target]
    )
    return triage, billing, triage_model, billing_model


def _transfer(reason: str = "an invoice question", to: str = "billing") -> AssistantMessage:
    return tool_calls(call(f"transfer_to_{to}", reason=reason))


def _kinds(messages: list[Message]) -> list[str]:
    return [type(m).__name__.removesuffix("Message") for m in messages]


async def test_the_receiver_answers_with_its_own_instructions_tools_and_model() -> None:
    triage, _, triage_model, billing_model = _agents(
        [_transfer()], [tool_calls(call("lookup", order="7")), "Your invoice is 42 EUR."]
    )
    events: list[RunEvent] = []
    async with triage.run_stream("How much is order 7?") as stream:
        async for event in stream:
            events.append(event)
    response = stream.response

    assert response.content == "Your invoice is 42 EUR."
    assert response.usage.requests == 3  # the usage of both agents adds up
    (handoff,) = [e for e in events if isinstance(e, HandoffOccurred)]
    assert (handoff.from_agent, handoff.to_agent, handoff.reason) == (
        "triage", "billing", "an invoice question",
    )  # fmt: skip
    kinds = [e.kind for e in events]
    assert kinds.index("tool_call_completed") < kinds.index("handoff")
    assert kinds.index("handoff") < kinds.index("model_request_started", kinds.index("handoff"))
    # the triage offered the transfer tool; the receiver brings its own tools, not the sender's
    assert [t.name for t in triage_model.requests[0].tools] == ["transfer_to_billing"]
    first = billing_model.requests[0]
    assert [t.name for t in first.tools] == ["lookup"]
    assert first.messages[0] == SystemMessage(content="You are billing.")
    assert not any(m.content == "You are triage." for m in first.messages)
    # the handoff call and its result stay paired at the end of what the receiver sees
    assert _kinds(first.messages) == ["System", "User", "Assistant", "Tool"]
    called, result = first.messages[-2:]
    assert isinstance(called, AssistantMessage) and isinstance(result, ToolMessage)
    assert result.tool_call_id == called.tool_calls[0].id
    assert "Transferred to billing" in result.content


async def test_the_transfer_tool_says_when_to_hand_over() -> None:
    triage, *_ = _agents([], [], description="Questions about invoices.", tool_name="to_billing")
    (function,) = triage.functions.values()
    assert function.name == "to_billing"
    assert "Questions about invoices." in function.definition.description
    assert "reason" in function.definition.parameters["properties"]
    plain, *_ = _agents([], [])
    assert "Invoices and payments." in plain.functions["transfer_to_billing"].definition.description


async def test_the_receiver_can_hand_back_and_the_record_says_who_produced_each_turn() -> None:
    triage_model = ScriptedModel([_transfer(), "Anything else?"])
    billing_model = ScriptedModel([tool_calls(call("transfer_to_triage", reason="not billing"))])
    billing = Agent(name="billing", model=billing_model)
    triage = Agent(name="triage", model=triage_model, handoffs=[billing])
    billing.handoffs = [triage]  # the way back, once both exist

    response = await triage.run("Hello")

    assert response.content == "Anything else?"
    record = triage.memory.runs[-1]
    assert record.agent == "triage" and record.last_agent == "triage"
    assert [(h.source, h.target, h.reason) for h in record.handoffs] == [
        ("triage", "billing", "an invoice question"),
        ("billing", "triage", "not billing"),
    ]
    producers = [record.agent_of(i) for i in range(len(record.messages))]
    assert _kinds(record.messages) == [
        "User",
        "Assistant",
        "Tool",
        "Assistant",
        "Tool",
        "Assistant",
    ]
    assert producers == ["triage", "triage", "triage", "billing", "billing", "triage"]
    # triage's second turn sees its own instructions again, and the whole exchange
    assert _kinds(triage_model.requests[1].messages)[-4:] == ["Assistant", "Tool"] * 2


async def test_handoff_ping_pong_stops_at_max_handoffs() -> None:
    a_model = ScriptedModel([_transfer(to="b")] * 10)
    b_model = ScriptedModel([_transfer(to="a")] * 10)
    a, b = Agent(name="a", model=a_model), Agent(name="b", model=b_model)
    a.handoffs, b.handoffs = [b], [a]

    with pytest.raises(LimitExceeded) as caught:
        await a.run("go", limits=RunLimits(max_handoffs=3))

    assert caught.value.limit == "max_handoffs"
    assert len(a_model.requests) + len(b_model.requests) == 4  # three handoffs, then the fourth ask
    assert a.memory.runs[-1].status == "failed"
    assert len(a.memory.runs[-1].handoffs) == 3


async def test_only_the_first_handoff_of_a_turn_counts() -> None:
    refunds_model = ScriptedModel(["unused"])
    billing = Agent(name="billing", model=ScriptedModel(["billing here"]))
    refunds = Agent(name="refunds", model=refunds_model)
    both = tool_calls(call("transfer_to_billing", reason="x"), call("transfer_to_refunds"))
    triage = Agent(name="triage", model=ScriptedModel([both]), handoffs=[billing, refunds])

    response = await triage.run("?")

    assert response.content == "billing here"
    second = response.tool_calls[1]
    assert second.status == "error" and "one handoff per turn" in (second.error or "")
    assert not refunds_model.requests


# ----------------------------------------------------------------------------- input filters

HISTORY = [tool_calls(call("lookup", order="1"), content="Checking."), "Order 1 has 2 items."]


async def _filtered(input_filter: Callable[[list[Message]], list[Message]]) -> ModelRequest:
    """The first request the receiver got, after one earlier run with a tool call and a second
    run that hands over."""
    triage_model = ScriptedModel([*HISTORY, _transfer()])
    billing_model = ScriptedModel(["done"])
    billing = Agent(name="billing", model=billing_model)
    triage = Agent(
        name="triage", model=triage_model, tools=[lookup],
        handoffs=[Handoff(billing, input_filter=input_filter)],
    )  # fmt: skip
    await triage.run("What is in order 1?")
    await triage.run("And the invoice?")
    return billing_model.requests[0]


async def test_keep_history_shows_everything_but_the_senders_instructions() -> None:
    request = await _filtered(keep_history)
    assert _kinds(request.messages) == [
        "User", "Assistant", "Tool", "Assistant", "User", "Assistant", "Tool",
    ]  # fmt: skip


async def test_drop_tool_calls_keeps_what_was_said_and_the_handoff_pair() -> None:
    request = await _filtered(drop_tool_calls)
    assert _kinds(request.messages) == [
        "User",
        "Assistant",
        "Assistant",
        "User",
        "Assistant",
        "Tool",
    ]
    checking = request.messages[1]
    assert isinstance(checking, AssistantMessage)
    assert checking.content == "Checking." and not checking.tool_calls


async def test_last_turns_keeps_the_last_user_turns() -> None:
    request = await _filtered(last_turns(1))
    assert _kinds(request.messages) == ["User", "Assistant", "Tool"]
    assert request.messages[0] == UserMessage(content="And the invoice?")
    with pytest.raises(UsageError, match="at least 1"):
        last_turns(0)


async def test_a_filter_that_drops_the_input_still_leaves_it_to_the_receiver() -> None:
    request = await _filtered(lambda messages: [])
    assert _kinds(request.messages) == ["User", "Assistant", "Tool"]
    assert request.messages[0] == UserMessage(content="And the invoice?")


async def test_a_filter_that_breaks_tool_pairs_is_repaired() -> None:
    def only_calls(messages: list[Message]) -> list[Message]:
        return [m for m in messages if not isinstance(m, ToolMessage)]

    request = await _filtered(only_calls)
    lookups = [m for m in request.messages if isinstance(m, ToolMessage) and m.name == "lookup"]
    assert len(lookups) == 1 and lookups[0].is_error  # a synthetic result keeps the pair


async def test_a_filter_must_return_a_list() -> None:
    with pytest.raises(UsageError, match="input_filter must return a list"):
        await _filtered(lambda messages: None)  # type: ignore[arg-type,return-value]


async def test_handoffs_take_agents_and_names_must_be_unique() -> None:
    with pytest.raises(UsageError, match="Agent or Handoff"):
        Agent(model=ScriptedModel([]), handoffs=["billing"])  # type: ignore[list-item]
    first = Agent(name="twin", model=ScriptedModel([]))
    second = Agent(name="twin", model=ScriptedModel([]))
    helper = Agent(name="helper", model=ScriptedModel([]), handoffs=[second])
    lead = Agent(name="lead", model=ScriptedModel(["hi"]), handoffs=[first, helper])
    lead.memory.runs.append(  # a session that helper answered last
        RunRecord(run_id="r", messages=[], usage=RunUsage(), status="completed", started_at=0,
                  duration=0, agent="helper"),
    )  # fmt: skip
    with pytest.raises(UsageError, match="two different agents named 'twin'"):
        await lead.run("who answers?")


# ----------------------------------------------------------------------------- sessions


async def test_the_stored_session_records_the_agent_and_continues_with_it(tmp_path: Path) -> None:
    path = str(tmp_path / "sessions.db")

    async def talk(say: str, billing_replies: list[Any], triage_replies: list[Any]) -> str | None:
        """One run in a new process: new agent objects, the same stored session."""
        billing = Agent(name="billing", model=ScriptedModel(billing_replies))
        storage = SQLiteStorage(path)
        triage = Agent(
            name="triage", model=ScriptedModel(triage_replies), handoffs=[billing],
            storage=storage, user_id="ada", session_id="chat",
        )  # fmt: skip
        try:
            return (await triage.run(say)).content
        finally:
            await storage.aclose()

    assert await talk("Invoice?", ["42 EUR."], [_transfer()]) == "42 EUR."
    # billing, the agent active at the end of the last run, answers the next one
    assert await talk("Thanks!", ["You are welcome."], []) == "You are welcome."

    storage = SQLiteStorage(path)
    try:
        stored = await storage.load_session("ada", "chat")
    finally:
        await storage.aclose()
    assert stored is not None
    assert [(r.agent, r.last_agent) for r in stored.runs] == [
        ("triage", "billing"), ("billing", "billing"),
    ]  # fmt: skip
    assert stored.runs[0].handoffs[0].reason == "an invoice question"
    assert stored.runs[0].handoffs[0].at == 3
    assert stored.runs[0].agent_of(3) == "billing"


def test_a_record_stored_before_handoffs_loads() -> None:
    envelope = {
        "format": "agentica.run", "version": 1,
        "run": {"run_id": "old", "messages": [{"role": "user", "content": "hi"}],
                "usage": {}, "status": "completed", "started_at": 0.0, "duration": 0.0},
    }  # fmt: skip
    record = load_run(envelope)
    assert record.agent is None and record.handoffs == [] and record.agent_of(0) is None


async def test_a_session_naming_an_unknown_agent_continues_with_the_entry_agent() -> None:
    billing = Agent(name="billing", model=ScriptedModel(["42 EUR."]))
    triage = Agent(name="triage", model=ScriptedModel([_transfer(), "triage again"]))
    triage.handoffs = [billing]
    await triage.run("Invoice?")
    triage.handoffs = []  # billing is gone from the configuration
    assert (await triage.run("Hello?")).content == "triage again"


async def test_a_run_paused_by_the_receivers_approval_resumes_with_the_receiver() -> None:
    refunded: list[str] = []

    async def refund(order: str) -> str:
        """Refund an order."""
        refunded.append(order)
        return "refunded"

    billing_model = ScriptedModel([tool_calls(call("refund", order="7")), "Refunded order 7."])
    billing = Agent(
        name="billing", model=billing_model, tools=[refund],
        capabilities=[HumanApproval({"refund": True})],
    )  # fmt: skip
    triage = Agent(name="triage", model=ScriptedModel([_transfer()]), handoffs=[billing])

    paused = await triage.run("Refund order 7, please.")
    assert paused.stop_reason == "paused" and not refunded
    (pending,) = await triage.pending()
    assert pending.tool == "refund"

    response = await triage.resume({pending.call_id: Decision.approve()})

    assert response.content == "Refunded order 7."
    assert refunded == ["7"]
    assert triage.memory.runs[-1].last_agent == "billing"


# ----------------------------------------------------------------------------- providers

Serve = Callable[..., Awaitable[Any]]
FAST = RetryPolicy(max_retries=0)


def _answer(system: str, turns: int) -> AssistantMessage | str:
    """What each agent's model says: triage looks an order up, then hands over; billing answers."""
    if "billing" in system:
        return "Your invoice is 42 EUR."
    if turns == 1:
        return AssistantMessage(
            tool_calls=[ToolCall(id="", name="lookup", arguments='{"order": "7"}')]
        )
    return tool_calls(call("transfer_to_billing", reason="invoice"), content="Handing you over.")


async def _hand_over_on(
    models: list[Any], keep: Callable[[list[Message]], list[Message]]
) -> RunResponse[str]:
    """Triage (``models[0]``) looks an order up and hands over to billing (``models[1]``)."""
    billing = Agent(name="billing", model=models[1], instructions="You are billing.")
    triage = Agent(
        name="triage", model=models[0], instructions="You are triage.", tools=[lookup],
        handoffs=[Handoff(billing, input_filter=keep)],
    )  # fmt: skip
    return await triage.run("Order 7?")


@pytest.mark.parametrize("keep", [keep_history, drop_tool_calls, last_turns(1)])
async def test_the_history_after_a_handoff_is_accepted_by_openai(
    fake_openai: Serve, keep: Callable[[list[Message]], list[Message]]
) -> None:
    def respond(body: dict[str, Any]) -> AssistantMessage | str:
        messages = body["messages"]
        return _answer(messages[0]["content"], sum(m["role"] == "assistant" for m in messages) + 1)

    server: FakeOpenAIServer = await fake_openai(respond)

    models = [OpenAILike(id="fake", base_url=server.base_url, api_key="k", retry=FAST)] * 2
    try:
        response = await _hand_over_on(models, keep)
    finally:
        await models[0].aclose()
    assert response.content == "Your invoice is 42 EUR."
    last = server.requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": "You are billing."}
    assert [m["role"] for m in last[-2:]] == ["assistant", "tool"]
    assert last[-1]["tool_call_id"] == last[-2]["tool_calls"][0]["id"]


@pytest.mark.parametrize("keep", [keep_history, drop_tool_calls, last_turns(1)])
async def test_the_history_after_a_handoff_is_accepted_by_anthropic(
    fake_anthropic: Serve, keep: Callable[[list[Message]], list[Message]]
) -> None:
    def respond(body: dict[str, Any]) -> AssistantMessage | str:
        system = " ".join(b["text"] for b in body.get("system") or [])
        return _answer(system, sum(m["role"] == "assistant" for m in body["messages"]) + 1)

    server: FakeAnthropicServer = await fake_anthropic(respond)

    models = [Claude(base_url=server.base_url, api_key="k", retry=FAST, timeout=5.0)] * 2
    try:
        response = await _hand_over_on(models, keep)
    finally:
        await models[0].aclose()
    assert response.content == "Your invoice is 42 EUR."
    last = server.requests[-1]
    assert last["system"][0]["text"] == "You are billing."
    blocks = [b["type"] for m in last["messages"][-2:] for b in m["content"]]
    assert blocks[-2:] == ["tool_use", "tool_result"]
    # billing has no tools: the calls in its history are defined for the API, and forbidden
    assert last["tool_choice"] == {"type": "none"}
    assert {t["name"] for t in last["tools"]} >= {"transfer_to_billing"}


async def test_the_receivers_model_may_be_of_another_kind() -> None:
    seen: list[list[Message]] = []

    def billing_reply(messages: list[Message], request: ModelRequest) -> str:
        seen.append(messages)
        return "billing " + str(len(messages))

    billing = Agent(name="billing", model=FunctionModel(billing_reply))
    triage = Agent(
        name="triage", model=ScriptedModel([text("Hi."), _transfer()]), handoffs=[billing]
    )
    await triage.run("one")
    response = await triage.run("two")
    assert response.content == "billing 5"  # user, answer, user, the handoff call and result
    assert _kinds(seen[0]) == ["User", "Assistant", "User", "Assistant", "Tool"]
