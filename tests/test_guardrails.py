"""Guardrails at both levels: allow, reject-with-message (the run goes on), stop (typed error);
concurrency, timeouts, failures, and tool guardrails that never disturb sibling calls."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentica import Agent, GuardrailTripped, RunContext, UsageError, tool
from agentica.guardrails import (
    GuardrailOutput,
    ToolCallInfo,
    input_guardrail,
    output_guardrail,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agentica.messages import SystemMessage, ToolMessage, UserMessage
from agentica.run import AnswerSentBack
from agentica.testing import ScriptedModel, call, tool_calls


@tool
def execute(command: str) -> str:
    """Run a command."""
    return f"ran {command}"


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"secret-token-123 in {path}"


@input_guardrail
async def no_passwords(ctx: RunContext[Any], agent: Agent, text: str) -> GuardrailOutput | None:
    if "password" in text:
        return GuardrailOutput.stop("the message contains a password", info={"field": "text"})
    if "maybe" in text:
        return GuardrailOutput.reject("the user is unsure; ask a clarifying question")
    return None


@tool_input_guardrail(tools=["execute"])
def no_sudo(ctx: RunContext[Any], call: ToolCallInfo) -> GuardrailOutput | None:
    if "sudo" in call.arguments["command"]:
        return GuardrailOutput.reject("sudo is not allowed; run it without sudo")
    if "rm -rf /" in call.arguments["command"]:
        return GuardrailOutput.stop("refusing to wipe the disk")
    return GuardrailOutput.allow()


@tool_output_guardrail
async def redact(ctx: RunContext[Any], call: ToolCallInfo, result: Any) -> GuardrailOutput | None:
    if "secret-token" in str(result):
        return GuardrailOutput.reject(f"the output of {call.name} held a secret and was withheld")
    return None


def tool_results(model: ScriptedModel, index: int) -> list[ToolMessage]:
    return [m for m in model.requests[index].messages if isinstance(m, ToolMessage)]


async def test_input_guardrail_allow_reject_and_stop() -> None:
    model = ScriptedModel(["fine", "Which file do you mean?"])
    agent = Agent(model=model, guardrails=[no_passwords])
    assert (await agent.run("hello")).content == "fine"
    assert (await agent.run("maybe delete it")).content == "Which file do you mean?"
    note = model.requests[1].messages[-1]
    assert isinstance(note, SystemMessage) and "clarifying question" in note.content
    with pytest.raises(GuardrailTripped) as caught:
        await agent.run("my password is hunter2")
    assert caught.value.guardrail == "no_passwords" and caught.value.info == {"field": "text"}
    assert len(model.requests) == 2  # the model never saw the password
    assert agent.memory.runs[-1].status == "failed"


async def test_output_guardrail_sends_the_model_back_then_stops() -> None:
    @output_guardrail
    def no_shouting(ctx: RunContext[Any], agent: Agent, text: str) -> GuardrailOutput | None:
        return GuardrailOutput.reject("do not shout") if text.isupper() else None

    model = ScriptedModel(["DONE", "done"])
    async with Agent(model=model, guardrails=[no_shouting]).run_stream("go") as stream:
        sent_back = [e async for e in stream if isinstance(e, AnswerSentBack)]
    response = stream.response
    assert response.content == "done"
    assert [(e.source, e.turn) for e in sent_back] == [("output_guardrail", 1)]
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage) and "do not shout" in retry.text

    model = ScriptedModel(["NO"] * 5)
    with pytest.raises(GuardrailTripped, match="do not shout"):
        await Agent(model=model, guardrails=[no_shouting]).run("go")


async def test_tool_input_guardrail_rejects_one_call_and_spares_its_siblings() -> None:
    model = ScriptedModel([
        tool_calls(call("execute", command="sudo ls"), call("execute", command="ls"),
                   call("read", path="sudo.txt")),
        "ok",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[execute, read], guardrails=[no_sudo])
    response = await agent.run("list")
    first, second, third = response.tool_calls
    assert first.status == "error" and "without sudo" in first.content
    assert second.status == "success" and second.result == "ran ls"
    assert third.status == "success"  # the guardrail applies to execute only
    assert [m.is_error for m in tool_results(model, 1)] == [True, False, False]


async def test_tool_input_guardrail_stop_ends_the_run_after_recording_the_turn() -> None:
    model = ScriptedModel([
        tool_calls(call("execute", command="rm -rf /"), call("execute", command="ls")), "never",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[execute], guardrails=[no_sudo])
    with pytest.raises(GuardrailTripped, match="wipe the disk"):
        await agent.run("clean up")
    record = agent.memory.runs[-1]
    assert record.status == "failed"
    assert [c.status for c in record.tool_calls] == ["error", "success"]  # sibling ran and kept
    assert model.remaining == 1


async def test_tool_output_guardrail_replaces_the_result() -> None:
    model = ScriptedModel([tool_calls(call("read", path="a"), call("execute", command="ls")), "x"])
    agent = Agent(model=model, tools=[execute, read], guardrails=[redact])
    await agent.run("read a")
    results = tool_results(model, 1)
    assert "withheld" in results[0].content and "secret-token" not in results[0].content
    assert results[1].content == "ran ls"


async def test_guardrails_run_concurrently_and_a_slow_one_times_out() -> None:
    started: list[float] = []

    async def slow_check(ctx: RunContext[Any], agent: Agent, text: str) -> None:
        started.append(time.perf_counter())
        await asyncio.sleep(0.3)

    first = input_guardrail(name="first")(slow_check)
    second = input_guardrail(name="second")(slow_check)
    model = ScriptedModel(["ok"])
    begin = time.perf_counter()
    await Agent(model=model, guardrails=[first, second]).run("hi")
    assert time.perf_counter() - begin < 0.55  # both at once, not 0.6 s one after the other
    assert len(started) == 2

    hung = input_guardrail(name="hung", timeout=0.05)(slow_check)
    with pytest.raises(GuardrailTripped, match=r"did not answer within 0\.05 s"):
        await Agent(model=ScriptedModel(["never"]), guardrails=[hung]).run("hi")

    lenient = input_guardrail(name="lenient", timeout=0.05, on_error="reject")(slow_check)
    model = ScriptedModel(["went on"])
    assert (await Agent(model=model, guardrails=[lenient]).run("hi")).content == "went on"


async def test_a_guardrail_that_raises_fails_closed() -> None:
    @tool_input_guardrail
    def broken(ctx: RunContext[Any], call: ToolCallInfo) -> None:
        raise RuntimeError("bug in the check")

    model = ScriptedModel([tool_calls(call("execute", command="ls")), "x"])
    with pytest.raises(GuardrailTripped, match="raised RuntimeError: bug in the check"):
        await Agent(model=model, tools=[execute], guardrails=[broken]).run("go")


async def test_misuse_is_reported_clearly() -> None:
    with pytest.raises(UsageError, match="is not a guardrail"):
        Agent(model=ScriptedModel([]), guardrails=[lambda *a: None])  # type: ignore[list-item]

    @input_guardrail
    def wrong(ctx: RunContext[Any], agent: Agent, text: str) -> bool:
        return True

    with pytest.raises(UsageError, match="return a GuardrailOutput"):
        await Agent(model=ScriptedModel(["x"]), guardrails=[wrong]).run("hi")


async def test_clone_keeps_the_guardrails() -> None:
    agent = Agent(model=ScriptedModel([]), guardrails=[no_passwords, no_sudo, redact])
    twin = agent.clone(model=ScriptedModel(["ok"]))
    assert twin.guardrails == agent.guardrails
    with pytest.raises(GuardrailTripped):
        await twin.run("password")
