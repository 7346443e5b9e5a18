"""Executors (``agentica connect``) against the real service over WebSockets on loopback: the
framework's command and file conformance suites pass through an executor; a student's work never
reaches another student's executor; a bad token or protocol is refused with the reason; an
executor that goes away fails its running command and calls instead of hanging; the real
``agentica connect`` process serves a lane's command end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentica.errors import ToolError
from agentica.testing import FakeOpenAIServer
from agentica.testing.conformance.commands import (
    COMMAND_BACKEND_CHECKS,
    CommandBackendCase,
    CommandBackendCheck,
    check_command_backend,
)
from agentica.testing.conformance.files import (
    FILE_BACKEND_CHECKS,
    FileBackendCase,
    FileBackendCheck,
)
from agentica_team.connect import ConnectRefused, Executor
from agentica_team.executors import Connection, RemoteCommands, RemoteFiles
from agentica_team.service import Team
from tests.team.server import client, serve_team, sqlite_settings
from tests.team.test_sessions import Class, ended, make_class, new_session, read_events, send

SANDBOX = shutil.which("bwrap") is not None


@contextlib.asynccontextmanager
async def connected(
    url: str, team: Team, token: str, workspace: Path, user_id: str, name: str = "test"
) -> AsyncIterator[tuple[Executor, Connection]]:
    """An executor in this process on ``workspace``, connected; its server-side connection."""
    await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
    executor = Executor(url, token, workspace, name=name, sandbox=SANDBOX,
                        on_status=lambda _: None)  # fmt: skip
    running = asyncio.create_task(executor.run())
    try:
        async with asyncio.timeout(30):
            while executor.executor_id == "" or team.executors.pick(user_id) is None:
                if running.done():
                    running.result()
                await asyncio.sleep(0.02)
        connection = team.executors.pick(user_id, executor.executor_id)
        assert connection is not None
        yield executor, connection
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[tuple[str, Team, Class]]:
    async with (
        FakeOpenAIServer(lambda body: "ok") as model,
        serve_team(sqlite_settings(tmp_path / "server")) as (url, team),
    ):
        yield url, team, await make_class(team, model.base_url)


@pytest.mark.parametrize("check", COMMAND_BACKEND_CHECKS, ids=lambda c: c.__name__)
async def test_commands_conformance_through_an_executor(
    service: tuple[str, Team, Class], check: CommandBackendCheck
) -> None:
    url, team, c = service
    stack = contextlib.AsyncExitStack()

    async def factory(workspace: Path) -> CommandBackendCase:
        _, connection = await stack.enter_async_context(
            connected(url, team, c.ann, workspace, c.ann_id)
        )
        real = await asyncio.to_thread(workspace.resolve)
        return CommandBackendCase(RemoteCommands(connection), str(real), close=stack.aclose)

    await check_command_backend(factory, [check])


@pytest.mark.parametrize("check", FILE_BACKEND_CHECKS, ids=lambda c: c.__name__)
async def test_files_conformance_through_an_executor(
    service: tuple[str, Team, Class], check: FileBackendCheck, tmp_path: Path
) -> None:
    url, team, c = service
    workspace = tmp_path / "files"
    async with connected(url, team, c.ann, workspace, c.ann_id) as (_executor, connection):

        async def put_bytes(path: str, data: bytes) -> None:
            target = workspace / path.lstrip("/")
            await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
            await asyncio.to_thread(target.write_bytes, data)

        case = FileBackendCase(
            RemoteFiles(connection),
            max_write_bytes=5_000_000,
            max_read_bytes=5_000_000,
            put_bytes=put_bytes,
        )
        try:
            await check(case)
        except Exception as exc:  # NotApplicable and friends come from the suite's module
            if type(exc).__name__ != "NotApplicable":
                raise


async def test_an_executor_serves_only_its_student(service: tuple[str, Team, Class],
                                                   tmp_path: Path) -> None:  # fmt: skip
    url, team, c = service
    async with connected(url, team, c.ann, tmp_path / "ann", c.ann_id):
        bob_id = (await team.accounts.principal_for_token(c.bob)).user_id  # type: ignore[union-attr]
        assert team.executors.pick(bob_id) is None  # Bob's work has nowhere to go
        assert [e.name for e in team.executors.of(c.ann_id)] == ["test"]
        async with client(url, c.bob) as bob, bob.get("/api/executors") as r:
            assert r.status == 200 and await r.json() == []
        async with client(url, c.ann) as ann, ann.get("/api/executors") as r:
            assert [e["name"] for e in await r.json()] == ["test"]


async def test_a_personal_tokens_connect_line_connects_a_computer(
    service: tuple[str, Team, Class], tmp_path: Path
) -> None:
    """The ``connect`` line of a personal token (``POST /api/me/tokens``), run as it is (the
    server's address put in): the computer connects as the token's account, and
    ``GET /api/executors`` lists it with the typed fields its schema names."""
    url, _team, c = service
    async with client(url, c.teacher) as teacher:
        async with teacher.post("/api/me/tokens", json={"name": "desktop"}) as r:
            assert r.status == 201, await r.text()
            line = shlex.split((await r.json())["connect"])
        assert line[:3] == ["agentica", "connect", "--server"] and line[-2:] == ["--workspace", "."]
        line[3] = url  # the settings' public address; the test server listens elsewhere
        workspace = tmp_path / "desktop"
        await asyncio.to_thread(workspace.mkdir)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentica.cli.main", *line[1:], "--name", "desktop",
            *([] if SANDBOX else ["--no-sandbox"]), cwd=workspace,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        try:
            assert process.stdout is not None
            said = ""
            while "connected to" not in said:
                said_line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
                assert said_line, f"agentica connect ended before it connected: {said}"
                said += said_line
            async with teacher.get("/api/executors") as r:
                listed = await r.json()
            async with teacher.get("/openapi.json") as r:
                schema = await r.json()
        finally:
            process.terminate()
            await process.wait()
    (executor,) = listed
    assert set(executor) == {"id", "name", "workspace", "can", "sandboxed", "connected_at"}
    assert executor["name"] == "desktop" and executor["sandboxed"] == SANDBOX
    assert executor["workspace"] == str(await asyncio.to_thread(workspace.resolve))
    assert sorted(executor["can"]) == ["commands", "files"]
    answer = schema["paths"]["/api/executors"]["get"]["responses"]["200"]["content"]
    assert answer["application/json"]["schema"]["items"] == {
        "$ref": "#/components/schemas/ExecutorOut"
    }


async def test_one_account_cannot_flood_the_server_with_executors(
    service: tuple[str, Team, Class], tmp_path: Path
) -> None:
    from agentica_team.api.executors import MAX_PER_USER

    url, team, c = service
    async with contextlib.AsyncExitStack() as stack:
        for i in range(MAX_PER_USER):
            await stack.enter_async_context(
                connected(url, team, c.ann, tmp_path / str(i), c.ann_id, f"pc{i}")
            )
        await asyncio.to_thread((tmp_path / "more").mkdir)
        extra = Executor(url, c.ann, tmp_path / "more", on_status=lambda _: None)
        with pytest.raises(ConnectRefused):
            await asyncio.wait_for(extra.run(), 30)
        assert len(team.executors.of(c.ann_id)) == MAX_PER_USER


async def test_refusals_say_why(service: tuple[str, Team, Class], tmp_path: Path) -> None:
    url, _team, _c = service
    (tmp_path / "w").mkdir()
    bad = Executor(url, "agt_not-a-token", tmp_path / "w", on_status=lambda _: None)
    with pytest.raises(ConnectRefused, match="token"):
        await asyncio.wait_for(bad.run(), 30)
    ws_url = url.replace("http://", "ws://") + "/api/executors/connect"
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {_c.ann}"}
        async with http.ws_connect(ws_url, headers=headers) as ws:
            await ws.send_str(json.dumps({"type": "hello", "version": 99, "name": "old"}))
            await ws.receive()
            assert ws.close_code == 1002
        async with http.ws_connect(ws_url, headers=headers) as ws:
            await ws.send_str("{not json")
            await ws.receive()
            assert ws.close_code == 1002


async def _connect_process(
    url: str, token: str, workspace: Path, name: str
) -> asyncio.subprocess.Process:
    """``agentica connect`` as a process of its own, once it says it is connected."""
    await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.cli.main", "connect", "--server", url, "--token", token,
        "--workspace", str(workspace), "--name", name, *([] if SANDBOX else ["--no-sandbox"]),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    said = ""
    while "connected to" not in said:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line, f"agentica connect ended before it connected: {said}"
        said += line
    return process


async def test_a_lost_executor_fails_its_work_instead_of_hanging(
    service: tuple[str, Team, Class], tmp_path: Path
) -> None:
    """kill -9 of ``agentica connect`` while a command runs: the command ends as lost, a
    file call fails with a clear error, nothing waits forever."""
    url, team, c = service
    process = await _connect_process(url, c.ann, tmp_path / "ann", "laptop")
    try:
        connection = team.executors.pick(c.ann_id)
        assert connection is not None
        command = await RemoteCommands(connection).start("sleep 60")
        files = RemoteFiles(connection)
        process.kill()  # the student's computer dies
        result = await asyncio.wait_for(command.wait(None), 30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    assert result is not None and result.exit_code == -1
    assert "disconnected" in result.output
    with pytest.raises(ToolError, match="disconnected"):
        await files.read("/x.txt")
    assert team.executors.pick(c.ann_id) is None


async def test_agentica_connect_serves_a_lane(tmp_path: Path) -> None:
    """The real command in its own process: a lane's command runs in the student's folder."""

    settings = sqlite_settings(tmp_path / "server", agent_runtime="lanes")
    async with (
        FakeOpenAIServer(
            _lane_running(
                "echo 'sorted on the laptop' > numbers.txt && cat numbers.txt",
                ends_on="ended",
                summary="sorted",
            )
        ) as model,
        serve_team(settings) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        workspace = tmp_path / "laptop"
        process = await _connect_process(url, c.ann, workspace, "laptop")
        try:
            async with client(url, c.ann) as ann:
                session_id = await new_session(ann, c.course)
                ask = await send(ann, session_id, "implement a sort")
                events = await read_events(ann, session_id, until=ended(ask["seq"]), timeout=60)
                # the session's files are where its agent works: on the laptop
                async with ann.get(f"/api/sessions/{session_id}/files") as r:
                    listed = [f["path"] for f in await r.json()]
                async with ann.get(f"/api/sessions/{session_id}/files/numbers.txt") as r:
                    shown = (await r.json())["content"]
        finally:
            process.terminate()
            await process.wait()
    outputs = [e["data"] for e in events if e["data"].get("kind") == "operation_ended"]
    assert outputs and outputs[0]["exit_code"] == 0
    assert "sorted on the laptop" in outputs[0]["output"]
    assert (workspace / "numbers.txt").read_text() == "sorted on the laptop\n"
    assert listed == ["/numbers.txt"] and shown == "sorted on the laptop\n"


def _lane_running(command: str, *, ends_on: str, summary: str) -> Callable[[dict[str, Any]], Any]:
    """The lanes' router and interrupter from ``test_lanes``, and a lane that starts
    ``command``, waits, and is done (``summary``) once a message saying ``ends_on`` comes."""
    from agentica.testing import call, tool_calls
    from tests.team.test_lanes import scripted

    def model(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        last = messages[-1]
        system = str(messages[0].get("content", ""))
        if "route a student's messages" in system or "was interrupted" in system:
            return scripted(body)
        if last["role"] == "user" and ends_on in str(last.get("content", "")):
            return tool_calls(call("lane_done", summary=summary))
        if last["role"] == "tool":
            return "waiting"
        return tool_calls(call("start_command", command=command))

    return model


def _two_computers(body: dict[str, Any]) -> Any:
    """A lane that lists the student's executors and runs its command on the desktop."""
    from agentica.testing import call, tool_calls

    messages = body["messages"]
    system = str(messages[0].get("content", ""))
    if "route a student's messages" in system:
        return json.dumps({"to": "new_lane", "lane": "", "intent": "build", "answer": ""})
    last = messages[-1]
    if last["role"] == "user" and "ended" in str(last.get("content", "")):
        return tool_calls(call("lane_done", summary="built on the desktop"))
    if last["role"] == "tool":
        listing = str(last.get("content", ""))
        if "desktop" in listing and "x_" in listing:
            desktop = next(line.split(":")[0] for line in listing.splitlines() if "desktop" in line)
            return tool_calls(call("start_command", command="echo built > out.txt",
                                   executor=desktop))  # fmt: skip
        return "waiting"
    return tool_calls(call("list_executors"))


async def test_the_agent_chooses_among_the_students_executors(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path / "server", agent_runtime="lanes")
    async with FakeOpenAIServer(_two_computers) as model, serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"
        async with (
            connected(url, team, c.ann, desktop, c.ann_id, "desktop"),
            connected(url, team, c.ann, laptop, c.ann_id, "laptop"),
            client(url, c.ann) as ann,
        ):
            session_id = await new_session(ann, c.course)
            ask = await send(ann, session_id, "build it")
            await read_events(ann, session_id, until=ended(ask["seq"]), timeout=60)
        built = await asyncio.to_thread(lambda: sorted(p.name for p in tmp_path.rglob("out.txt")))
        where = await asyncio.to_thread(lambda: [p.parent.name for p in tmp_path.rglob("out.txt")])
    assert built == ["out.txt"] and where == ["desktop"]


async def test_a_lane_hears_at_once_that_its_executor_went_away(tmp_path: Path) -> None:
    """kill -9 of ``agentica connect`` while a lane's command runs: the session's loop is told
    (an ``executor_disconnected`` event), the operation fails as disconnected, the lane goes on
    and the message ends."""
    settings = sqlite_settings(tmp_path / "server", agent_runtime="lanes")
    async with (
        FakeOpenAIServer(
            _lane_running("sleep 60", ends_on="disconnected", summary="the computer went away")
        ) as model,
        serve_team(settings) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        process = await _connect_process(url, c.ann, tmp_path / "laptop", "laptop")
        try:
            async with client(url, c.ann) as ann:
                session_id = await new_session(ann, c.course)
                ask = await send(ann, session_id, "implement a sort")
                await read_events(ann, session_id, until=_started, timeout=60)
                process.kill()
                events = await read_events(ann, session_id, until=ended(ask["seq"]), timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    told = [e["data"]["event"] for e in events
            if e["kind"] == "lane" and e["data"].get("kind") == "event"]  # fmt: skip
    assert any(t["type"] == "executor_disconnected" for t in told), told
    failed = [t for t in told if t["type"] == "operation_failed"]
    assert failed and "disconnected" in failed[0]["error"], told
    assert events[-1]["data"]["state"] == "done"


def _started(event: dict[str, Any]) -> bool:
    return bool(event["data"].get("kind") == "operation_started")
