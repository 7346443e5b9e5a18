"""ApprovalMode: what a coding agent may do without asking, on a real workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentica.cli.code_cmd import APPROVAL_MODES
from agentica.deep import DeepAgent
from agentica.deep.modes import MODES, ApprovalMode
from agentica.errors import UsageError
from agentica.run.approval import Decision
from agentica.testing import ScriptedModel, call, tool_calls


def _agent(
    root: Path, mode: ApprovalMode, *replies: object
) -> tuple[DeepAgent[str], ScriptedModel]:
    model = ScriptedModel(list(replies))  # type: ignore[arg-type]
    agent: DeepAgent[str] = DeepAgent(
        model=model, workspace=root, todos=False, subagents=False, answer_check=False,
        capabilities=[mode],
    )  # fmt: skip
    return agent, model


async def test_ask_shows_a_writes_diff_and_a_rejected_write_never_happens(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("port = 8000\ndebug = True\n")
    mode = ApprovalMode("ask")
    agent, _ = _agent(
        tmp_path, mode,
        tool_calls(call("edit_file", path="app.py", old_string="port = 8000",
                        new_string="port = 9000")),
        "I left it as it was.",
    )  # fmt: skip
    response = await agent.run("Use port 9000.")
    assert response.stop_reason == "paused"
    (pending,) = response.pending
    assert pending.tool == "edit_file"
    assert "-port = 8000" in pending.description and "+port = 9000" in pending.description
    assert pending.description.startswith("--- a/app.py\n+++ b/app.py")
    response = await agent.resume({pending.call_id: Decision.reject("Keep port 8000.")})
    assert response.content == "I left it as it was."
    assert (tmp_path / "app.py").read_text() == "port = 8000\ndebug = True\n"


async def test_auto_edit_writes_freely_and_asks_before_commands(tmp_path: Path) -> None:
    mode = ApprovalMode("auto-edit")
    agent, _ = _agent(
        tmp_path, mode,
        tool_calls(call("write_file", path="a.txt", content="x\n")),
        tool_calls(call("execute", command="rm -rf build")),
        "Done.",
    )  # fmt: skip
    response = await agent.run("Write a.txt, then clean.")
    assert (tmp_path / "a.txt").read_text() == "x\n"
    (pending,) = response.pending
    assert pending.tool == "execute" and pending.description == "$ rm -rf build"
    # "always": not asked again in this session
    mode.allow_always("execute")
    assert not mode.asks("execute") and mode.asks("run_python")


async def test_full_auto_asks_nothing_and_read_only_offers_only_reading(tmp_path: Path) -> None:
    mode = ApprovalMode("full-auto")
    assert not any(mode.asks(t) for t in ("write_file", "edit_file", "execute", "task"))
    mode.set_mode("read-only")
    agent, model = _agent(tmp_path, mode, "Nothing to change.")
    await agent.run("Look around.")
    offered = {t.name for t in model.requests[0].tools}
    assert {"ls", "read_file", "glob", "grep"} <= offered
    assert not offered & {"write_file", "edit_file", "execute", "run_python"}
    with pytest.raises(UsageError, match="unknown approval mode 'yolo'"):
        mode.set_mode("yolo")


async def test_other_tools_are_asked_about_and_subagents_need_full_auto(tmp_path: Path) -> None:
    mode = ApprovalMode("auto-edit")
    assert mode.asks("an_mcp_servers_tool") and not mode.asks("grep")
    _, model = _agent(tmp_path, mode, "ok")
    agent_with_subagents: DeepAgent[str] = DeepAgent(
        model=model, workspace=tmp_path, capabilities=[mode], answer_check=False
    )
    model._script.append("ok")  # type: ignore[attr-defined]
    await agent_with_subagents.run("Look.")
    assert "task" not in {t.name for t in model.requests[-1].tools}
    mode.set_mode("full-auto")
    model._script.append("ok")  # type: ignore[attr-defined]
    await agent_with_subagents.run("Look again.")
    assert "task" in {t.name for t in model.requests[-1].tools}


async def test_an_edit_is_shown_as_the_tool_will_match_it(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\r\ny = 2\r\n")  # Windows line ends; the call has none
    mode = ApprovalMode("ask")
    agent, _ = _agent(
        tmp_path, mode,
        tool_calls(call("edit_file", path="a.py", old_string="x = 1\ny = 2",
                        new_string="x = 3\ny = 2")),
    )  # fmt: skip
    response = await agent.run("Set x to 3.")
    (pending,) = response.pending
    assert "-x = 1" in pending.description and "+x = 3" in pending.description  # the real diff


async def test_an_edit_the_tool_will_refuse_says_why(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    mode = ApprovalMode("ask")
    agent, _ = _agent(
        tmp_path, mode,
        tool_calls(call("edit_file", path="a.py", old_string="z = 9", new_string="z = 3")),
    )  # fmt: skip
    response = await agent.run("Set z to 3.")
    (pending,) = response.pending
    assert pending.description.startswith("edit_file a.py will fail: ")
    assert "replace\nz = 9\nwith\nz = 3" in pending.description


def test_the_command_line_offers_the_modes_there_are() -> None:
    assert tuple(MODES) == APPROVAL_MODES  # (named twice: parsing imports no agent stack)
