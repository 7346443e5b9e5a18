"""DeepAgent end to end with a scripted model: plans with todos, reads and edits files in its
workspace, runs code, delegates to a subagent, and is checked before it finishes."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from agentica import Agent, RunLimits, UsageError
from agentica.deep import DeepAgent, Shell, SubAgent
from agentica.messages import SystemMessage, ToolMessage, UserMessage
from agentica.testing import ScriptedModel, call, tool_calls


async def test_a_deep_agent_plans_edits_runs_and_delegates(tmp_path: Path) -> None:
    (tmp_path / "buggy.py").write_text("def add(a, b):\n    return a - b\n")
    helper = ScriptedModel([
        tool_calls(call("read_file", path="buggy.py")),
        "buggy.py subtracts instead of adding.",
    ])  # fmt: skip
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=[
            {"content": "find the bug", "status": "in_progress"},
            {"content": "fix it", "status": "pending"},
            {"content": "test it", "status": "pending"},
        ])),
        tool_calls(call("task", description="Find the bug in buggy.py", agent="reviewer")),
        tool_calls(call("edit_file", path="buggy.py", old_string="a - b", new_string="a + b")),
        "Fixed.",  # too early: three steps open, two calls made
        tool_calls(call("run_python", code="import buggy; print(buggy.add(2, 3))")),
        tool_calls(call("write_todos", todos=[
            {"content": "find the bug", "status": "completed"},
            {"content": "fix it", "status": "completed"},
            {"content": "test it", "status": "completed"},
        ])),
        "Fixed buggy.py: add() now adds; add(2, 3) prints 5.",  # the answer check asks once more
        "Fixed buggy.py: add() now adds; add(2, 3) prints 5.",
    ])  # fmt: skip
    reviewer = SubAgent("reviewer", "reads code", privilege="explore", model=helper)
    agent = DeepAgent(model=model, workspace=tmp_path, subagents=[reviewer])
    response = await agent.run("Fix the bug in buggy.py and test it")

    assert response.content == "Fixed buggy.py: add() now adds; add(2, 3) prints 5."
    assert (tmp_path / "buggy.py").read_text() == "def add(a, b):\n    return a + b\n"
    results = {c.name: c for c in response.tool_calls}
    report, evidence = results["task"].content.split("\n\n", 1)
    assert report == "buggy.py subtracts instead of adding."
    # the report does not quote what the subagent's tools showed: its last result follows
    assert evidence.startswith("[The subagent's last successful tool call, read_file, returned:")
    assert "return a - b" in evidence
    assert "5" in results["run_python"].content and "exit code 0" in results["run_python"].content
    assert [t.name for t in helper.requests[0].tools] == [
        "ls",
        "read_file",
        "glob",
        "grep",
    ]  # explore: read-only (the parent's todo list is not the subagent's)
    assert response.usage.requests == len(model.requests) + len(helper.requests)
    first = model.requests[0].messages[0]
    assert isinstance(first, SystemMessage) and "write_todos" in first.content
    nudge = model.requests[4].messages[-3]  # then the todo slot and a checkpoint
    assert isinstance(nudge, UserMessage) and "still has open steps" in nudge.text
    # the nudge names the step in progress and shows the call that marks only that one done
    assert "Do the next one, 'find the bug', now" in nudge.text
    assert (
        'write_todos({"todos": [{"content": "find the bug", "status": "completed"}, '
        '{"content": "fix it", "status": "pending"}, {"content": "test it", "status": "pending"}]})'
    ) in nudge.text
    todo_slot = [m for m in model.requests[2].messages if isinstance(m, SystemMessage)]
    assert any("[>] find the bug" in m.content for m in todo_slot)
    assert agent.memory.state["todos"][1]["status"] == "completed"
    assert not [m for m in model.requests[-1].messages if isinstance(m, ToolMessage)
                and "rror" in m.content]  # fmt: skip


async def test_without_a_workspace_files_live_in_the_session(tmp_path: Path) -> None:
    model = ScriptedModel([
        tool_calls(call("write_file", path="/notes.md", content="hello")),
        "saved",
        tool_calls(call("read_file", path="/notes.md")),
        "it says hello",
    ])  # fmt: skip
    agent = DeepAgent(model=model, answer_check=False, heartbeat=False,
                      storage=str(tmp_path / "s.db"))  # fmt: skip
    assert "execute" not in agent.functions  # no workspace: no shell
    await agent.run("save a note")
    again = DeepAgent(model=model, answer_check=False, heartbeat=False, storage=agent.storage,
                      session_id=agent.session_id)  # fmt: skip
    try:
        response = await again.run("what does the note say?")
    finally:
        assert agent.storage is not None
        await agent.storage.aclose()
    assert "hello" in response.tool_calls[0].content


def test_parts_can_be_switched_off_or_replaced(tmp_path: Path) -> None:
    lean = DeepAgent(model=ScriptedModel([]), workspace=tmp_path, todos=False, subagents=False,
                     shell=Shell(tmp_path), answer_check=False)  # fmt: skip
    assert set(lean.functions) == {
        "ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute",
        "start_command", "wait_command", "stop_command", "list_commands",
    }  # fmt: skip
    with pytest.raises(UsageError, match="not a directory"):
        DeepAgent(model=ScriptedModel([]), workspace=tmp_path / "missing")


async def test_the_model_sees_the_workspace_and_subagents_share_the_guards(tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,3\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "data" / "old").mkdir(parents=True)  # (a few entries: named)
    for name in ("b.txt", "a.txt"):
        (tmp_path / "data" / name).write_text("1\n")
    (tmp_path / "logs").mkdir()  # (many: counted by ls, not named)
    for number in range(9):
        (tmp_path / "logs" / f"{number}.log").write_text("")
    helper_calls = [tool_calls(call("ls", path="/"))] * 3 + ["three listings"]
    helper = ScriptedModel(helper_calls)
    model = ScriptedModel([
        tool_calls(call("task", description="list the files", agent="helper")),
        "done",
        "done",
        "done",  # (a question answered "done" after the check is asked for the answer)
    ])  # fmt: skip
    kind = SubAgent("helper", "lists", model=helper)
    agent = DeepAgent(model=model, workspace=tmp_path, subagents=[kind])
    await agent.run("What is in the workspace?")
    overview = (
        "Files in the workspace now: /data/ (dir: a.txt, b.txt, old/), /docs/ (dir), /logs/ "
        "(dir), /sales.csv (22 B)."
    )
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage) and overview in system.content
    child_system = helper.requests[0].messages[0]
    assert isinstance(child_system, SystemMessage) and overview in child_system.content
    assert "write_todos" not in [t.name for t in helper.requests[0].tools]
    third = [m for m in helper.requests[3].messages if isinstance(m, ToolMessage)][-1]
    assert "[repetition warning]" in third.content  # the subagent's own guard


async def test_code_written_in_the_answer_is_sent_back_to_be_run(tmp_path: Path) -> None:
    model = ScriptedModel([
        "Run this:\n```python\nprint(6 * 7)\n```",
        tool_calls(call("run_python", code="print(6 * 7)")),
        "42",
    ])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, answer_check=False, todos=False)
    response = await agent.run("What is 6 * 7? Compute it.")
    nudge = model.requests[1].messages[-1]
    assert isinstance(nudge, UserMessage) and "did not run it" in nudge.text
    assert "call run_python with the code" in nudge.text
    assert response.content == "42"
    assert "42" in response.tool_calls[0].content


async def test_code_for_a_file_the_task_asks_for_is_sent_back_to_be_saved(
    tmp_path: Path,
) -> None:
    """As measured on the 1.5B model: "Write fib.py with a function fib(n) ..." answered with
    the function in a block; told to run it, it ran it, and fib.py was never written."""
    code = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    model = ScriptedModel([
        f"Here it is:\n```python\n{code}```",
        tool_calls(call("write_file", path="fib.py", content=code)),
        *["fib.py is written."] * 3,  # (the harness's other checks may ask again)
    ])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, answer_check=False, todos=False)
    await agent.run("Write fib.py with a function fib(n) that returns the n-th Fibonacci number.")
    nudge = model.requests[1].messages[-1]
    assert isinstance(nudge, UserMessage)
    assert "the task asks for fib.py, which does not exist yet: save the code in it" in nudge.text
    assert model.requests[1].settings.tool_choice == "write_file"
    assert (tmp_path / "fib.py").read_text() == code


async def test_a_fixed_function_written_in_the_reply_is_sent_back_to_go_into_its_file(
    tmp_path: Path,
) -> None:
    """As measured on fix-leap-year: the right is_leap written in the reply; told to run it,
    the model ran the definition, and dates.py kept the bug."""
    old = "def is_leap(year):\n    return year % 4 == 0 and year % 100 != 0\n"
    (tmp_path / "dates.py").write_text(f"import math\n\n\n{old}")
    (tmp_path / "test_dates.py").write_text("def is_leap(y):\n    return 0\n")
    new = "def is_leap(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)"
    model = ScriptedModel([
        f"Here is the corrected code:\n```python\n{new}\n```\nAfter this change it works.",
        tool_calls(call("edit_file", path="dates.py", old_string=old.rstrip(), new_string=new)),
        *["dates.py is fixed."] * 3,
    ])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, answer_check=False, todos=False)
    await agent.run("is_leap in dates.py says 2000 is not a leap year. Fix it; see test_dates.py.")
    nudge = model.requests[1].messages[-1]
    assert isinstance(nudge, UserMessage)
    assert nudge.text == (
        "You wrote a new is_leap in your reply, but dates.py still has the old one, so nothing "
        "changed. Put yours in the file now with edit_file: path 'dates.py', old_string the old "
        f"definition as the file has it:\n{old.rstrip()}\nand new_string your version. Then go "
        "on with the task."
    )
    assert model.requests[1].settings.tool_choice == "edit_file"
    assert (tmp_path / "dates.py").read_text() == f"import math\n\n\n{new}\n"


@pytest.mark.parametrize("privilege", ["code", "explore"])
async def test_a_subagent_that_only_writes_code_down_is_told_to_run_it(
    tmp_path: Path, privilege: Literal["code", "explore"]
) -> None:
    written = "Here is the code:\n```python\nprint(6 * 7)\n```"
    helper = ScriptedModel(
        [written, tool_calls(call("run_python", code="print(6 * 7)")), "It printed 42."]
        if privilege == "code"
        else [written]
    )
    kind = SubAgent("helper", "helps", privilege=privilege, model=helper)
    model = ScriptedModel([tool_calls(call("task", description="compute 6*7", agent="helper")),
                           "done", "done"])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, subagents=[kind], todos=False)
    response = await agent.run("compute 6*7 with a helper")
    report = response.tool_calls[0].content
    if privilege == "code":  # it can run code: sent back once, then it runs it
        nudge = helper.requests[1].messages[-1]
        assert isinstance(nudge, UserMessage) and "call run_python with the code" in nudge.text
        assert report.startswith("It printed 42.") and "exit code 0\n42" in report
    else:  # read-only: no tool could run it, so nobody asks
        assert len(helper.requests) == 1 and report == written


async def test_a_clone_is_a_deep_agent_rebuilt_from_the_same_arguments(tmp_path: Path) -> None:
    reviewer = SubAgent("reviewer", "reads code", privilege="explore")
    agent = DeepAgent(
        model=ScriptedModel([]), workspace=tmp_path, subagents=[reviewer], todos=False,
        background_commands=True, interrupt_on={"execute": True}, instructions="Be brief.",
        name="coder", limits=RunLimits(max_turns=7),
    )  # fmt: skip
    twin = agent.clone()
    assert type(twin) is DeepAgent
    assert twin.session_id != agent.session_id
    assert (twin.name, twin.limits, twin.instructions) == (
        "coder", agent.limits, agent.instructions
    )  # fmt: skip
    assert list(twin.functions) == list(agent.functions)
    assert [type(c) for c in twin.capabilities] == [type(c) for c in agent.capabilities]
    # the harness is rebuilt: no capability (a shell's commands, a guard) is shared
    assert not any(a is b for a, b in zip(twin.capabilities, agent.capabilities, strict=True))
    lean = agent.clone(subagents=False, shell=False)
    assert type(lean) is DeepAgent
    assert "task" not in lean.functions and "execute" not in lean.functions
    assert "read_file" in lean.functions
    answering = agent.clone(model=ScriptedModel(["Done."]), answer_check=False)
    assert (await answering.run("Say done.")).content == "Done."
    with pytest.raises(UsageError, match="unknown settings: colour"):
        agent.clone(colour="red")
    reviewer_agent = Agent(name="reviewer", model=ScriptedModel([]))
    handing = agent.clone(handoffs=[reviewer_agent])  # a deep agent hands over too
    assert type(handing) is DeepAgent and "transfer_to_reviewer" in handing.functions
    assert "transfer_to_reviewer" in handing.clone().functions
