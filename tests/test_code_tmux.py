"""The interactive ``agentica code`` driven as a person drives it: keys sent to a real terminal
(tmux), the screen read back; the model is a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp.web  # noqa: F401  (imported here: the server's first start must not import it)
import pytest

from agentica.messages import AssistantMessage
from agentica.testing import FakeOpenAIServer, call
from tests.test_cli import agentica_cli

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
ROOT = Path(__file__).resolve().parent.parent


def _responder(body: dict[str, Any]) -> Any:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return "Result: " + str(messages[-1]["content"]).splitlines()[0][:60]
    task = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    task = task if isinstance(task, str) else json.dumps(task)
    if "Create notes" in task:
        return AssistantMessage(tool_calls=[call("write_file", path="notes.txt", content="a\n")])
    if "Clean up" in task:
        return AssistantMessage(tool_calls=[call("execute", command="rm notes.txt")])
    if "Wait" in task:
        return AssistantMessage(tool_calls=[call("execute", command="sleep 37")])
    return "Noted."


class Terminal:
    """A tmux session running one command."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def tmux(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            "tmux", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return out.decode()

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", self.name, *keys)

    async def type(self, line: str) -> None:
        await self.keys("-l", line)
        await self.keys("Enter")

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", self.name)

    async def wait_for(self, text: str, after: int = 0, timeout: float = 30.0) -> str:
        """The screen once ``text`` shows for the ``after + 1``-th time."""
        for _ in range(int(timeout / 0.1)):
            screen = await self.screen()
            if screen.count(text) > after:
                return screen
            await asyncio.sleep(0.1)
        raise AssertionError(f"{text!r} never showed; the screen:\n{await self.screen()}")


async def _sleeping() -> bool:
    process = await asyncio.create_subprocess_exec(
        "pgrep", "-f", "sleep 37", stdout=asyncio.subprocess.PIPE
    )
    await process.communicate()
    return process.returncode == 0


async def test_a_session_in_the_terminal(tmp_path: Path, fake_openai: Any) -> None:
    server: FakeOpenAIServer = await fake_openai(_responder)
    folder = tmp_path / "project"
    folder.mkdir()
    env = {
        "AGENTICA_API_KEY": "sk-test", "AGENTICA_HOME": str(tmp_path / "home"), "COLUMNS": "150",
        "PYTHONPATH": str(ROOT),
    }  # fmt: skip
    command = " ".join([
        *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "agentica.cli.main",
        "code", str(folder), "--model", "fake", "--base-url", server.base_url,
        "--storage", str(tmp_path / "s.db"),
    ])  # fmt: skip
    term = Terminal(f"agentica-test-{uuid.uuid4().hex[:8]}")
    await term.tmux("new-session", "-d", "-s", term.name, "-x", "150", "-y", "50",
                    f"{command}; sleep 120")  # fmt: skip
    try:
        await term.wait_for("[ask] >")
        # a task whose write is approved
        await term.type("Create notes please")
        screen = await term.wait_for("allow? [y]es")
        assert "+++ b/notes.txt" in screen and "+a" in screen  # the write's diff
        await term.type("y")
        await term.wait_for("✓ write_file")
        await term.wait_for("[ask] >", after=1)
        assert (folder / "notes.txt").read_text() == "a\n"
        # a command denied with a reason
        await term.type("Clean up")
        screen = await term.wait_for("$ rm notes.txt")
        await term.type("n")
        await term.wait_for("why?")
        await term.type("keep them")
        await term.wait_for("rejected this call: keep them")
        assert (folder / "notes.txt").exists()
        # Ctrl-C during a long command stops it
        await term.wait_for("[ask] >", after=2)
        await term.type("Wait")
        await term.wait_for("$ sleep 37")
        await term.type("y")
        await term.wait_for("→ execute")
        for _ in range(50):
            if await _sleeping():
                break
            await asyncio.sleep(0.1)
        await term.keys("C-c")
        await term.wait_for("interrupted")
        for _ in range(50):
            if not await _sleeping():
                break
            await asyncio.sleep(0.1)
        assert not await _sleeping()
        # undo, a bad command, exit
        await term.type("/undo")
        await term.wait_for("undid turn 1")
        assert not (folder / "notes.txt").exists()
        await term.type("/approvals sometimes")
        await term.wait_for("unknown approval mode 'sometimes'")
        await term.type("/nope")
        await term.wait_for("unknown command /nope")
        await term.type("/quit")
        screen = await term.wait_for("resume: agentica code")
    finally:
        await term.tmux("kill-session", "-t", term.name)
    assert "Traceback" not in screen
    session = re.search(r"--resume (\S+)", screen)
    assert session is not None
    # the stored session goes on from the command line
    code, out, err = await agentica_cli(
        "code", str(folder), "--model", "fake", "--base-url", server.base_url,
        "--storage", str(tmp_path / "s.db"), "--resume", session.group(1), "-p", "Thanks.",
        env={"AGENTICA_API_KEY": "sk-test", "AGENTICA_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert code == 0, err
    assert out == "Noted.\n"
    assert "Create notes please" in json.dumps(server.requests[-1]["messages"])
    assert os.environ.get("AGENTICA_HOME") != str(tmp_path / "home")
