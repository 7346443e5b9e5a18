"""``agentica acp`` driven end to end by the official SDK's client side, as an editor drives it:
initialize -> new session -> a prompt whose deep agent plans, edits a file through the editor
(a diff, a permission request answered) and runs a command in the editor's terminal ->
a prompt cancelled mid-command -> the session loaded again by a new process. The agent's model
is a scripted OpenAI-compatible server; the editor is a test double that keeps files on disk
and runs terminals as real processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import RequestError, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    McpServerStdio,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from agentica.acp import EditorFiles
from agentica.errors import ToolError
from agentica.testing import FakeOpenAIServer, call, tool_calls
from tests.test_mcp_client import SERVER

ROOT = Path(__file__).resolve().parent.parent
TASK = "fix the greeting in hello.py"


class Editor:
    """The editor's side: files on disk, terminals as real processes, permissions answered
    with ``answer`` (``None``: held until the turn is cancelled)."""

    def __init__(self, answer: str | None = "allow_once") -> None:
        self.answer = answer
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.output: dict[str, bytes] = {}
        self.killed: list[str] = []
        self.running = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        if self.answer is None:
            await asyncio.sleep(3600)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer)
        )

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content=await asyncio.to_thread(Path(path).read_text))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **_: Any
    ) -> WriteTextFileResponse:
        self.writes.append(path)
        await asyncio.to_thread(Path(path).write_text, content)
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        **_: Any,
    ) -> CreateTerminalResponse:
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        terminal = uuid.uuid4().hex[:8]
        self.terminals[terminal], self.output[terminal] = process, b""
        asyncio.get_running_loop().create_task(self._read(terminal, process))
        self.running.set()
        return CreateTerminalResponse(terminal_id=terminal)

    async def _read(self, terminal: str, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(4096):
            self.output[terminal] += chunk

    async def terminal_output(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> TerminalOutputResponse:
        process = self.terminals[terminal_id]
        ended = (
            TerminalExitStatus(exit_code=process.returncode)
            if process.returncode is not None
            else None
        )
        return TerminalOutputResponse(
            output=self.output[terminal_id].decode(), truncated=False, exit_status=ended
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **_: Any
    ) -> WaitForTerminalExitResponse:
        code = await self.terminals[terminal_id].wait()
        await asyncio.sleep(0.05)  # the reader drains the pipe
        return WaitForTerminalExitResponse(
            exit_code=code if code >= 0 else None, signal="SIGKILL" if code < 0 else None
        )

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        self.killed.append(terminal_id)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.terminals[terminal_id].pid, 9)

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        await self.kill_terminal(session_id, terminal_id)

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.updates if u.session_update == "agent_message_chunk"
        )


def project(tmp_path: Path) -> Path:
    """The editor's folder: a hello.py to fix."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "hello.py").write_text("print('hello')\n")
    return work


def coder(body: dict[str, Any]) -> Any:
    """The session's model: plan, edit hello.py, run it, close the plan, answer; or run a
    long command (for the cancel)."""
    messages = body["messages"]
    task = max(
        i
        for i, m in enumerate(messages)
        if m["role"] == "user"
        and m.get("content")
        and ("greeting" in str(m["content"]) or "sleep" in str(m["content"]))
    )
    step = sum(1 for m in messages[task:] if m["role"] == "assistant" and m.get("tool_calls"))
    if "sleep" in str(messages[task]["content"]):
        return tool_calls(call("execute", command="sleep 30")) if step == 0 else "slept"
    plan = [{"content": "make hello.py greet the world", "status": "in_progress"}]
    script = [
        tool_calls(call("write_todos", todos=plan)),
        tool_calls(
            call("edit_file", path="/hello.py", old_string="'hello'", new_string="'hello, world'")
        ),
        tool_calls(call("execute", command="python3 hello.py")),
        tool_calls(call("write_todos", todos=[{**plan[0], "status": "completed"}])),
    ]
    return script[step] if step < len(script) else "Done: hello.py now prints hello, world."


@contextlib.asynccontextmanager
async def agentica_acp(
    editor: Editor, model_url: str, storage: Path, *extra: str
) -> AsyncIterator[Any]:
    """``agentica acp`` as an editor starts it; the editor's connection, initialized."""
    command = [
        sys.executable,
        "-m",
        "agentica.cli.main",
        "acp",
        "--model",
        "fake",
        "--base-url",
        model_url,
        "--storage",
        str(storage),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with spawn_agent_process(
        editor, *command, env=env, cwd=str(ROOT), transport_kwargs={"stderr": None}
    ) as (conn, _process):
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
        )
        started = await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities
            ),
            60,
        )
        assert started.agent_capabilities.load_session
        yield conn


async def test_a_session_in_an_editor(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]], tmp_path: Path
) -> None:
    model = await fake_openai(coder)
    work = project(tmp_path)
    storage = tmp_path / "sessions.db"
    editor = Editor()
    async with agentica_acp(editor, model.base_url, storage) as conn:
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        assert session.modes.current_mode_id == "ask"
        done = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[text_block(TASK)]), 60
        )
        assert done.stop_reason == "end_turn"
        assert (work / "hello.py").read_text() == "print('hello, world')\n"
        assert editor.writes == [str(work / "hello.py")]  # through the editor
        _the_first_turn(editor, work)

        # a second prompt runs a long command in the editor's terminal; the editor cancels it
        editor.updates.clear()
        editor.running.clear()
        turn = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=[text_block("sleep a while")])
        )
        await asyncio.wait_for(editor.running.wait(), 30)
        await conn.cancel(session_id=session.session_id)
        stopped = await asyncio.wait_for(turn, 30)
        assert stopped.stop_reason == "cancelled"
        sleeper = next(t for t, p in editor.terminals.items() if p.returncode != 0)
        assert sleeper in editor.killed

        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="nope", prompt=[text_block("hi")])
        assert unknown.value.code == -32602

    # a new process (the editor restarted) loads the session and shows it again
    again = Editor()
    async with agentica_acp(again, model.base_url, storage) as conn:
        await conn.load_session(cwd=str(work), session_id=session.session_id, mcp_servers=[])
        assert again.kinds()[0] == "user_message_chunk"
        assert again.updates[0].content.text == TASK
        assert "Done: hello.py now prints hello, world." in again.text()
        edits = [u for u in again.updates if u.session_update == "tool_call" and u.kind == "edit"]
        assert edits and edits[0].locations[0].path == str(work / "hello.py")
        assert again.kinds()[-1] == "plan" and again.updates[-1].entries[0].status == "completed"
        with pytest.raises(RequestError) as missing:
            await conn.load_session(cwd=str(work), session_id="no-such-session", mcp_servers=[])
        assert missing.value.code == -32002


def _the_first_turn(editor: Editor, work: Path) -> None:
    """What the editor was shown of the first prompt."""
    started = {u.tool_call_id: u for u in editor.updates if u.session_update == "tool_call"}
    edit = next(u for u in started.values() if u.kind == "edit")
    assert edit.title == "Edit /hello.py" and edit.locations[0].path == str(work / "hello.py")
    diff = edit.content[0]
    assert diff.type == "diff" and diff.path == str(work / "hello.py")
    assert diff.old_text == "print('hello')\n" and diff.new_text == "print('hello, world')\n"
    run = next(u for u in started.values() if u.kind == "execute")
    assert run.title == "Run `python3 hello.py`"
    ends = {
        u.tool_call_id: u
        for u in editor.updates
        if u.session_update == "tool_call_update" and u.status in ("completed", "failed")
    }
    assert ends[edit.tool_call_id].status == "completed"
    assert ends[run.tool_call_id].status == "completed"
    assert "hello, world" in ends[run.tool_call_id].content[0].content.text
    asked = [p.tool_call_id for p in editor.permissions]
    assert asked == [edit.tool_call_id, run.tool_call_id]  # edits and commands, in ask mode
    plans = [u for u in editor.updates if u.session_update == "plan"]
    assert [p.entries[0].status for p in plans] == ["in_progress", "completed"]
    assert "Done: hello.py now prints hello, world." in editor.text()
    assert editor.kinds().index("tool_call") < editor.kinds().index("agent_message_chunk")


async def test_a_rejected_edit_is_not_made_and_auto_mode_does_not_ask(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]], tmp_path: Path
) -> None:
    model = await fake_openai(coder)
    work = project(tmp_path)
    editor = Editor(answer="reject_once")
    async with agentica_acp(editor, model.base_url, tmp_path / "s.db") as conn:
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[text_block(TASK)]), 60
        )
        assert (work / "hello.py").read_text() == "print('hello')\n" and not editor.writes
        failed = [
            u
            for u in editor.updates
            if u.session_update == "tool_call_update" and u.status == "failed"
        ]
        assert len(failed) == 2  # the edit and the command
        rejected = [m for m in model.requests[2]["messages"] if m["role"] == "tool"]
        assert "rejected this call in the editor" in rejected[-1]["content"]

        await conn.set_session_mode(session_id=session.session_id, mode_id="auto")
        editor.permissions.clear()
        await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=[text_block(TASK + " again")]), 60
        )
        assert not editor.permissions
        assert (work / "hello.py").read_text() == "print('hello, world')\n"
        with pytest.raises(RequestError):
            await conn.set_session_mode(session_id=session.session_id, mode_id="yolo")


async def test_a_cancel_while_the_editor_is_asked(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]], tmp_path: Path
) -> None:
    model = await fake_openai(coder)
    work = project(tmp_path)
    editor = Editor(answer=None)
    tools = McpServerStdio(name="test", command=sys.executable, args=[str(SERVER)], env=[])
    async with agentica_acp(editor, model.base_url, tmp_path / "s.db") as conn:
        session = await conn.new_session(cwd=str(work), mcp_servers=[tools])
        turn = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=[text_block(TASK)])
        )
        for _ in range(600):
            if editor.permissions:
                break
            await asyncio.sleep(0.05)
        await conn.cancel(session_id=session.session_id)
        assert (await asyncio.wait_for(turn, 30)).stop_reason == "cancelled"
    assert (work / "hello.py").read_text() == "print('hello')\n"
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert "nap" in offered  # the MCP server the editor named


async def test_editor_files_refuse_paths_that_leave_the_workspace(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "link").symlink_to(outside)
    (outside / "secret.txt").write_text("secret")
    editor = Editor()
    files = EditorFiles(editor, "s1", str(work))
    with pytest.raises(ToolError, match="outside"):
        await files.write("/link/new.txt", "x")
    with pytest.raises(ToolError):
        await files.read("/link/secret.txt")
    with pytest.raises(ToolError):
        await files.read("/../outside/secret.txt")
    assert not editor.writes and not editor.reads
    await files.write("/sub/ok.txt", "fine")
    assert (work / "sub" / "ok.txt").read_text() == "fine" and editor.writes
    assert await files.read("/sub/ok.txt") == "fine" and editor.reads
