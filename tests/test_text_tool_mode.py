"""OpenAI-compatible models without native tool calling: tool_mode="text" over real HTTP."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentica import Agent, OpenAILike, tool
from agentica.run import RunResponse
from agentica.run.events import TextDelta
from agentica.testing import FakeOpenAIServer, HTTPFault

Start = Callable[..., Awaitable[FakeOpenAIServer]]


async def ask(agent: Agent, *, streaming: bool) -> tuple[RunResponse, str]:
    """The run's response to "What is 2 + 40?" and the text a streaming user saw ("" if not)."""
    if not streaming:
        return await agent.run("What is 2 + 40?"), ""
    shown = ""
    async with agent.run_stream("What is 2 + 40?") as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                shown += event.text
    return stream.response, shown


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fenced_caller(body: dict[str, Any]) -> str:
    """A model that writes its call as prose plus a fenced JSON block, then answers."""
    last = body["messages"][-1]["content"]
    if "<tool_response>" in last:
        result = last.split("<tool_response>\n")[1].split("\n</tool_response>")[0]
        return f"The sum is {result}."
    return 'Let me add them.\n```json\n{"name": "add", "arguments": {"a": 2, "b": 40}}\n```'


@pytest.mark.parametrize("streaming", [False, True])
async def test_text_tool_mode_completes_a_loop(fake_openai: Start, streaming: bool) -> None:
    server = await fake_openai(fenced_caller)
    model = OpenAILike(id="plain", base_url=server.base_url, tool_mode="text")
    try:
        response, shown = await ask(Agent(model=model, tools=[add]), streaming=streaming)
        assert '"arguments"' not in shown  # the call never reaches the screen as text
    finally:
        await model.aclose()
    assert response.content == "The sum is 42."
    assert [c.result for c in response.tool_calls] == [42]
    first, second = server.requests
    assert "tools" not in first  # nothing native is sent
    assert '"name": "add"' in first["messages"][0]["content"]  # tools offered in the system turn
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"].startswith("Let me add them.")


async def test_a_malformed_text_call_goes_back_to_the_model(fake_openai: Start) -> None:
    def replies(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        if "<tool_response>" not in last:
            return '{"name": "add", "arguments": {"a": 2, "b": }}'  # broken JSON
        if "not valid JSON" in last or "Invalid arguments" in last:
            return "I will fix it."
        return "unexpected"

    server = await fake_openai(replies)
    model = OpenAILike(id="plain", base_url=server.base_url, tool_mode="text")
    try:
        response = await Agent(model=model, tools=[add]).run("What is 2 + 40?")
    finally:
        await model.aclose()
    assert response.content == "I will fix it."  # the broken call was never the answer
    assert response.tool_calls[0].status == "error"
    shown = server.requests[1]["messages"][2]["content"]  # the call as the model wrote it
    assert shown == '{"name": "add", "arguments": {"a": 2, "b": }}'
    assert "write one JSON object" in server.requests[1]["messages"][3]["content"]


async def test_ordinary_json_answers_are_not_calls(fake_openai: Start) -> None:
    server = await fake_openai(lambda body: '{"name": "Ada", "age": 36}')
    model = OpenAILike(id="plain", base_url=server.base_url, tool_mode="text")
    try:
        response = await Agent(model=model, tools=[add]).run("Who?")
    finally:
        await model.aclose()
    assert response.content == '{"name": "Ada", "age": 36}' and not response.tool_calls


async def test_a_fenced_call_with_a_stray_brace_runs_the_tool(fake_openai: Start) -> None:
    """Measured: one "}" too many made the fenced call the final answer."""

    def replies(body: dict[str, Any]) -> str:
        if "<tool_response>" in body["messages"][-1]["content"]:
            return "The sum is 42."
        return '```json\n{"name": "add", "arguments": {"a": 2, "b": 40}}}\n```'

    server = await fake_openai(replies)
    model = OpenAILike(id="plain", base_url=server.base_url, tool_mode="text")
    try:
        response = await Agent(model=model, tools=[add]).run("What is 2 + 40?")
    finally:
        await model.aclose()
    assert [c.result for c in response.tool_calls] == [42]
    assert response.content == "The sum is 42."


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("call", "result"),
    [
        ("{name: 'add', arguments: {a: 2, b: 40}}", 42),
        ("{name: 'add', arguments: {a: 2, b: x}}", None),
    ],
    ids=["repairable", "still-broken"],
)
async def test_a_call_with_unquoted_keys_is_never_the_answer(
    fake_openai: Start, call: str, streaming: bool, result: int | None
) -> None:
    """Keys written without quotes, as in JavaScript: the call runs once its keys are quoted, or,
    when it is still not JSON, goes back to the model; it never ends the run as the answer."""

    def replies(body: dict[str, Any]) -> str:
        if "<tool_response>" in body["messages"][-1]["content"]:
            return "Done."
        return f"Let me add them.\n```json\n{call}\n```"

    server = await fake_openai(replies)
    model = OpenAILike(id="plain", base_url=server.base_url, tool_mode="text")
    try:
        response, shown = await ask(Agent(model=model, tools=[add]), streaming=streaming)
        assert "arguments" not in shown
    finally:
        await model.aclose()
    assert response.content == "Done."
    [made] = response.tool_calls
    assert made.name == "add" and made.result == result
    assert made.status == ("error" if result is None else "success")


# ----------------------------------------------------------------- tool_mode="auto"

LLAMA_CPP = HTTPFault(500, {"error": {"code": 500, "type": "server_error", "message": (
    "The model produced output that does not match the expected peg-native format"
)}})  # fmt: skip
OLLAMA = HTTPFault(500, {"error": "error parsing tool call: raw='```json {...' err=invalid"})


def strict_server(fault: HTTPFault) -> Callable[[dict[str, Any]], Any]:
    """A server whose own tool-call parser fails every native reply (as llama.cpp's does on a
    fenced call), and whose model writes fenced calls: the fallback's target."""

    def reply(body: dict[str, Any]) -> Any:
        if "tools" in body:
            return fault
        return fenced_caller(body)

    return reply


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("fault", [LLAMA_CPP, OLLAMA], ids=["llama.cpp", "ollama"])
async def test_auto_mode_falls_back_to_text_when_the_server_fails_on_its_own_parser(
    fake_openai: Start, streaming: bool, fault: HTTPFault
) -> None:
    server = await fake_openai(strict_server(fault))
    model = OpenAILike(id="qwen", base_url=server.base_url)  # tool_mode="auto" by default
    assert model.tool_mode == "auto" and not model.text_mode
    try:
        response, _ = await ask(Agent(model=model, tools=[add]), streaming=streaming)
        assert model.text_mode  # and it stays so for this model
        again, _ = await ask(Agent(model=model, tools=[add]), streaming=streaming)
    finally:
        await model.aclose()
    assert response.content == again.content == "The sum is 42."
    sent_tools = ["tools" in r for r in server.requests]
    assert sent_tools == [True, False, False, False, False]  # one failure, never retried as is


async def test_auto_mode_parses_a_call_the_model_wrote_in_its_text(fake_openai: Start) -> None:
    def fenced_natively(body: dict[str, Any]) -> str:
        """Native tools offered, but the call written in a fence (passed on as text)."""
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"The sum is {last['content']}."
        return fenced_caller(body)

    server = await fake_openai(fenced_natively)
    auto = OpenAILike(id="qwen", base_url=server.base_url)
    native = OpenAILike(id="qwen", base_url=server.base_url, tool_mode="native")
    try:
        response = await Agent(model=auto, tools=[add]).run("What is 2 + 40?")
        plain = await Agent(model=native, tools=[add]).run("What is 2 + 40?")
    finally:
        await auto.aclose()
        await native.aclose()
    assert response.content == "The sum is 42." and [c.result for c in response.tool_calls] == [42]
    assert not auto.text_mode  # the server did not fail: native calls stay on
    assert "tools" in server.requests[1]
    assert plain.tool_calls == [] and '"name": "add"' in str(plain.content)  # native: not parsed


async def test_other_server_errors_do_not_switch_modes(fake_openai: Start) -> None:
    from agentica.errors import ModelHTTPError
    from agentica.models import RetryPolicy

    server = await fake_openai(lambda body: HTTPFault(500, {"error": {"message": "out of memory"}}))
    model = OpenAILike(id="qwen", base_url=server.base_url, retry=RetryPolicy(max_retries=1))
    try:
        with pytest.raises(ModelHTTPError, match="out of memory"):
            await Agent(model=model, tools=[add]).run("What is 2 + 40?")
    finally:
        await model.aclose()
    assert not model.text_mode and len(server.requests) == 2  # retried once, natively
