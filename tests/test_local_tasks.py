"""The local task suite's checkers, without a model: each fails on its untouched workspace (a
do-nothing agent never passes) and passes after the task's reference solution. Answer checkers
also refuse a dump of the task's files and accept other fair phrasings. The runner's statistics
and one scripted run of the plain agent cover the rest of ``benchmarks/local_tasks.py``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentica.testing import ScriptedModel, call, tool_calls
from benchmarks.local_task_data import KINDS, TASKS, Task
from benchmarks.local_tasks import Outcome, report, run_task, wilson

BY_NAME = {task.name: task for task in TASKS}


def workspace(tmp_path: Path, task: Task) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    task.setup(root)
    return root


def test_the_suite_has_thirty_tasks_of_five_kinds_with_unique_names() -> None:
    assert len(TASKS) >= 30
    assert len(BY_NAME) == len(TASKS)
    for kind in KINDS:
        assert sum(task.kind == kind for task in TASKS) >= 6, kind


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_prompts_read_like_a_user_typed_them(task: Task) -> None:
    for word in ("write_file", "read_file", "run_python", "todo", "calculator", "{", "tool"):
        assert word not in task.prompt, word


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_the_checker_fails_untouched_and_passes_after_the_reference_solution(
    tmp_path: Path, task: Task
) -> None:
    root = workspace(tmp_path, task)
    assert task.check(root, "") is False
    assert task.check(root, task.prompt) is False
    answer = task.solve(root)
    assert task.check(root, answer) is True
    assert (task.kind == "answer") == bool(answer)


@pytest.mark.parametrize("task", [t for t in TASKS if t.kind == "answer"], ids=lambda t: t.name)
def test_an_answer_that_dumps_the_files_fails(tmp_path: Path, task: Task) -> None:
    root = workspace(tmp_path, task)
    assert task.check(root, "\n".join(task.files.values())) is False


@pytest.mark.parametrize(
    ("name", "answer", "ok"),
    [
        ("server-port", "**8080**", True),
        ("server-port", "Port 8080 (the database is on 5432).", True),
        ("server-port", "The database listens on 5432 and the server on 8080.", False),
        ("pending-orders", "Three orders are pending: 1042, 1044 and 1046.", True),
        ("pending-orders", "There are 4 pending orders.", False),
        ("average-score", "The average is 82.50.", True),
        ("average-score", "About 83.", False),
        ("oldest-person", "Ines (born 1939), older than Marta Koval.", True),
        ("oldest-person", "From the lines of the file: Duarte.", True),
        ("oldest-person", "Marta Koval is the oldest.", False),
        ("package-version", "v2.4.1", True),
        ("package-version", "2.4.10", False),
        ("hours-logged", "17.5 hours (7.5 + 6 + 4).", True),
        ("hours-logged", "Priya logged 40.75 hours.", False),
    ],
)
def test_answer_checkers_accept_fair_phrasings(name: str, answer: str, ok: bool) -> None:
    assert BY_NAME[name].check(Path("."), answer) is ok


@pytest.mark.parametrize(
    ("name", "files", "ok"),
    [
        ("word-count", {"count.txt": "13.0\n"}, True),
        ("multiply", {"answer.txt": "7,006,652"}, True),
        ("csv-totals", {"totals.json": '{"north": 165.0, "south": 180, "east": 90.0}'}, True),
        ("json-config", {"config.json": '{"name": "agentica", "version": "1"}'}, True),
        ("json-config", {"config.json": '{"name": "agentica", "version": true}'}, False),
        ("debug-off", {"config.ini": "[app]\nname=shop\ndebug=False\nlog_level=info\n"
                       "[db]\nurl=sqlite:///shop.db\n"}, True),
        ("debug-off", {"config.ini": "[app]\nname=shop\ndebug=false\nlog_level=warning\n"
                       "[db]\nurl=sqlite:///shop.db\n"}, False),
        ("restock", {"stock.csv": "item,qty\napples,20\npears,25\nfigs,5\n"}, False),
    ],
)  # fmt: skip
def test_file_checkers_accept_fair_formats(
    tmp_path: Path, name: str, files: dict[str, str], ok: bool
) -> None:
    task = BY_NAME[name]
    root = workspace(tmp_path, task)
    for path, text in files.items():
        (root / path).write_text(text)
    assert task.check(root, "") is ok


def test_a_fix_that_edits_the_tests_fails(tmp_path: Path) -> None:
    task = BY_NAME["fix-leap-year"]
    root = workspace(tmp_path, task)
    tests = root / "test_dates.py"
    tests.write_text(tests.read_text().replace("self.assertTrue(is_leap(2000))", "pass"))
    assert task.check(root, "") is False


def test_config_repeat_needs_code_that_reads_the_setting(tmp_path: Path) -> None:
    task = BY_NAME["config-repeat"]
    root = workspace(tmp_path, task)
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "repeat": 3}))
    (root / "app.py").write_text("for _ in range(3):\n    print('Hello, team!')\n")
    assert task.check(root, "") is False


def test_wilson_interval() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4)
    assert high == pytest.approx(0.7634, abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 10)[0] == pytest.approx(0.0)


def test_a_scripted_plain_run_is_checked_counted_and_reported() -> None:
    task = BY_NAME["hello"]
    model = ScriptedModel([
        tool_calls(call("write_files", path="hello.py")),  # an unknown tool: malformed
        tool_calls(call("write_file", path="hello.py", content="print('Hello, world!')\n")),
        "Created hello.py.",
    ])  # fmt: skip
    outcome = asyncio.run(run_task("plain", model, task, repeat=0, temperature=0.0, seed=0))
    assert outcome.ok
    assert outcome.answer == "Created hello.py."
    assert outcome.malformed == 1
    assert [c["name"] for c in outcome.tool_calls] == ["write_files", "write_file"]
    failed = Outcome("deep", "hello", "script", 0, False, 3.0, 0, 0, "LimitExceeded", "", [])
    text = report([outcome, failed], ["plain", "deep"], "test header")
    assert "| script | 1/1 (21-100%) | 0/1 (0-79%) |" in text
    assert "LimitExceeded 1" in text
