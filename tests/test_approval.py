"""Human approval: a run pauses before chosen calls; approve, edit or reject each; resume the same
run, also from a new process (the paused run is saved with the session)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentica import Agent, RunContext, UsageError, tool
from agentica.messages import ToolMessage
from agentica.run.approval import Decision, HumanApproval
from agentica.testing import ScriptedModel, call, tool_calls


@tool
def edit_file(path: str, text: str) -> str:
    """Edit a file."""
    return f"edited {path} with {text!r}"


@tool
def execute(command: str) -> str:
    """Run a command."""
    return f"ran {command}"


@tool
def ls() -> str:
    """List files."""
    return "a.py b.py"


def results(model: ScriptedModel, index: int) -> dict[str, ToolMessage]:
    return {m.name or "": m for m in model.requests[index].messages if isinstance(m, ToolMessage)}


def dangerous(ctx: RunContext[Any], c: Any) -> bool:
    return "rm" in c.call.arguments


APPROVAL = HumanApproval({
    "edit_file": True,
    "execute": {"decisions": ["approve", "reject"], "when": dangerous, "description": "shell"},
})  # fmt: skip


async def test_pause_then_approve_edit_and_reject() -> None:
    model = ScriptedModel([
        tool_calls(call("edit_file", path="a.py", text="x"), call("execute", command="rm -r b"),
                   call("ls")),
        "All done.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[edit_file, execute, ls], capabilities=[APPROVAL])
    paused = await agent.run("tidy up")
    assert paused.stop_reason == "paused" and paused.content is None
    assert [(p.tool, p.arguments) for p in paused.pending] == [
        ("edit_file", {"path": "a.py", "text": "x"}), ("execute", {"command": "rm -r b"}),
    ]  # fmt: skip
    assert paused.pending[1].decisions == ("approve", "reject")
    assert paused.pending[1].description == "shell"
    assert all(c.status == "pending" for c in paused.tool_calls)  # nothing ran, not even ls
    assert agent.memory.runs[-1].status == "paused"
    assert await agent.pending() == paused.pending

    edit_id, exec_id = (p.call_id for p in paused.pending)
    done = await agent.resume({
        edit_id: Decision.edit({"path": "a.py", "text": "y"}),
        exec_id: Decision.reject("never delete b"),
    })  # fmt: skip
    assert done.stop_reason == "completed" and done.content == "All done."
    assert done.run_id == paused.run_id
    seen = results(model, 1)
    assert seen["edit_file"].content == "edited a.py with 'y'"  # the edited arguments ran
    assert "rejected this call: never delete b" in seen["execute"].content
    assert seen["execute"].is_error and seen["ls"].content == "a.py b.py"
    assert await agent.pending() == []


async def test_calls_that_need_no_approval_run_without_pausing() -> None:
    model = ScriptedModel([tool_calls(call("execute", command="ls -l")), "ok"])
    agent = Agent(model=model, tools=[execute], capabilities=[APPROVAL])
    response = await agent.run("list")
    assert response.stop_reason == "completed" and response.tool_calls[0].result == "ran ls -l"


async def test_resume_checks_the_decisions() -> None:
    model = ScriptedModel([tool_calls(call("execute", command="rm x")), "ok"])
    agent = Agent(model=model, tools=[execute], capabilities=[APPROVAL])
    with pytest.raises(UsageError, match="no paused run"):
        await agent.resume({})
    paused = await agent.run("go")
    call_id = paused.pending[0].call_id
    with pytest.raises(UsageError, match="no decision for the pending calls"):
        await agent.resume({})
    with pytest.raises(UsageError, match="not pending"):
        await agent.resume({call_id: Decision.approve(), "other": Decision.approve()})
    with pytest.raises(UsageError, match=r"must be one of \['approve', 'reject'\]"):
        await agent.resume({call_id: Decision.edit({"command": "ls"})})
    assert (await agent.resume({call_id: Decision.approve()})).content == "ok"


async def test_a_new_run_instead_of_resume_repairs_the_pending_calls() -> None:
    model = ScriptedModel([tool_calls(call("edit_file", path="a", text="b")), "Fine."])
    agent = Agent(model=model, tools=[edit_file], capabilities=[APPROVAL])
    await agent.run("edit")
    assert (await agent.run("never mind")).content == "Fine."
    repaired = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert len(repaired) == 1 and "not approved" in repaired[0].content
    assert await agent.pending() == []


def test_invalid_configuration_is_reported() -> None:
    with pytest.raises(UsageError, match="unknown keys"):
        HumanApproval({"execute": {"decision": ["approve"]}})
    with pytest.raises(UsageError, match="non-empty list"):
        HumanApproval({"execute": {"decisions": ["maybe"]}})
    assert HumanApproval({"execute": False}).policies == {}


SCRIPT = """
import asyncio, json, sys
from agentica import Agent, tool
from agentica.run.approval import Decision, HumanApproval
from agentica.testing import ScriptedModel, call, tool_calls

@tool
def edit_file(path: str, text: str) -> str:
    "Edit a file."
    open(sys.argv[2], "a").write(f"{path}={text}\\n")
    return "edited"

async def main():
    step = sys.argv[3]
    script = [tool_calls(call("edit_file", path="a.py", text="x")), "Edited."]
    agent = Agent(model=ScriptedModel(script if step == "run" else script[1:]),
                  tools=[edit_file], capabilities=[HumanApproval({"edit_file": True})],
                  storage=sys.argv[1], session_id="s1")
    if step == "run":
        response = await agent.run("edit a.py")
        print(json.dumps([p.call_id for p in response.pending]))
    else:
        pending = await agent.pending()
        response = await agent.resume({p.call_id: Decision.approve() for p in pending})
        print(json.dumps([response.stop_reason, response.content, [p.call_id for p in pending]]))
    await agent.storage.aclose()

asyncio.run(main())
"""


@pytest.mark.allow_blocking
def test_resume_after_a_restart(tmp_path: Path) -> None:
    db, log, script = tmp_path / "s.db", tmp_path / "log.txt", tmp_path / "hitl.py"
    script.write_text(textwrap.dedent(SCRIPT))

    def step(name: str) -> str:
        out = subprocess.run(
            [sys.executable, str(script), str(db), str(log), name],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return out.stdout.strip()

    ids = step("run")
    assert not log.exists()  # paused: the edit did not happen
    resumed = step("resume")
    assert resumed == f'["completed", "Edited.", {ids}]'
    assert log.read_text() == "a.py=x\n"
