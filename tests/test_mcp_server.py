"""agentica as an MCP server (``agent_server``, ``agentica mcp serve``), driven by the official
SDK's own client: in process, and as the real command over stdio and streamable HTTP with the
agent's model a scripted OpenAI-compatible server. Also ``agentica run --mcp`` and
``agentica mcp list`` against a real server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agentica import Agent, tool
from agentica.errors import UsageError
from agentica.mcp import agent_server
from agentica.testing import FakeOpenAIServer, ScriptedModel, call, tool_calls
from tests.test_cli import agentica_cli
from tests.test_mcp_client import SERVER, free_port

ROOT = Path(__file__).resolve().parent.parent


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def broken(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


def adder(body: dict[str, Any]) -> Any:
    """The agent's model behind ``agentica mcp serve``: adds with the tool, then answers."""
    if body["messages"][-1]["role"] == "tool":
        return f"The sum is {body['messages'][-1]['content']}."
    return tool_calls(call("add", a=2, b=40))


async def test_an_agent_and_functions_through_the_sdk_client() -> None:
    model = ScriptedModel([tool_calls(call("add", a=1, b=2)), "It is 3."])
    server = agent_server(agent=Agent(model=model, tools=[add]), tools=[add, broken])
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert list(listed) == ["run_agent", "add", "broken"]
        assert listed["add"].input_schema["required"] == ["a", "b"]
        answer = await client.call_tool("run_agent", {"prompt": "1 + 2?"},
                                        progress_callback=on_progress)  # fmt: skip
        summed = await client.call_tool("add", {"a": 2, "b": 40})
        invalid = await client.call_tool("add", {"a": "two"})
        failed = await client.call_tool("broken", {"reason": "on purpose"})
        unknown = await client.call_tool("nope", {})
        empty = await client.call_tool("run_agent", {"prompt": ""})
    assert not answer.is_error and answer.content[0].text == "It is 3."  # type: ignore[union-attr]
    assert [m for _, m in progress] == ["model call 1", "calling add", "model call 2"]
    assert summed.content[0].text == "42" and not summed.is_error  # type: ignore[union-attr]
    text = invalid.content[0].text  # type: ignore[union-attr]
    assert invalid.is_error and "Invalid arguments for tool 'add'" in text and "b" in text
    assert failed.is_error and "ValueError: on purpose" in failed.content[0].text  # type: ignore[union-attr]
    assert unknown.is_error and "offers: run_agent, add, broken" in unknown.content[0].text  # type: ignore[union-attr]
    assert empty.is_error and "non-empty 'prompt'" in empty.content[0].text  # type: ignore[union-attr]


def test_a_server_needs_something_to_offer() -> None:
    with pytest.raises(UsageError, match="an agent or some tools"):
        agent_server()
    with pytest.raises(UsageError, match="named 'run_agent'"):
        clash = add.with_options(name="run_agent")
        agent_server(agent=Agent(model=ScriptedModel([])), tools=[clash])


def serve_args(model_url: str) -> list[str]:
    return ["mcp", "serve", "--model", "fake", "--base-url", model_url,
            "--tool", "tests.cli_tools:add"]  # fmt: skip


async def test_agentica_mcp_serve_over_stdio(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    model = await fake_openai(adder)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "agentica.cli.main", *serve_args(model.base_url)],
        cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with asyncio.timeout(60), Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        answer = await client.call_tool("run_agent", {"prompt": "2 + 40?"},
                                        progress_callback=on_progress)  # fmt: skip
        summed = await client.call_tool("add", {"a": 5, "b": 6})
    assert names == ["run_agent", "add"]
    assert answer.content[0].text == "The sum is 42."  # type: ignore[union-attr]
    assert "calling add" in progress
    assert summed.content[0].text == "11"  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def serving_http(model_url: str) -> AsyncIterator[str]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.cli.main", *serve_args(model_url), "--http",
        "--port", str(port), cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        for _ in range(300):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await process.wait()


async def test_agentica_mcp_serve_over_streamable_http(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    model = await fake_openai(adder)
    async with serving_http(model.base_url) as url, asyncio.timeout(60), Client(url) as client:
        answer = await client.call_tool("run_agent", {"prompt": "2 + 40?"})
        sums = await asyncio.gather(*(client.call_tool("add", {"a": n, "b": 1}) for n in range(8)))
    assert answer.content[0].text == "The sum is 42."  # type: ignore[union-attr]
    assert [s.content[0].text for s in sums] == [str(n + 1) for n in range(8)]  # type: ignore[union-attr]


async def test_agentica_run_with_an_mcp_server(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    def napper(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return f"It said: {body['messages'][-1]['content']}"
        return tool_calls(call("nap", seconds=0.1))

    model = await fake_openai(napper)
    code, out, err = await agentica_cli(
        "run", "take a nap", "--model", "fake", "--base-url", model.base_url,
        "--mcp", f"{sys.executable} {SERVER}",
    )  # fmt: skip
    assert code == 0, err
    assert "It said: slept 0.1 s" in out
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert "nap" in offered and "read_resource" in offered
    code, out, err = await agentica_cli("mcp", "list", f"{sys.executable} {SERVER}")
    assert code == 0 and "nap: Sleep for" in out
    code, _, err = await agentica_cli(
        "run", "x", "--model", "fake", "--base-url", model.base_url, "--mcp", "no-such-command-x"
    )
    assert code == 1 and "MCPServerError" in err and "not found" in err
