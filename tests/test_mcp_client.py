"""The MCP client (``agentica.mcp.MCPServer``) against real servers: the npm reference servers
``@modelcontextprotocol/server-filesystem`` and ``server-everything`` (pinned in
``tests/mcp_peers``, installed by ``make test``) over stdio, streamable HTTP and SSE, and a
Python server on the official SDK (``tests/mcp_test_server.py``) for naps, deaths and tool lists
that change. The agent's model is scripted; everything else is real processes and sockets."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentica import Agent, RunLimits, ToolSettings
from agentica.errors import MCPServerError, ToolError
from agentica.mcp import MCPProgress, MCPServer
from agentica.messages import ToolMessage
from agentica.run.approval import HumanApproval
from agentica.run.events import ToolProgress
from agentica.testing import ScriptedModel, call, tool_calls

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "mcp_peers" / "node_modules"
FILESYSTEM = PEERS / ".bin" / "mcp-server-filesystem"
EVERYTHING = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SERVER = ROOT / "tests" / "mcp_test_server.py"

needs_peers = pytest.mark.skipif(
    not (FILESYSTEM.exists() and EVERYTHING.exists() and shutil.which("node")),
    reason="the npm MCP servers are not installed (make test runs npm ci in tests/mcp_peers)",
)


def ours(**options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [str(SERVER)], name="test", **options)


def everything(**options: Any) -> MCPServer:
    return MCPServer.stdio("node", [str(EVERYTHING), "stdio"], name="everything", **options)


def results(model: ScriptedModel, request: int) -> list[ToolMessage]:
    return [m for m in model.requests[request].messages if isinstance(m, ToolMessage)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def node_server(transport: str) -> AsyncIterator[str]:
    """server-everything over HTTP (``streamableHttp`` or ``sse``) on a free port; its URL."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        "node", str(EVERYTHING), transport, env={**os.environ, "PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.05)
        path = "/mcp" if transport == "streamableHttp" else "/sse"
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        process.terminate()
        await process.wait()


# ----------------------------------------------------------------- real peers


@needs_peers
async def test_filesystem_server_tools_in_an_agents_turn(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello from a.txt\n")
    files = MCPServer.stdio(str(FILESYSTEM), [str(tmp_path)])
    model = ScriptedModel([
        tool_calls(
            call("list_directory", path=str(tmp_path)),
            call("read_text_file", path=str(tmp_path / "a.txt")),
            call("read_text_file", path="/etc/passwd"),  # outside the allowed folder
        ),
        "done",
    ])  # fmt: skip
    async with files:
        assert files.name == "mcp-server-filesystem" and "read_text_file" in files.functions
        schema = files.functions["read_text_file"].parameters
        assert schema["properties"]["path"]["type"] == "string"
        result = await Agent(model=model, tools=[files]).run("look")
    assert result.content == "done"
    listing, text, denied = results(model, 1)
    assert "[FILE] a.txt" in listing.content and not listing.is_error
    assert text.content.startswith("hello from a.txt") and not text.is_error
    assert denied.is_error and "denied" in denied.content.lower()


@needs_peers
async def test_sixteen_calls_of_one_turn_run_at_once_with_progress() -> None:
    operation = {"duration": 1, "steps": 2}
    turn = tool_calls(*[call("trigger-long-running-operation", operation) for _ in range(16)])
    model = ScriptedModel([turn, "done"])
    agent = Agent(model=model, tools=[everything()])
    started = time.perf_counter()
    progress: list[MCPProgress] = []
    async with agent.run_stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolProgress) and isinstance(event.update, MCPProgress):
                progress.append(event.update)
    elapsed = time.perf_counter() - started
    answers = results(model, 1)
    assert len(answers) == 16 and all(not m.is_error for m in answers), answers[0].content
    assert elapsed < 8, f"16 one-second operations took {elapsed:.1f} s: not concurrent"
    assert {p.tool for p in progress} == {"trigger-long-running-operation"}
    assert len(progress) >= 16 and all(p.total == 2 for p in progress)


@needs_peers
async def test_error_results_reach_the_model_and_the_run_goes_on() -> None:
    model = ScriptedModel([
        tool_calls(call("echo", message="hi"), call("echo"), call("get-sum", a=2, b="x")), "ok",
    ])  # fmt: skip
    async with everything() as server:
        await Agent(model=model, tools=[server]).run("go")
    echoed, missing, wrong = results(model, 1)
    assert echoed.content == "Echo: hi" and not echoed.is_error
    assert missing.is_error and "'message' is a required property" in missing.content
    assert wrong.is_error and "'x' is not of type 'number'" in wrong.content


@needs_peers
@pytest.mark.parametrize("transport", ["streamableHttp", "sse"])
async def test_over_http(transport: str) -> None:
    async with node_server(transport) as url:
        connect = MCPServer.http if transport == "streamableHttp" else MCPServer.sse
        server = connect(url, headers={"X-Course": "web-2026"})
        assert server.name == "127.0.0.1"
        async with server:
            assert "echo" in server.functions
            echoed = await asyncio.gather(*(server.call_tool("echo", {"message": str(n)})
                                             for n in range(16)))  # fmt: skip
    assert echoed == [f"Echo: {n}" for n in range(16)]


@needs_peers
async def test_resources_and_prompts() -> None:
    async with everything() as server:
        first = (await server.list_resources())[0]
        model = ScriptedModel([
            tool_calls(call("list_resources"), call("read_resource", uri=first.uri)), "ok",
        ])  # fmt: skip
        await Agent(model=model, tools=[server]).run("go")
        listed, read = results(model, 1)
        assert first.uri in listed.content and not read.is_error
        assert read.content == await server.read_resource(first.uri) != ""
        prompt = await server.get_prompt("args-prompt", {"city": "Hangzhou", "state": "Zhejiang"})
        assert "Hangzhou" in prompt
        model = ScriptedModel(["ok"])
        instructions = server.prompt_instructions("args-prompt", {"city": "Xi'an"})
        agent = Agent(model=model, tools=[server], instructions=instructions)
        await agent.run("go")
    assert "Xi'an" in str(model.requests[0].messages[0].content)


@needs_peers
async def test_the_server_gets_no_provider_key_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-never-shared")
    async with everything(env={"COURSE": "web-2026"}) as server:
        env = await server.call_tool("get-env", {})
    assert "web-2026" in env and "sk-secret-never-shared" not in env and "OPENAI_API_KEY" not in env


@needs_peers
async def test_two_servers_with_the_same_tool_names(tmp_path: Path) -> None:
    first = MCPServer.stdio(str(FILESYSTEM), [str(tmp_path)], name="docs")
    second = MCPServer.stdio(str(FILESYSTEM), [str(tmp_path)], name="code")
    async with first, second:
        names = await Agent(model=ScriptedModel([]), tools=[first, second]).prepare_tools()
    assert "read_text_file" in names and "code_read_text_file" in names
    assert names["code_read_text_file"].entrypoint is not names["read_text_file"].entrypoint


# ----------------------------------------------------------------- lifecycle, failures


async def test_one_connection_is_shared_by_runs_and_agents() -> None:
    server = ours()
    model = ScriptedModel([tool_calls(call("pid")), "a", tool_calls(call("pid")), "b"])
    agent = Agent(model=model, tools=[server])
    try:
        await agent.run("one")
        await agent.clone().run("two")  # a clone: another conversation, the same group
    finally:
        await server.aclose()
    first, second = results(model, 1)[0].content, results(model, 3)[-1].content
    assert first == second  # the same server process answered both runs


def test_runs_on_new_event_loops_connect_again() -> None:
    server = ours()
    model = ScriptedModel([tool_calls(call("pid")), "a", tool_calls(call("pid")), "b"])
    agent = Agent(model=model, tools=[server])
    assert agent.run_sync("one").content == "a"
    assert agent.run_sync("two").content == "b"  # asyncio.run closed the first loop
    assert not results(model, 1)[0].is_error and not results(model, 3)[-1].is_error


async def test_a_server_killed_mid_call_fails_that_call_and_is_started_again() -> None:
    model = ScriptedModel([
        tool_calls(call("pid")), tool_calls(call("die")), tool_calls(call("pid")), "done",
    ])  # fmt: skip
    async with ours() as server:
        result = await Agent(model=model, tools=[server]).run("go")
    assert result.content == "done"
    before, (died,), after = results(model, 1)[-1], results(model, 2)[-1:], results(model, 3)[-1]
    assert died.is_error and "exited during die" in died.content
    assert not after.is_error and after.content != before.content  # a new process


async def test_a_slow_tool_times_out_and_the_connection_stays_usable() -> None:
    model = ScriptedModel([tool_calls(call("nap", seconds=30), call("pid")), "done"])
    async with ours(timeout=0.5) as server:
        started = time.perf_counter()
        await Agent(model=model, tools=[server]).run("go")
        elapsed = time.perf_counter() - started
        assert (await server.call_tool("nap", {"seconds": 0.01})) == "slept 0.01 s"
    napped, pid = results(model, 1)
    assert napped.is_error and "timed out after 0.5 s" in napped.content
    assert not pid.is_error and elapsed < 10


async def test_the_agents_tool_settings_time_calls_out_too() -> None:
    model = ScriptedModel([tool_calls(call("nap", seconds=30)), "done"])
    async with ours() as server:
        agent = Agent(model=model, tools=[server], tool_settings=ToolSettings(timeout=0.3))
        await agent.run("go")
    assert "timed out after 0.3 s" in results(model, 1)[0].content


async def test_servers_that_do_not_start_or_answer_fail_the_run_clearly(tmp_path: Path) -> None:
    missing = Agent(model=ScriptedModel(["x"]), tools=[MCPServer.stdio("no-such-mcp-server-cmd")])
    with pytest.raises(MCPServerError, match="command was not found"):
        await missing.run("go")
    exits = Agent(model=ScriptedModel(["x"]), tools=[MCPServer.stdio("false", name="quitter")])
    with pytest.raises(MCPServerError, match="'quitter' did not start: it exited"):
        await exits.run("go")
    silent = MCPServer.stdio("sleep", ["60"], connect_timeout=1)
    started = time.perf_counter()
    with pytest.raises(MCPServerError, match="did not answer within 1 s"):
        await Agent(model=ScriptedModel(["x"]), tools=[silent]).run("go")
    assert time.perf_counter() - started < 8
    with pytest.raises(MCPServerError, match="did not start"):
        async with MCPServer.http(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=5):
            pass


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_changed_tool_list_is_offered_from_the_next_turn(mode: str) -> None:
    model = ScriptedModel([tool_calls(call("grow")), tool_calls(call("late", word="hi")), "ok"])

    async with ours(mode=mode) as server:
        agent = Agent(model=model, tools=[server])
        assert "late" not in server.functions
        async with agent.run_stream("go") as stream:
            async for _event in stream:
                pass
    offered = [[t.name for t in request.tools] for request in model.requests]
    assert "late" not in offered[0]
    assert "late" in offered[1], offered[1]
    assert results(model, 2)[-1].content == "late hi"


async def test_approval_and_guardrails_apply_to_mcp_tools() -> None:
    model = ScriptedModel([tool_calls(call("fail", reason="no")), "done"])
    async with ours() as server:
        agent = Agent(model=model, tools=[server], capabilities=[HumanApproval({"fail": True})],
                      limits=RunLimits(max_turns=5))  # fmt: skip
        paused = await agent.run("go")
        assert paused.stop_reason == "paused" and paused.pending[0].tool == "fail"
        from agentica.run.approval import Decision

        done = await agent.resume({paused.pending[0].call_id: Decision.approve()})
    assert done.content == "done"
    assert "no" in results(model, 1)[-1].content and results(model, 1)[-1].is_error


async def test_call_tool_raises_tool_error_with_the_servers_message() -> None:
    async with ours() as server:
        with pytest.raises(ToolError, match="Error executing tool fail: broken"):
            await server.call_tool("fail", {"reason": "broken"})
