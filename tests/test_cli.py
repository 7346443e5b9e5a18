"""``agentica run`` as a user runs it: a subprocess against a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentica.messages import AssistantMessage, RunUsage, ToolCall, UserMessage
from agentica.storage import RunRecord, SQLiteStorage
from agentica.testing import FakeOpenAIServer, HTTPFault

ROOT = Path(__file__).resolve().parent.parent


async def agentica_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.cli.main", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def adder(body: dict[str, Any]) -> Any:
    if body["messages"][-1]["role"] == "tool":
        return f"The sum is {body['messages'][-1]['content']}."
    return AssistantMessage(
        tool_calls=[ToolCall(id="", name="add", arguments=json.dumps({"a": 2, "b": 40}))]
    )


async def test_run_streams_tool_calls_and_answer(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(adder)
    code, out, err = await agentica_cli(
        "run", "What is 2 + 40?", "--model", "fake", "--base-url", server.base_url,
        "--tool", "tests.cli_tools:add",
    )  # fmt: skip
    assert code == 0, err
    assert "→ add" in out and "✓ add" in out
    assert "The sum is 42." in out
    assert "2 model calls · 1 tool calls" in out
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["tools"][0]["function"]["name"] == "add"


async def test_a_provider_error_exits_1_with_the_typed_error(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(lambda body: HTTPFault(401, {"error": {"message": "bad key"}}))
    code, out, err = await agentica_cli(
        "run", "hi", "--model", "fake", "--base-url", server.base_url, "--api-key", "sk-secret"
    )
    assert code == 1
    assert "ModelAuthError" in err and "bad key" in err
    assert "sk-secret" not in out + err  # the key is never printed


async def test_a_bad_model_string_says_how_to_fix_it() -> None:
    env = {"AGENTICA_MODEL": "", "AGENTICA_BASE_URL": "", "MOONSHOT_API_KEY": ""}
    code, _, err = await agentica_cli("run", "hi", "--model", "nosuch:model", env=env)
    assert code == 2
    assert "unknown provider 'nosuch'" in err and "deepseek:deepseek-chat" in err
    code, _, err = await agentica_cli("run", "hi", "--model", "moonshot:kimi", env=env)
    assert code == 2 and "$MOONSHOT_API_KEY" in err


async def test_a_bad_tool_spec_is_a_usage_error() -> None:
    code, _, err = await agentica_cli(
        "run", "hi", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--tool", "nope"
    )
    assert code == 2 and "module:function" in err


async def test_sessions_resume_and_manage(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]], tmp_path: Path
) -> None:
    def echo_history(body: dict[str, Any]) -> str:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return "seen: " + " | ".join(users)

    server = await fake_openai(echo_history)
    db = str(tmp_path / "sessions.db")
    common = ("--model", "fake", "--base-url", server.base_url, "--storage", db, "--user", "ada")
    code, out, err = await agentica_cli("run", "first question", "--session", "work", *common)
    assert code == 0, err
    code, out, err = await agentica_cli("run", "second question", "--session", "work", *common)
    assert code == 0, err
    assert "seen: first question | second question" in out  # resumed from the stored session

    manage = ("--storage", db, "--user", "ada")
    code, out, _ = await agentica_cli("sessions", "list", *manage)
    assert code == 0 and "work" in out and "first question" in out
    code, out, _ = await agentica_cli("sessions", "show", "work", *manage)
    assert "second question" in out and "seen: first question" in out
    assert (await agentica_cli("sessions", "rename", "work", "Homework", *manage))[0] == 0
    assert (await agentica_cli("sessions", "fork", "work", "work-2", *manage))[0] == 0
    code, out, _ = await agentica_cli("sessions", "list", *manage)
    assert "Homework" in out and "work-2" in out
    assert (await agentica_cli("sessions", "delete", "work", *manage))[0] == 0
    code, _, err = await agentica_cli("sessions", "show", "work", *manage)
    assert code == 2 and "no session 'work'" in err
    # another user sees nothing of ada's
    code, out, _ = await agentica_cli("sessions", "list", "--storage", db, "--user", "bob")
    assert "no sessions" in out


async def test_sessions_fork_at_a_run_rewind_and_show_the_branches(tmp_path: Path) -> None:
    db = str(tmp_path / "sessions.db")
    storage = SQLiteStorage(db)
    for number, text in enumerate(("Plan a trip to Paris in May, with museums and food",
                                   "Add two days in Rome", "Book the trains"), 1):  # fmt: skip
        record = RunRecord(run_id=f"r{number}", messages=[UserMessage(content=text)],
                           usage=RunUsage(), status="completed", started_at=0.0,
                           duration=0.0)  # fmt: skip
        await storage.append_run("ada", "trip", record, state={"turn": number})
    await storage.aclose()
    manage = ("--storage", db, "--user", "ada")
    code, out, err = await agentica_cli("sessions", "fork", "trip", "trip-b", "--at", "1", *manage)
    assert code == 0, err
    assert "forked trip at run 1 into trip-b (1 runs)" in out
    code, out, err = await agentica_cli("sessions", "rewind", "trip", "--to", "2", *manage)
    assert code == 0, err
    assert "rewound trip to run 2; run 3 is kept in branch trip.3" in out
    code, out, err = await agentica_cli("sessions", "branches", "trip-b", *manage)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("trip · Plan a trip to Paris") and "2 runs" in lines[0]
    branch = next(line for line in lines if "trip-b" in line)
    assert branch.startswith("├── trip-b") and branch.endswith(
        "1 runs · parts after run 1: no run of its own yet (parent: “Add two days in Rome”) ◀"
    )
    kept = next(line for line in lines if "trip.3" in line)
    assert kept.startswith("└── trip.3")
    assert kept.endswith("3 runs · parts after run 2: “Book the trains”")
    # bad run numbers and taken ids: one line saying what to give instead
    for args, expected in (
        (("fork", "trip", "x", "--at", "7"), "at=7 is not a run of session 'trip': it has 2 runs"),
        (("rewind", "trip", "--to", "2"), "to=2 keeps all 2 runs of session 'trip'"),
        (("rewind", "trip", "--to", "-1"), "give to between 0 and 1"),
        (("rewind", "trip", "--to", "1", "--branch-id", "trip-b"), "'trip-b' already exists"),
        (("branches", "nope"), "no session 'nope' for user 'ada'"),
    ):
        code, out, err = await agentica_cli("sessions", *args, *manage)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    code, out, _ = await agentica_cli("sessions", "show", "trip", *manage)
    assert "Add two days in Rome" in out and "Book the trains" not in out


async def test_approve_asks_before_the_call_and_the_answer_is_used(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(adder)
    for answers, expected in (("y\n", "The sum is 42."), ("n\nnot now\n", "rejected this call")):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentica.cli.main", "run", "What is 2 + 40?", "--model",
            "fake", "--base-url", server.base_url, "--tool", "tests.cli_tools:add",
            "--approve", "add",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=ROOT, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(answers.encode()), 60)
        text = out.decode()
        assert process.returncode == 0, err.decode()
        assert 'approve? add({"a": 2, "b": 40})' in text
        assert expected in text
    rejected = server.requests[-1]["messages"][-1]
    assert rejected["role"] == "tool" and "not now" in rejected["content"]
