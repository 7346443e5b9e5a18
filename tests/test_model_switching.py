"""Switching models: between runs (stored sessions too), by rule before each model call
(``Escalate``, ``ByTask``, ``ModelRule``), the history carried across providers over HTTP, and
which model answered each call, with its usage and cost."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp.web  # noqa: F401  (here, not on the loop: the fake servers need it)
import pytest
from rich.console import Console

from agentica import Agent, ByTask, Claude, Escalate, ModelPrice, ModelRule, OpenAILike, tool
from agentica.cli.render import EventPrinter
from agentica.cli.trace_cmd import render_trace
from agentica.errors import UsageError
from agentica.guardrails import GuardrailOutput, output_guardrail
from agentica.messages import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ToolCall,
    Usage,
    UserMessage,
)
from agentica.models import TurnFacts
from agentica.run import AnswerSentBack, ModelRequestStarted, ModelResponseReceived, RunEvent
from agentica.storage import SQLiteStorage, load_run
from agentica.testing import FakeAnthropicServer, FakeOpenAIServer, ScriptedModel, call, tool_calls
from agentica.tools import RunContext

StartOpenAI = Callable[..., Awaitable[FakeOpenAIServer]]
StartAnthropic = Callable[..., Awaitable[FakeAnthropicServer]]

PNG = (  # one red pixel
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf"
    "DwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def flaky(x: int) -> int:
    """A tool that fails."""
    raise ValueError(f"cannot handle {x}")


@output_guardrail
def needs_42(ctx: RunContext[Any], agent: Agent, text: str) -> GuardrailOutput | None:
    return None if "42" in text else GuardrailOutput.reject("the answer must be a number: 42?")


def _texts(model: ScriptedModel) -> list[list[str]]:
    """The text of each message of each request ``model`` received."""
    return [[m.content if isinstance(m.content, str) else "" for m in r.messages]
            for r in model.requests]  # fmt: skip


async def _events(agent: Agent, text: str, *, stream: bool = True) -> list[RunEvent]:
    """The events of a run of ``agent`` on ``text`` (``stream``: the model's replies streamed)."""
    run = agent.run_stream(text, stream_model=stream)
    async with run:
        return [event async for event in run]


# ----------------------------------------------------------------------------- between runs


async def test_assigning_a_model_switches_the_next_run_with_the_whole_history() -> None:
    first, second = ScriptedModel(["Hi Ada."], id="first"), ScriptedModel(["Ada."], id="second")
    agent = Agent(model=first)
    await agent.run("I am Ada.")
    agent.model = second
    response = await agent.run("Who am I?")

    assert response.content == "Ada." and response.model == "second"
    assert _texts(second)[0] == ["I am Ada.", "Hi Ada.", "Who am I?"]
    assert [r.model for r in agent.memory.runs] == ["first", "second"]
    assert [r.models for r in agent.memory.runs] == [["first"], ["second"]]
    assert set(agent.usage.by_model) == {"first", "second"}


def test_a_model_string_is_resolved_and_a_bad_model_is_refused() -> None:
    agent = Agent(model=ScriptedModel([]))
    agent.model = "ollama:qwen2.5"
    assert (agent.model.provider, agent.model.id) == ("ollama", "qwen2.5")
    with pytest.raises(UsageError, match="needs a model"):
        agent.model = 42  # type: ignore[assignment]
    with pytest.raises(UsageError, match="unknown provider"):
        agent.model = "nope:model"
    assert agent.model.id == "qwen2.5"  # unchanged by the refused assignments


async def test_a_stored_session_continues_on_another_model_in_a_new_process(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    cheap = ScriptedModel([tool_calls(call("add", a=2, b=3)), "5"], id="cheap")
    storage = SQLiteStorage(path)
    before = Agent(model=cheap, tools=[add], storage=storage, user_id="ada", session_id="s1")
    await before.run("2+3?")
    await storage.aclose()

    strong = ScriptedModel(["5, as before."], id="strong")  # a new process: a new Agent
    storage = SQLiteStorage(path)
    after = Agent(model=strong, tools=[add], storage=storage, user_id="ada", session_id="s1")
    response = await after.run("Again?")

    sent = strong.requests[0].messages
    assert [type(m).__name__ for m in sent] == [
        "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage", "UserMessage"
    ]  # fmt: skip
    assert response.content == "5, as before."
    stored = await storage.load_session("ada", "s1")
    await storage.aclose()
    assert stored is not None
    assert [(r.model, r.models) for r in stored.runs] == [
        ("cheap", ["cheap", "cheap"]), ("strong", ["strong"])
    ]  # fmt: skip
    assert stored.runs[0].usage.by_model["cheap"].requests == 2


def test_a_run_stored_before_models_were_recorded_loads() -> None:
    old = {
        "format": "agentica.run", "version": 1,
        "run": {
            "run_id": "r1", "messages": [{"role": "user", "content": "hi"}], "status": "completed",
            "started_at": 0.0, "duration": 1.0, "model": "gpt-4o",
            "usage": {"requests": 1, "input_tokens": 3, "output_tokens": 1, "cost": 0.1},
        },
    }  # fmt: skip
    record = load_run(old)
    assert record.models == [] and record.usage.by_model == {}
    assert record.usage.cost == 0.1


# ----------------------------------------------------------------------------- rules


async def test_escalate_moves_to_the_strong_model_after_repeated_failed_checks() -> None:
    cheap = ScriptedModel(["41", "40", "41 again", "43"], id="cheap")
    strong = ScriptedModel(["42", "42"], id="strong")
    agent = Agent(model=Escalate(cheap, strong, after_failures=2), guardrails=[needs_42])

    events = await _events(agent, "The answer?")
    answered = [e.model for e in events if isinstance(e, ModelResponseReceived)]
    assert answered == ["cheap", "cheap", "strong"]
    assert [e.source for e in events if isinstance(e, AnswerSentBack)] == ["output_guardrail"] * 2
    requested = [e.model for e in events if isinstance(e, ModelRequestStarted)]
    assert requested == answered
    assert agent.memory.runs[-1].models == answered
    assert agent.memory.runs[-1].model == "strong"
    # the strong model sees the whole run so far, the answers sent back included
    assert _texts(strong)[0][-2:] == ["40", "Your answer was refused: the answer must be a "
                                      "number: 42? Answer again."]  # fmt: skip

    response = await agent.run("And now?")  # a new run starts at the cheap model again
    assert response.content == "42"
    assert agent.memory.runs[-1].models == ["cheap", "cheap", "strong"]


async def test_escalate_counts_failed_tool_calls_when_asked() -> None:
    cheap = ScriptedModel([tool_calls(call("flaky", x=1))], id="cheap")
    strong = ScriptedModel(["It fails for 1."], id="strong")
    agent = Agent(model=Escalate(cheap, strong, after_failures=1, tool_errors=True),
                  tools=[flaky])  # fmt: skip
    response = await agent.run("Try flaky with 1.")
    assert response.content == "It fails for 1."
    assert agent.memory.runs[-1].models == ["cheap", "strong"]

    counted_only_checks = Agent(
        model=Escalate(ScriptedModel([tool_calls(call("flaky", x=1)), "Gave up."], id="c"),
                       ScriptedModel([], id="s"), after_failures=1),
        tools=[flaky],
    )  # fmt: skip
    assert (await counted_only_checks.run("Try.")).content == "Gave up."


def test_rules_refuse_what_cannot_work() -> None:
    with pytest.raises(UsageError, match="two models or more"):
        Escalate(ScriptedModel([]))
    with pytest.raises(UsageError, match="after_failures"):
        Escalate(ScriptedModel([]), ScriptedModel([]), after_failures=0)
    with pytest.raises(UsageError, match="default"):
        ByTask(lambda text: "x", {"chat": ScriptedModel([])}, default="code")
    with pytest.raises(UsageError, match="at least one model"):
        ModelRule()


async def test_by_task_sends_each_kind_of_input_to_its_model() -> None:
    seen: list[str] = []

    async def classify(text: str) -> str:  # an async classifier (a small model, say)
        seen.append(text)
        return "code" if re.search(r"\b(python|bug|function)\b", text, re.I) else "chat"

    chat = ScriptedModel(["Hello!", "Fine."], id="chat")
    code = ScriptedModel([tool_calls(call("add", a=1, b=1)), "def f(): return 2"], id="code")
    rule = ByTask(classify, {"code": code, "chat": chat}, default="chat")
    agent = Agent(model=rule, tools=[add])

    assert (await agent.run("Hi there")).content == "Hello!"
    assert (await agent.run("Write a python function returning 1+1")).content.startswith("def")
    assert (await agent.run("How are you?")).content == "Fine."
    assert [r.models for r in agent.memory.runs] == [["chat"], ["code", "code"], ["chat"]]
    assert seen == ["Hi there", "Write a python function returning 1+1", "How are you?"]
    assert await rule.kind_of("Hi there") == "chat" and len(seen) == 3  # remembered
    assert rule.id == "chat" and rule.default is chat  # outside a run: the default kind's


async def test_a_rule_from_a_function_sees_what_the_run_knows() -> None:
    seen: list[TurnFacts] = []

    def choose(facts: TurnFacts) -> str:
        seen.append(facts)
        return "vision" if facts.images else "text"

    text_model = ScriptedModel([tool_calls(call("flaky", x=1)), "no picture"], id="text")
    vision = ScriptedModel(["a red dot"], id="vision")
    agent = Agent(model=ModelRule(text_model, vision, choose=choose), tools=[flaky])
    await agent.run("Call flaky.")
    response = await agent.run(UserMessage(content=[TextPart(text="What is it?"),
                                                    ImagePart(url=PNG)]))  # fmt: skip

    assert response.content == "a red dot"
    assert [(f.turn, f.input, f.images, f.tool_errors, f.previous) for f in seen] == [
        (1, "Call flaky.", 0, 0, None),
        (2, "Call flaky.", 0, 1, "text"),
        (1, "What is it?", 1, 0, None),
    ]
    assert seen[1].failures == 1


async def test_a_model_assigned_during_a_run_answers_from_the_next_call() -> None:
    later = ScriptedModel(["done by the later model"], id="later")
    agent: Agent[str]

    @tool
    def hand_over() -> str:
        """Give the task to the later model."""
        agent.model = later
        return "handed over"

    agent = Agent(model=ScriptedModel([tool_calls(call("hand_over"))], id="first"),
                  tools=[hand_over])  # fmt: skip
    response = await agent.run("Go.")
    assert response.content == "done by the later model"
    assert agent.memory.runs[-1].models == ["first", "later"]


# ----------------------------------------------------------------------------- usage and cost


async def test_usage_and_cost_are_counted_per_model() -> None:
    spent = Usage(input_tokens=1_000_000, output_tokens=100_000)
    cheap = ScriptedModel([AssistantMessage(content="no", usage=spent)], id="cheap",
                          price=ModelPrice(input=0.1, output=0.4))  # fmt: skip
    strong = ScriptedModel([AssistantMessage(content="42", usage=spent)], id="strong",
                           price=ModelPrice(input=3.0, output=15.0))  # fmt: skip
    agent = Agent(model=Escalate(cheap, strong, after_failures=1), guardrails=[needs_42])
    events = await _events(agent, "The answer?", stream=False)  # (the scripted usage)

    costs = {e.model: e.cost for e in events if isinstance(e, ModelResponseReceived)}
    assert costs == {"cheap": pytest.approx(0.14), "strong": pytest.approx(4.5)}
    usage = agent.memory.runs[-1].usage
    assert usage.cost == pytest.approx(4.64)
    assert {m: (u.requests, u.input_tokens, u.cost) for m, u in usage.by_model.items()} == {
        "cheap": (1, 1_000_000, pytest.approx(0.14)),
        "strong": (1, 1_000_000, pytest.approx(4.5)),
    }
    spans = [s for _, s in agent.memory.runs[-1].trace.walk() if s.kind == "model"]  # type: ignore[union-attr]
    assert [(s.name, s.attributes["agentica.cost_usd"]) for s in spans] == [
        ("cheap", pytest.approx(0.14)), ("strong", pytest.approx(4.5))
    ]  # fmt: skip


async def test_an_unknown_price_leaves_the_other_models_cost_known() -> None:
    priced = ScriptedModel(["no"], id="priced", price=ModelPrice(input=1.0, output=1.0))
    unknown = ScriptedModel(["42"], id="unknown-model")
    agent = Agent(model=Escalate(priced, unknown, after_failures=1), guardrails=[needs_42])
    response = await agent.run("The answer?")
    assert response.usage.cost is None
    assert response.usage.by_model["priced"].cost is not None
    assert response.usage.by_model["unknown-model"].cost is None


async def test_a_subagents_models_are_in_its_callers_usage() -> None:
    helper = Agent(model=ScriptedModel(["Oslo."], id="helper-model"), name="helper")
    lead = Agent(
        model=ScriptedModel([tool_calls(call("helper", task="Capital of Norway?")), "Oslo."],
                            id="lead-model"),
        tools=[helper.as_tool()],
    )  # fmt: skip
    response = await lead.run("Capital of Norway?")
    assert {m: u.requests for m, u in response.usage.by_model.items()} == {
        "lead-model": 2, "helper-model": 1
    }  # fmt: skip
    assert response.usage.requests == sum(u.requests for u in response.usage.by_model.values())


async def test_the_event_printer_names_a_new_model() -> None:
    cheap, strong = ScriptedModel(["no", "no"], id="cheap"), ScriptedModel(["42"], id="strong")
    agent = Agent(model=Escalate(cheap, strong, after_failures=2), guardrails=[needs_42])
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=120, color_system=None))
    for event in await _events(agent, "The answer?"):
        printer(event)
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "model strong" in line] == ["⇄ model strong"]
    assert not any("model cheap" in line for line in lines)  # the first model is not news

    trace = io.StringIO()  # agentica trace: each model call's line names its model
    trace_record = agent.memory.runs[-1].trace
    assert trace_record is not None
    render_trace(trace_record, Console(file=trace, width=160, color_system=None))
    calls = [line.split("chat ")[1].split()[0] for line in trace.getvalue().splitlines()
             if "chat " in line]  # fmt: skip
    assert calls == ["cheap", "cheap", "strong"]


# ----------------------------------------------------------------------------- over HTTP


def _openai_body(server: FakeOpenAIServer, index: int) -> dict[str, Any]:
    body: dict[str, Any] = server.requests[index]
    return body


async def test_history_goes_from_openai_to_anthropic_and_back_over_http(
    fake_openai: StartOpenAI, fake_anthropic: StartAnthropic
) -> None:
    openai_replies = iter([
        AssistantMessage(  # parallel calls with ids Anthropic refuses (Kimi's), and reasoning
            reasoning="Two calls at once.",
            tool_calls=[
                ToolCall(id="functions.add:0", name="add", arguments='{"a": 2, "b": 3}'),
                ToolCall(id="functions.flaky:1", name="flaky", arguments='{"x": 7}'),
            ],
        ),
        "2+3 is 5; flaky failed.",
        "Back on OpenAI: 5 and 10.",
    ])  # fmt: skip
    anthropic_replies = iter([
        AssistantMessage(reasoning="Add again.", tool_calls=[
            ToolCall(id="", name="add", arguments='{"a": 5, "b": 5}')
        ]),
        "5+5 is 10.",
    ])  # fmt: skip
    openai = await fake_openai(lambda body: next(openai_replies))
    anthropic = await fake_anthropic(lambda body: next(anthropic_replies))
    gpt = OpenAILike(id="gpt-4o-mini", base_url=openai.base_url)
    claude = Claude(id="claude-sonnet-4-5", api_key="test", base_url=anthropic.base_url,
                    thinking_budget=1024, max_tokens=4096)  # fmt: skip

    agent = Agent(model=gpt, tools=[add, flaky])
    first = await agent.run(UserMessage(content=[TextPart(text="2+3, and flaky 7. This dot?"),
                                                 ImagePart(url=PNG)]))  # fmt: skip
    assert [c.status for c in first.tool_calls] == ["success", "error"]
    agent.model = claude
    stream = agent.run_stream("Now 5+5.")  # streamed from Claude
    async with stream:
        async for _ in stream:
            pass
    assert stream.response.content == "5+5 is 10."
    agent.model = gpt
    third = await agent.run("Both results?")
    assert third.content == "Back on OpenAI: 5 and 10."

    # Anthropic accepted the OpenAI history (the fake refuses what the real API refuses):
    # ids mapped for both sides of each pair, the error kept, the image converted, the
    # unsigned OpenAI reasoning left out, and thinking on for Claude's own tool loop
    body = anthropic.requests[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    user, assistant, results = body["messages"][:3]
    assert [b["type"] for b in user["content"]] == ["text", "image"]
    assert user["content"][1]["source"]["type"] == "base64"
    assert [b["type"] for b in assistant["content"]] == ["tool_use", "tool_use"]
    uses = [b["id"] for b in assistant["content"]]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in uses) and len(set(uses)) == 2
    assert [(b["tool_use_id"], b.get("is_error", False)) for b in results["content"]] == [
        (uses[0], False), (uses[1], True)
    ]  # fmt: skip
    assert "cannot handle 7" in results["content"][1]["content"]
    loop = anthropic.requests[1]["messages"]  # Claude's own tool loop: its signed thinking back
    assert loop[-2]["content"][0]["type"] == "thinking"
    assert anthropic.requests[1]["thinking"]["type"] == "enabled"

    # back on OpenAI: Claude's calls paired with their results (the fake checks the pairs),
    # its thinking blocks and reasoning not sent, the image as an image_url part
    sent = _openai_body(openai, 2)
    assert "thinking" not in json.dumps(sent) and "reasoning_content" not in json.dumps(sent)
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant",
                     "tool", "assistant", "user"]  # fmt: skip
    claude_call = sent["messages"][6]["tool_calls"][0]
    assert sent["messages"][7]["tool_call_id"] == claude_call["id"]
    assert sent["messages"][0]["content"][1]["type"] == "image_url"
    ids = [m.get("tool_call_id") for m in sent["messages"] if m["role"] == "tool"]
    assert ids[:2] == ["functions.add:0", "functions.flaky:1"]  # its own ids, unchanged

    assert set(agent.usage.by_model) == {"gpt-4o-mini", "claude-sonnet-4-5"}
    assert all(u.cost and u.cost > 0 for u in agent.usage.by_model.values())  # both priced
    await gpt.aclose()
    await claude.aclose()


async def test_escalating_mid_run_from_openai_to_thinking_claude_over_http(
    fake_openai: StartOpenAI, fake_anthropic: StartAnthropic
) -> None:
    openai = await fake_openai(lambda body: AssistantMessage(tool_calls=[
        ToolCall(id="call:0", name="flaky", arguments='{"x": 1}')
    ]))  # fmt: skip
    anthropic_replies = iter([  # (no thinking blocks: the requests have thinking off)
        AssistantMessage(tool_calls=[ToolCall(id="", name="add", arguments='{"a": 1, "b": 1}')]),
        "flaky fails; 1+1 is 2.",
    ])  # fmt: skip
    anthropic = await fake_anthropic(lambda body: next(anthropic_replies))
    gpt = OpenAILike(id="gpt-4o-mini", base_url=openai.base_url)
    claude = Claude(id="claude-sonnet-4-5", api_key="test", base_url=anthropic.base_url,
                    thinking_budget=1024, max_tokens=4096)  # fmt: skip
    agent = Agent(model=Escalate(gpt, claude, after_failures=1, tool_errors=True),
                  tools=[add, flaky])  # fmt: skip

    events = await _events(agent, "Use flaky on 1, else add 1+1.")
    assert [e.model for e in events if isinstance(e, ModelResponseReceived)] == [
        "gpt-4o-mini", "claude-sonnet-4-5", "claude-sonnet-4-5"
    ]  # fmt: skip
    # the first Claude call goes on with the tool loop OpenAI started: the API wants one
    # thinking setting per assistant turn, so that request has none (the fake refuses it
    # otherwise); Claude's own loop that follows is sent without it too, as one turn
    first, second = anthropic.requests
    assert "thinking" not in first and "thinking" not in second
    assert first["messages"][1]["content"][0]["id"] != "call:0"  # mapped: ':' is refused
    assert set(agent.memory.runs[-1].usage.by_model) == {"gpt-4o-mini", "claude-sonnet-4-5"}

    # the next run's tool loop is Claude's own again: thinking on
    anthropic_replies = iter(["Hello."])  # (the responder reads this name when called)
    agent.model = claude
    await agent.run("Hi.")
    assert anthropic.requests[-1]["thinking"]["type"] == "enabled"
    await gpt.aclose()
    await claude.aclose()
