"""``agentica code``'s session across processes and mode switches: undo after ``--resume``,
``/approvals full-auto`` building the shell again with the sandbox, a failed setup leaving
nothing open, and ``-p``'s changed files being that run's own (real CLI subprocesses and the
interactive session object on a scripted OpenAI-compatible server on 127.0.0.1)."""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp.web  # noqa: F401  (imported here: the server's first start must not import it)
import pytest
from rich.console import Console

import agentica.cli.code_repl  # (the agent stack, imported before the loop runs)
import agentica.cli.code_session  # noqa: F401
from agentica.cli.code_prompt import _Session
from agentica.cli.main import _parser
from agentica.errors import UsageError
from agentica.messages import AssistantMessage
from agentica.testing import FakeOpenAIServer, call
from tests.test_cli import agentica_cli

Start = Callable[..., Awaitable[FakeOpenAIServer]]


def _writes(*names: str) -> Callable[[dict[str, Any]], Any]:
    """A model that writes the file a task names ("Create NAME."), once per task, then answers
    "done"."""

    def responder(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        task = next(i for i in reversed(range(len(messages))) if messages[i]["role"] == "user"
                    and "Create " in str(messages[i]["content"]))  # fmt: skip
        if any(m["role"] == "tool" for m in messages[task:]):
            return "done"
        name = next(n for n in names if f"Create {n}" in str(messages[task]["content"]))
        return AssistantMessage(tool_calls=[call("write_file", path=name, content=f"{name}\n")])

    return responder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTICA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AGENTICA_API_KEY", "sk-test")
    return tmp_path / "home"


def _args(server: FakeOpenAIServer, folder: Path, *extra: str) -> argparse.Namespace:
    words = ["code", str(folder), "--model", "fake", "--base-url", server.base_url,
             "--storage", str(folder.parent / "sessions.db"), *extra]  # fmt: skip
    return _parser("code").parse_args(words)


async def _print_run(server: FakeOpenAIServer, folder: Path, *extra: str) -> dict[str, Any]:
    code, out, err = await agentica_cli(
        "code", str(folder), "--model", "fake", "--base-url", server.base_url,
        "--storage", str(folder.parent / "sessions.db"), "--output", "json", *extra,
        env={"AGENTICA_API_KEY": "sk-test", "AGENTICA_HOME": os.environ["AGENTICA_HOME"]},
    )  # fmt: skip
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


async def test_undo_works_in_a_resumed_session(
    tmp_path: Path, home: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_writes("a.txt", "b.txt"))
    first = await _print_run(server, folder, "-p", "Create a.txt.")
    second = await _print_run(server, folder, "-p", "Create b.txt.", "--continue")
    assert first["changed_files"] == ["a.txt"]
    assert second["changed_files"] == ["b.txt"]  # this run's changes only
    assert second["session_id"] == first["session_id"]

    # a new process takes the session up: /undo walks back the earlier processes' turns
    output = io.StringIO()
    session = _Session(_args(server, folder, "--resume", first["session_id"]),
                       Console(file=output, width=150))  # fmt: skip
    repl = await session.load()
    try:
        await repl.command("/undo")
        assert not (folder / "b.txt").exists() and (folder / "a.txt").exists()
        await repl.command("/undo")
        assert not (folder / "a.txt").exists()
        await repl.command("/undo")
    finally:
        await repl.s.aclose()
    assert "nothing to undo" in output.getvalue().lower()


async def test_full_auto_builds_the_shell_again_with_the_sandbox(
    tmp_path: Path, home: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_writes("x.txt"))
    output = io.StringIO()
    args = _args(server, folder, "--approval", "auto-edit")
    repl = await _Session(args, Console(file=output, width=150)).load()
    first = repl.s
    await repl.task("Create x.txt.")
    assert (folder / "x.txt").exists()
    assert first.sandbox == "none"  # commands are asked about: they run as the user approves
    await repl.command("/approvals full-auto")
    try:
        assert repl.s is not first and repl.s.sandbox == "auto"
        assert repl.s.session_id == first.session_id and repl.s.mode.mode == "full-auto"
        assert len(repl.s.agent.memory.runs) == 1  # the same conversation
        await repl.command("/undo")  # the checkpoints came along
        assert not (folder / "x.txt").exists()
        await repl.command("/approvals ask")
        assert repl.s.mode.mode == "ask"
    finally:
        await repl.s.aclose()
    assert "in the bubblewrap sandbox where it works" in output.getvalue()


async def test_full_auto_keeps_an_explicit_sandbox_none(
    tmp_path: Path, home: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_writes("a.txt"))
    output = io.StringIO()
    session = _Session(_args(server, folder, "--sandbox", "none"), Console(file=output, width=150))
    repl = await session.load()
    first = repl.s
    try:
        await repl.command("/approvals full-auto")
        assert repl.s is first and repl.s.sandbox == "none"
        await repl.command("/approvals sometimes")
        assert repl.s.mode.mode == "full-auto"
    finally:
        await repl.s.aclose()
    text = output.getvalue()
    assert "without a sandbox" in text and "unknown approval mode 'sometimes'" in text


def _open_files(path: Path) -> list[str]:
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [link for link in links if link.startswith(str(path))]


async def test_a_failed_setup_leaves_no_storage_open(
    tmp_path: Path, home: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_writes("a.txt"))
    await _print_run(server, folder, "-p", "Create a.txt.")  # the storage file exists
    session = _Session(
        _args(server, folder, "--resume", "no-such-session"), Console(file=io.StringIO())
    )
    with pytest.raises(UsageError, match="no session 'no-such-session'"):
        await session.load()
    assert _open_files(tmp_path / "sessions.db") == []


async def test_compact_holds_in_a_resumed_session(
    tmp_path: Path, home: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    writes = _writes("a.txt", "b.txt")

    def responder(body: dict[str, Any]) -> Any:
        if not body.get("tools"):  # the summary /compact asks for
            return "SUMMARY: a.txt was created."
        return writes(body)

    server = await fake_openai(responder)
    args = _args(server, folder, "--approval", "auto-edit")
    repl = await _Session(args, Console(file=io.StringIO(), width=150)).load()
    try:
        await repl.task("Create a.txt.")
        await repl.command("/compact")
        await repl.task("Create b.txt.")  # (saves the session with its summary)
        session_id = repl.s.session_id
    finally:
        await repl.s.aclose()

    resumed = _args(server, folder, "--approval", "auto-edit", "--resume", session_id)
    repl = await _Session(resumed, Console(file=io.StringIO(), width=150)).load()
    try:
        assert repl.compacted_at == 1
        server.requests.clear()
        await repl.task("Create a.txt.")  # (the model answers at once: its file exists)
    finally:
        await repl.s.aclose()
    sent = json.dumps(server.requests[0]["messages"])
    assert "SUMMARY: a.txt was created." in sent
    assert "Create b.txt." in sent  # the turn after the compaction is replayed
    assert sent.count("Create a.txt.") == 1  # the compacted turn is not: only the new task
