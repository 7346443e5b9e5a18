"""The demo's flow with a scripted model: the deep agent delegates, edits, reads back, and the
check (and its follow-up) decide success. The real model runs it in test_local_model.py."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from agentica.cli.demo import USER_TASK, check_report, demo_agent, prepare_workspace, run_demo
from agentica.deep import DeepAgent
from agentica.messages import UserMessage
from agentica.testing import ScriptedModel, call, tool_calls

ROWS = "| north | 165 |\n| south | 180 |\n| east | 90 |"


def quiet() -> Console:
    return Console(quiet=True)


# what the subagent runs: the totals computed from the file (numbers a script only prints from
# its own source do not count as computed: NumberCheck)
TOTALS_CODE = (
    "import csv\ntotals = {}\nfor row in csv.DictReader(open('sales.csv')):\n"
    "    totals[row['region']] = totals.get(row['region'], 0) + int(row['amount'])\n"
    "print(', '.join(f'{k} {v}' for k, v in totals.items()))"
)


async def test_the_deep_demo_delegates_edits_and_passes_the_check(tmp_path: Path) -> None:
    root = prepare_workspace(str(tmp_path))
    assert "TODO" in (root / "report.md").read_text()
    steps = ["compute totals", "edit report", "check report"]
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=steps)),
        tool_calls(call("task", description="Compute the totals per region")),
        # the subagent (same model): runs Python, reports
        tool_calls(call("run_python", code=TOTALS_CODE)),
        "north 165, south 180, east 90",
        tool_calls(call("edit_file", path="report.md", old_string="TODO", new_string=ROWS)),
        tool_calls(call("read_file", path="report.md")),
        "report.md has the totals.",  # too early: the todos are still open
        tool_calls(call("write_todos", todos=[{"content": s, "status": "completed"}
                                              for s in steps])),
        "report.md has the totals.",
        "report.md has the totals.",  # the answer check asks once
    ])  # fmt: skip
    result = await run_demo(model, root, quiet(), transcript=tmp_path / "run.json")
    assert result is not None and result.problem is None
    names = [c.name for c in result.responses[0].tool_calls]
    assert names == ["write_todos", "task", "edit_file", "read_file", "write_todos"]
    written = json.loads((tmp_path / "run.json").read_text())  # (to read why a run failed)
    assert written[0]["role"] == "user" and "report.md" in written[0]["text"]
    assert written[1]["calls"][0].startswith("write_todos(")
    assert "north 165" in result.responses[0].tool_calls[1].content
    assert check_report(root) is None
    assert [t["status"] for t in result.todos] == ["completed"] * 3
    # the task shows the model the exact call that plans the three steps
    assert 'write_todos({"todos": ["compute totals", "edit report", "check report"]})' in (
        model.requests[0].messages[1].text
    )
    # the user's version (--as-user) names no tool and no call syntax
    assert not any(name in USER_TASK for name in (*demo_agent(model, root).functions, "("))


async def test_a_wrong_report_gets_a_follow_up_that_does_not_give_away_the_totals(
    tmp_path: Path,
) -> None:
    root = prepare_workspace(str(tmp_path))
    wrong = "| north | 100 |\n| south | 180 |\n| east | 90 |"
    # (totals its code printed, wrong: numbers from the head would be sent back in the run)
    printed = "print(open('sales.csv').read())\nprint(120 - 20, 360 // 2, 3 * 30)"
    model = ScriptedModel([
        tool_calls(call("run_python", code=printed)),
        tool_calls(call("edit_file", path="report.md", old_string="TODO", new_string=wrong)),
        tool_calls(call("edit_file", path="report.md", old_string="TODO", new_string=wrong)),
        tool_calls(call("read_file", path="report.md")),
        "done", "done",
        tool_calls(call("run_python", code="print(120 + 45)")),
        tool_calls(call("edit_file", path="report.md", old_string="| north | 100 |",
                        new_string="| north | 165 |")),
        tool_calls(call("read_file", path="report.md")),
        "fixed", "fixed", "fixed",  # (the answer check, then the heartbeat's checkpoint)
    ])  # fmt: skip
    result = await run_demo(model, root, quiet())
    assert result is not None and result.problem is None and len(result.responses) == 2
    follow_up = next(
        m for r in model.requests for m in r.messages
        if isinstance(m, UserMessage) and "checked" in m.text
    )  # fmt: skip
    assert "north" in follow_up.text and "165" not in follow_up.text


def test_the_check_wants_each_region_next_to_its_total(tmp_path: Path) -> None:
    root = prepare_workspace(str(tmp_path), deep=False)
    (root / "report.md").write_text("| east | 165 |\n| north | 90 |\n| south | 180 |")
    assert check_report(root) == "report.md does not show the right total for north, east"
    (root / "report.md").write_text("| North | 165.0 |\n| South | 180 |\n| East | 90.00 |")
    assert check_report(root) is None
    # a second table with a wrong row is no right report (seen: the model's row kept above
    # the one its code wrote)
    (root / "report.md").write_text(
        "| North | 165 |\n| South | 280 |\n| East | 90 |\n\n| North | 165 |\n| South | 180 |\n"
        "| East | 90 |\n"
    )
    assert check_report(root) == "report.md does not show the right total for south"
    (root / "report.md").write_text("TODO\n| North | 165 |\n| South | 180 |\n| East | 90 |\n")
    assert check_report(root) == "report.md still has the TODO line of the template"


def test_the_simple_demo_has_no_template_and_the_single_agent(tmp_path: Path) -> None:
    root = prepare_workspace(str(tmp_path), deep=False)
    assert not (root / "report.md").exists()
    plain = demo_agent(ScriptedModel([]), root, deep=False)
    deep = demo_agent(ScriptedModel([]), root)
    assert not isinstance(plain, DeepAgent) and "task" not in plain.functions
    assert isinstance(deep, DeepAgent) and {"task", "edit_file", "run_python"} <= set(
        deep.functions
    )
    assert deep.model_settings.parallel_tool_calls is False  # one call per step for small models
