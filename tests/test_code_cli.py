"""``agentica code -p``: the coding agent run as a user runs it (a real subprocess, a scripted
OpenAI-compatible server on 127.0.0.1, a real folder)."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp.web  # noqa: F401  (imported here: the server's first start must not import it)
import pytest

from agentica.messages import AssistantMessage
from agentica.testing import FakeOpenAIServer, call
from tests.test_cli import agentica_cli
from tests.test_deep_shell import BWRAP, BWRAP_REASON

Start = Callable[..., Awaitable[FakeOpenAIServer]]


def _tools(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def _script(*replies: Any) -> Callable[[dict[str, Any]], Any]:
    """Reply with ``replies`` in order, one per model request (the last one again after)."""
    position = 0

    def responder(body: dict[str, Any]) -> Any:
        nonlocal position
        reply = replies[min(position, len(replies) - 1)]
        position += 1
        return reply

    return responder


def _calls(*calls: Any) -> AssistantMessage:
    return AssistantMessage(tool_calls=list(calls))


async def _code(
    server: FakeOpenAIServer, folder: Path, *args: str, **env: str
) -> tuple[int, str, str]:
    return await agentica_cli(
        "code", str(folder), "--model", "fake", "--base-url", server.base_url,
        "--storage", str(folder.parent / "sessions.db"), *args,
        env={"AGENTICA_API_KEY": "sk-test", **env},
    )  # fmt: skip


async def test_a_task_writes_a_file_and_only_the_answer_goes_to_stdout(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "AGENTS.md").write_text("Always answer in one sentence.\n")
    server = await fake_openai(_script(
        _calls(call("write_file", path="hello.txt", content="hello\n")),
        "I wrote hello.txt.",
    ))  # fmt: skip
    code, out, err = await _code(server, folder, "-p", "Create hello.txt saying hello.")
    assert code == 0, err
    assert out == "I wrote hello.txt.\n"
    assert (folder / "hello.txt").read_text() == "hello\n"
    assert "write_file" in err and "changed: hello.txt" in err
    assert "resume: agentica code" in err and "--resume" in err
    system = server.requests[0]["messages"][0]["content"]
    assert "Always answer in one sentence." in system  # AGENTS.md is in the instructions


async def test_json_output_and_commands_refused_in_auto_edit(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_script(
        _calls(call("execute", command="touch ran.txt")),
        "I could not run it.",
    ))  # fmt: skip
    code, out, err = await _code(server, folder, "-p", "Run touch ran.txt", "--output", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["type"] == "result" and data["result"] == "I could not run it."
    assert data["exit_code"] == 0 and data["changed_files"] == [] and data["session_id"]
    assert not (folder / "ran.txt").exists()  # a refused command never runs
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "non-interactive run in auto-edit" in str(
        tool_message["content"]
    )


async def test_full_auto_runs_commands_without_the_parents_secrets(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_script(
        _calls(call("execute", command="env > env.txt; pwd")),
        "Done.",
    ))  # fmt: skip
    code, out, err = await _code(
        server, folder, "-p", "Save the environment.", "--approval", "full-auto",
        "--sandbox", "none", "--output", "stream-json", OPENAI_API_KEY="sk-parent-secret",
    )  # fmt: skip
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == "Done."
    kinds = [line["type"] for line in lines]
    assert "tool_call_started" in kinds and "tool_call_completed" in kinds
    assert "sk-parent-secret" not in (folder / "env.txt").read_text()
    assert "sk-parent-secret" not in out + err + json.dumps(server.requests)


async def test_read_only_offers_no_tool_that_writes_or_runs(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_script("The folder is empty."))
    code, _, err = await _code(server, folder, "-p", "What is here?", "--approval", "read-only")
    assert code == 0, err
    offered = _tools(server.requests[0])
    assert "read_file" in offered and "ls" in offered
    assert not {"write_file", "edit_file", "execute", "run_python", "task"} & set(offered)


async def test_a_limit_exits_3_and_a_bad_folder_exits_2(tmp_path: Path, fake_openai: Start) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_script(_calls(call("ls", path="/"))))  # never answers
    code, _, err = await _code(server, folder, "-p", "Loop.", "--max-turns", "2")
    assert code == 3, err
    assert "LimitExceeded" in err
    code, _, err = await _code(server, tmp_path / "missing", "-p", "Hi.")
    assert code == 2 and "is not a folder" in err


async def test_continue_takes_up_the_latest_session_of_the_folder(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_script("Noted: the port is 8080.", "It is 8080."))
    code, out, err = await _code(server, folder, "-p", "Remember: the port is 8080.")
    assert code == 0, err
    code, out, err = await _code(server, folder, "-p", "Which port?", "--continue")
    assert code == 0, err
    assert out == "It is 8080.\n"
    texts = json.dumps(server.requests[1]["messages"])
    assert "Remember: the port is 8080." in texts  # the earlier turn is in the history
    other = tmp_path / "other"
    other.mkdir()
    code, _, err = await _code(server, other, "-p", "Which port?", "--continue")
    assert code == 2 and "no earlier session in this folder" in err


async def test_nothing_outside_the_folder_is_written(tmp_path: Path, fake_openai: Start) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    server = await fake_openai(_script(
        _calls(call("write_file", path="../outside.txt", content="x"),
               call("write_file", path="/etc/agentica-test.txt", content="x")),
        "Tried.",
    ))  # fmt: skip
    code, _, err = await _code(server, folder, "-p", "Write outside.")
    assert code == 0, err
    assert not (tmp_path / "outside.txt").exists()
    assert not Path("/etc/agentica-test.txt").exists()  # noqa: ASYNC240


async def test_the_projects_mcp_servers_start_only_once_trusted(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    (folder / ".agentica").mkdir(parents=True)
    server_script = Path(__file__).parent / "mcp_test_server.py"
    (folder / ".agentica" / "config.toml").write_text(
        f'[mcp.servers.helper]\ncommand = ["{sys.executable}", "{server_script}", "stdio"]\n'
    )
    server = await fake_openai(_script("Hello."))
    home = {"AGENTICA_HOME": str(tmp_path / "home")}
    code, _, err = await _code(server, folder, "-p", "Hi.", **home)
    assert code == 0, err
    assert "MCP server 'helper'" in err and "not trusted yet" in err
    assert "pid" not in _tools(server.requests[-1])
    code, _, err = await _code(server, folder, "-p", "Hi.", "--trust-mcp", **home)
    assert code == 0, err
    assert "pid" in _tools(server.requests[-1])  # the server's tools are offered
    code, _, err = await _code(server, folder, "-p", "Hi.", **home)  # trusted from now on
    assert code == 0 and "not trusted" not in err
    assert "pid" in _tools(server.requests[-1])
    # a changed command is a new server: asked again
    (folder / ".agentica" / "config.toml").write_text(
        f'[mcp.servers.helper]\ncommand = ["{sys.executable}", "{server_script}", "stdio", "x"]\n'
    )
    code, _, err = await _code(server, folder, "-p", "Hi.", **home)
    assert "not trusted yet" in err


async def test_a_folders_config_cannot_turn_the_questions_off_or_take_the_key(
    tmp_path: Path, fake_openai: Start
) -> None:
    folder = tmp_path / "project"
    (folder / ".agentica").mkdir(parents=True)
    (folder / ".agentica" / "config.toml").write_text(
        '[agent]\napproval = "full-auto"\nsandbox = "none"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'  # where the key would go
    )
    server = await fake_openai(_script(
        _calls(call("execute", command="touch ran.txt")), "Could not.",
    ))  # fmt: skip
    home = {"AGENTICA_HOME": str(tmp_path / "home")}
    code, _, err = await _code(server, folder, "-p", "Run it.", **home)
    assert code == 0, err
    assert "base_url of .agentica/config.toml is not used" in err
    assert not (folder / "ran.txt").exists()  # still auto-edit: the command was refused


async def test_full_auto_commands_run_in_the_sandbox_by_default(
    tmp_path: Path, fake_openai: Start
) -> None:
    if not BWRAP:
        pytest.skip(BWRAP_REASON)
    folder = tmp_path / "project"
    folder.mkdir()
    outside = tmp_path / "outside.txt"
    results: list[str] = []
    port = 0

    def script(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            results.append(str(body["messages"][-1]["content"]))
            return "Done."
        return _calls(call("execute", command=(
            f"echo in > inside.txt; echo out > {outside}; python3 -c \"import socket; "
            f"socket.create_connection(('127.0.0.1', {port}), timeout=2)\" 2>&1 | tail -1"
        )))  # fmt: skip

    server = await fake_openai(script)
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])  # the model's own server
    code, _, err = await _code(server, folder, "-p", "Write the files.", "--approval", "full-auto")
    assert code == 0, err
    assert (folder / "inside.txt").read_text() == "in\n"  # the folder is writable
    assert not outside.exists()  # nothing outside it is
    assert "OSError" in results[0] or "Error" in results[0], results  # and no network
