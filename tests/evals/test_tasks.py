"""Evaluation tasks and checks (``agentica.evals``) on real files, processes and git.

The three formats load from fixtures in their official layouts (``tests/data/evals``); GAIA's
scorer is checked against a table; the SWE-bench check runs a made-up instance end to end (its
repository is built here with git); every shipped task fails untouched and passes after its
reference solution.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from agentica.errors import UsageError
from agentica.evals import (
    AllChecks,
    CheckResult,
    CommandCheck,
    EvalTask,
    ExpectedAnswer,
    NoReferenceCheck,
    SWEBenchCheck,
    answers_match,
    load_tasks,
    task_set,
    task_sets,
)
from agentica.evals.checks import normalize_answer

DATA = Path(__file__).parent.parent / "data" / "evals"
SHIPPED = [task for name in ("files", "docs") for task in load_tasks(task_set(name))]

# The repository of tests/data/evals/swebench/instances.jsonl (acme/calc): subtract is wrong.
ACME_CALC = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '\n[project]\nname = "acme-calc"\nversion = "0.1.0"\n\n[tool.setuptools]\n'
        'packages = ["calc"]\n'
    ),
    "calc/__init__.py": (
        '"""A tiny calculator."""\n\nfrom calc.ops import add, subtract\n\n'
        '__all__ = ["add", "subtract"]\n'
    ),
    "calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return b - a\n",
    "tests/test_ops.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Acme",
    "GIT_AUTHOR_EMAIL": "dev@acme.example",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "Acme",
    "GIT_COMMITTER_EMAIL": "dev@acme.example",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}


def git(cwd: Path, *args: str) -> str:
    settings = ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(
        ["git", *settings, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def workspace(tmp_path: Path, task: EvalTask) -> Path:
    root = tmp_path / "workspace"
    task.setup(root)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------
# GAIA's scorer and the answer checks


@pytest.mark.parametrize(
    ("answer", "expected", "match"),
    [
        ("17", "17", True),
        ("17.0", "17", True),
        ("$1,284.75", "1284.75", True),
        ("1284.75 ", "1284.75", True),
        ("45%", "45", True),
        ("17 apples", "17", False),
        ("18", "17", False),
        ("blue, green, red", "blue, green, red", True),
        ("Blue;Green; RED", "blue, green, red", True),
        ("blue, green", "blue, green, red", False),
        ("blue, green, red, violet", "blue, green, red", False),
        ("red, green, blue", "blue, green, red", False),
        ("3, $4,5", "3, 4, 5", True),  # list elements are numbers where the expected ones are
        ("Canberra", "canberra", True),
        ("  CAN-berra! ", "Canberra", True),
        ("St. Louis", "st louis", True),
        ("Sydney", "Canberra", False),
        ("", "Canberra", False),
        ("Infinity", "infinity", True),  # not numbers (not finite): compared as text
    ],
)
def test_answers_match_like_gaias_scorer(answer: str, expected: str, match: bool) -> None:
    assert answers_match(answer, expected) is match


def test_normalize_answer_drops_case_whitespace_and_punctuation() -> None:
    assert normalize_answer(" New  York, N.Y.\n") == "newyorkny"
    assert normalize_answer("a. b", keep_punctuation=True) == "a.b"


@pytest.mark.parametrize(
    ("answer", "passed"),
    [
        ("Canberra", True),
        ("**Canberra**", True),
        ("Let me think.\nThe capital is not Sydney.\n\nFINAL ANSWER: Canberra", True),
        ("final answer: canberra\n(from memory)", True),
        ("Answer:\n  Canberra.", True),
        ("I checked an atlas.\nCanberra", True),
        ("The capital of Australia is Canberra.", False),  # prose around it: no label, no line
        ("FINAL ANSWER: Sydney", False),
        ("I don't know", False),
        ("", False),
    ],
)
def test_answer_check_finds_the_answer_in_prose(answer: str, passed: bool) -> None:
    result = ExpectedAnswer("Canberra")(Path("."), answer)
    assert result.passed is passed
    assert passed or "expected 'Canberra'" in result.detail


def test_command_check_sees_the_answer_and_reports_the_end_of_its_output(tmp_path: Path) -> None:
    check = CommandCheck('test "$AGENTICA_ANSWER" = 42 && test -f done.txt')
    write(tmp_path / "done.txt", "")
    assert check(tmp_path, "42").passed
    assert not check(tmp_path, "41").passed
    noisy = CommandCheck("for i in $(seq 1 500); do echo line $i; done; echo BAD >&2; exit 3")
    result = noisy(tmp_path, "")
    assert not result.passed and result.detail.startswith("exit status 3")
    assert result.detail.endswith("line 500\nBAD") and "line 1\n" not in result.detail
    assert len(result.detail) < 1100


def test_command_check_times_out_and_background_processes_do_not_hold_it(tmp_path: Path) -> None:
    started = time.monotonic()
    result = CommandCheck("echo started; sleep 30", timeout=0.5)(tmp_path, "")
    assert not result.passed and "timed out after 0.5 s" in result.detail
    assert "started" in result.detail
    assert CommandCheck("sleep 30 > /dev/null 2>&1 & true")(tmp_path, "").passed
    assert time.monotonic() - started < 10


def test_all_checks_must_pass_and_no_reference_never_does(tmp_path: Path) -> None:
    both = AllChecks([CommandCheck("test -f a.txt"), ExpectedAnswer("7")])
    assert not both(tmp_path, "7").passed
    write(tmp_path / "a.txt", "")
    assert both(tmp_path, "7").passed
    result = both(tmp_path, "8")
    assert not result.passed and result.detail == "expected '7', got '8'"
    assert NoReferenceCheck()(tmp_path, "7") == NoReferenceCheck()(tmp_path, "7")
    assert NoReferenceCheck()(tmp_path, "7").detail == "no reference answer"


# ---------------------------------------------------------------------------------------------
# The shipped task sets


def test_the_shipped_sets() -> None:
    assert task_sets() == ["docs", "files"]
    files, docs = load_tasks(task_set("files")), load_tasks(task_set("docs"))
    assert len(files) == len(docs) == 8
    assert {t.metadata["kind"] for t in files} == {"answer", "edit", "script", "fix", "multi"}
    assert all(isinstance(t.check, ExpectedAnswer) for t in docs)
    with pytest.raises(UsageError, match=r"no task set 'gaia'.*the sets are: docs, files"):
        task_set("gaia")


@pytest.mark.parametrize("task", SHIPPED, ids=lambda task: task.id)
def test_a_shipped_task_fails_untouched_and_passes_after_its_solution(
    tmp_path: Path, task: EvalTask
) -> None:
    for word in ("read_file", "write_file", "run_python", "tool", "{"):
        assert word not in task.prompt, word
    root = workspace(tmp_path, task)
    assert not task.check(root, "").passed
    assert not task.check(root, "I don't know").passed
    answer = task.solve(root)
    result = task.check(root, answer)
    assert result.passed, result.detail


def test_shipped_checks_catch_shortcuts(tmp_path: Path) -> None:
    tasks = {task.id: task for task in SHIPPED}
    script = tasks["revenue-script"]
    root = workspace(tmp_path / "script", script)
    write(root / "total.py", "open('total.txt', 'w').write('154.00')\n")
    write(root / "total.txt", "154.00")
    assert "expected 33.5" in script.check(root, "").detail
    fix = tasks["fix-word-count"]
    root = workspace(tmp_path / "fix", fix)
    write(root / "test_wordcount.py", "")
    assert "test_wordcount.py was changed" in fix.check(root, "").detail


# ---------------------------------------------------------------------------------------------
# Loading: formats, errors, workspace safety


def test_gaia_tasks_load_with_their_attachment_and_scorer(tmp_path: Path) -> None:
    tasks = load_tasks(DATA / "gaia")
    assert [t.metadata["level"] for t in tasks] == [1, 2, 1, 3]
    assert load_tasks(DATA / "gaia" / "metadata.jsonl", format="gaia") == tasks
    bakery, expenses, colours, capital = tasks
    assert bakery.prompt.startswith("A bakery bakes") and bakery.source is None
    name = "5b2e9c41-7d3a-4f08-8e62-c1d9a4e7b302.csv"
    assert expenses.prompt.endswith(
        f"The file {name} that comes with this question is in the current folder."
    )
    root = workspace(tmp_path, expenses)
    assert (root / name).read_text().startswith("date,item,amount")
    assert [p.name for p in root.iterdir()] == [name]  # not the other files, not the answers
    assert expenses.check(
        root, "The club spent $1,284.75 in March.\nFINAL ANSWER: $1,284.75"
    ).passed
    assert not expenses.check(root, "1284").passed
    assert colours.check(root, "Blue, Green, Red").passed
    assert capital.check(root, capital.solve(root)).passed


def test_gaia_test_split_loads_without_answers(tmp_path: Path) -> None:
    unanswered = {"task_id": "t1", "Question": "How many?", "Level": 1, "Final answer": "?"}
    missing = {"task_id": "t2", "Question": "Which one?", "Level": 2, "file_name": ""}
    write(tmp_path / "test" / "metadata.jsonl", f"{json.dumps(unanswered)}\n{json.dumps(missing)}")
    tasks = load_tasks(tmp_path / "test")
    assert {t.check(tmp_path, "3").detail for t in tasks} == {
        "no reference answer (GAIA's test split keeps them private)"
    }
    assert [t.solution for t in tasks] == [None, None]


def test_auto_detection(tmp_path: Path, acme: tuple[Path, Path]) -> None:
    instances, repos = acme
    assert isinstance(load_tasks(task_set("docs"), limit=2)[0].check, ExpectedAnswer)
    assert len(load_tasks(task_set("files"), limit=3)) == 3
    gaia = load_tasks(DATA / "gaia")
    assert gaia[0].id == "0d6f7e6a-1c1e-4a51-9b0e-5a0b7f4c2a01"
    assert load_tasks(DATA / "gaia" / "metadata.jsonl") == gaia
    (swe,) = load_tasks(instances, repos=repos)
    assert isinstance(swe.check, SWEBenchCheck) and swe.id == "acme__calc-1"
    as_list = write(tmp_path / "instances.json", json.dumps([json.loads(instances.read_text())]))
    assert load_tasks(as_list, repos=repos) == [swe]


def test_an_unknown_format_is_refused_naming_the_formats(tmp_path: Path) -> None:
    (tmp_path / "empty-folder").mkdir()
    for path, complaint in [
        (write(tmp_path / "tasks.csv", "id,prompt\n"), "cannot tell the format of .*tasks.csv"),
        (write(tmp_path / "odd.jsonl", '{"question": "?"}\n'), "its first object has the keys"),
        (tmp_path / "empty-folder", "is a folder without metadata.jsonl"),
    ]:
        with pytest.raises(UsageError, match=complaint) as error:
            load_tasks(path)
        assert "the formats are: agentica (a .jsonl file" in str(error.value)
    with pytest.raises(UsageError, match="no task file or folder at"):
        load_tasks(tmp_path / "missing.jsonl")


GOOD = '{"id": "a", "prompt": "Say hi.", "answer": "hi"}'


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ('{"id": "b", "prompt": "x", "answer": "1"', "not valid JSON"),
        ('["id", "b"]', "expected a JSON object, found list"),
        ('{"id": "b", "answer": "1"}', "'prompt' must be a non-empty string \\(missing\\)"),
        ('{"id": 7, "prompt": "x", "answer": "1"}', "'id' must be a non-empty string \\(int 7\\)"),
        ('{"id": "b", "prompt": "x"}', "needs 'check' .* or 'answer'"),
        ('{"id": "b", "prompt": "x", "anwser": "1"}', "unknown key 'anwser'; the keys are id"),
        ('{"id": "b", "prompt": "x", "check": "true", "files": {"a": 1}}', "maps 'a' to int"),
        ('{"id": "b", "prompt": "x", "check": "true", "files": {"/etc/x": ""}}', "is absolute"),
        ('{"id": "b", "prompt": "x", "check": "true", "files": {"a/../../x": ""}}', "'\\.\\.'"),
        ('{"id": "b", "prompt": "x", "answer": true}', "'answer' must be a non-empty string"),
        (
            '{"id": "a", "prompt": "again", "answer": "1"}',
            "the id 'a' is already used \\(.*line 2\\)",
        ),
    ],
)
def test_a_bad_line_is_named_with_its_file_and_number(
    tmp_path: Path, line: str, complaint: str
) -> None:
    path = write(tmp_path / "set.jsonl", f"// a comment\n{GOOD}\n\n{line}\n")
    with pytest.raises(UsageError, match=complaint) as error:
        load_tasks(path, format="agentica")
    assert str(error.value).startswith(f"{path}, line 4: ")


def test_agentica_tasks_with_both_checks_and_numbers_as_answers(tmp_path: Path) -> None:
    line = {"id": "n", "prompt": "Count.", "answer": 3, "check": "test -f x", "files": {"d/x": "y"}}
    (task,) = load_tasks(write(tmp_path / "set.jsonl", json.dumps(line)))
    assert isinstance(task.check, AllChecks)
    root = workspace(tmp_path, task)
    assert (root / "d" / "x").read_text() == "y"
    assert not task.check(root, "3").passed
    write(root / "x", "")
    assert task.check(root, "3").passed and not task.check(root, "4").passed
    assert load_tasks(tmp_path / "set.jsonl", limit=0) == []
    with pytest.raises(UsageError, match="limit must be 0 or more"):
        load_tasks(tmp_path / "set.jsonl", limit=-1)


@pytest.mark.parametrize(
    ("path", "complaint"),
    [("../x", "goes up with '..'"), ("/tmp/x", "is absolute"), ("", "is empty")],
)
def test_setup_refuses_paths_leaving_the_workspace(
    tmp_path: Path, path: str, complaint: str
) -> None:
    task = EvalTask(id="escape", prompt="p", files={path: "x"}, check=ExpectedAnswer("x"))
    with pytest.raises(UsageError, match=f"task 'escape': the file path '{path}' {complaint}"):
        task.setup(tmp_path / "workspace")
    assert not (tmp_path / "x").exists()


def test_setup_refuses_symbolic_links_out_of_the_workspace(tmp_path: Path) -> None:
    source = tmp_path / "snapshot"
    write(source / "sub" / "a.txt", "a")
    (source / "inside").symlink_to("sub")
    task = EvalTask(
        id="s", prompt="p", source=source, files={"inside/b.txt": "b"}, check=ExpectedAnswer("x")
    )
    with pytest.raises(UsageError, match=r"'inside/b\.txt' goes through the symbolic link inside"):
        task.setup(tmp_path / "w1")
    assert not (source / "sub" / "b.txt").exists()
    task = EvalTask(id="s", prompt="p", source=source, check=ExpectedAnswer("x"))
    for name, target in [("outside", tmp_path), ("absolute", source / "sub")]:
        (source / name).symlink_to(target)  # the second would lead back to the source
        with pytest.raises(UsageError, match=f"holds the symbolic link {name} pointing outside"):
            task.setup(tmp_path / "w2")
        (source / name).unlink()
    root = workspace(tmp_path, task)
    assert (root / "inside" / "a.txt").read_text() == "a" and (root / "inside").is_symlink()


# ---------------------------------------------------------------------------------------------
# SWE-bench


@pytest.fixture(scope="session")
def acme(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(instances.jsonl, repos folder)``: the repository ``acme__calc`` has the buggy base
    commit and, after it, the fix (as upstream history would); the instance file is the one in
    tests/data with ``base_commit`` set to the commit made here."""
    root = tmp_path_factory.mktemp("swebench")
    repo = root / "repos" / "acme__calc"
    for name, text in ACME_CALC.items():
        write(repo / name, text)
    git(repo, "init", "--quiet")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "calc: add and subtract")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v0.1.0")
    instance = json.loads((DATA / "swebench" / "instances.jsonl").read_text())
    ops = repo / "calc" / "ops.py"
    ops.write_text(ops.read_text().replace("b - a", "a - b"))
    git(repo, "commit", "--quiet", "-am", "fix subtract")
    instance["base_commit"] = base
    instances = write(root / "instances.jsonl", json.dumps(instance) + "\n")
    return instances, root / "repos"


@pytest.mark.slow  # two virtualenvs with the repository installed: about 12 s
def test_swebench_instance_fails_on_base_and_passes_with_the_gold_patch(
    tmp_path: Path, acme: tuple[Path, Path]
) -> None:
    instances, repos = acme
    (task,) = load_tasks(instances, repos=repos)
    assert task.prompt.startswith("subtract(5, 3) returns -2")
    assert task.prompt.endswith(
        "The repository is in the current folder. Change its code so that it behaves as "
        "described above."
    )
    assert task.metadata["repo"] == "acme/calc"
    root = workspace(tmp_path, task)
    assert "b - a" in (root / "calc" / "ops.py").read_text()  # the base, not the fix after it
    assert git(root, "log", "--all", "--format=%s") == "calc: add and subtract"
    assert git(root, "status", "--porcelain") == ""

    before = task.check(root, "")
    assert not before.passed
    assert before.detail.startswith(
        "1 of 2 tests did not pass: tests/test_ops.py::test_subtract (failed)"
    )
    assert git(root, "status", "--porcelain") == ""  # the check ran on a copy

    task.solve(root)  # the gold patch
    write(
        root / "tests" / "test_ops.py", "def test_add():\n    assert False\n"
    )  # reset by the check
    after = task.check(root, "")
    assert after.passed, after.detail
    assert after.detail == "2 tests passed"


def test_swebench_check_without_pip_install_missing_tests_and_timeout(tmp_path: Path) -> None:
    """A repository pip cannot install is put on PYTHONPATH (with its src folder); a test id
    pytest does not find did not pass; running out of time is a failure."""
    write(tmp_path / "pyproject.toml", '[build-system]\nbuild-backend = "no_such_backend"\n')
    write(tmp_path / "src" / "greet.py", "def hello():\n    return 'hello'\n")
    write(
        tmp_path / "test_greet.py",
        "from greet import hello\n\ndef test_hello():\n    assert hello() == 'hello'\n",
    )
    check = SWEBenchCheck(
        test_patch="", fail_to_pass=("test_greet.py::test_hello", "test_greet.py::test_bye")
    )
    result = check(tmp_path, "")
    assert result == CheckResult(
        False,
        "1 of 2 tests did not pass: test_greet.py::test_bye (not found) "
        "(pip could not install the repository: it is on PYTHONPATH)",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "src", "test_greet.py"]

    write(tmp_path / "test_slow.py", "import time\n\ndef test_slow():\n    time.sleep(30)\n")
    check = SWEBenchCheck(test_patch="", fail_to_pass=("test_slow.py::test_slow",), timeout=3)
    started = time.monotonic()
    result = check(tmp_path, "")
    assert not result.passed and result.detail.startswith("timed out after 3 s while ")
    assert time.monotonic() - started < 10


def test_swebench_needs_its_repositories(
    tmp_path: Path, acme: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    instances, _ = acme
    monkeypatch.delenv("AGENTICA_SWEBENCH_REPOS", raising=False)
    with pytest.raises(UsageError, match="pass repos=<folder> or set AGENTICA_SWEBENCH_REPOS"):
        load_tasks(instances)
    (tmp_path / "repos").mkdir()
    (task,) = load_tasks(instances, repos=tmp_path / "repos")
    with pytest.raises(UsageError, match=r"clone https://github\.com/acme/calc there"):
        task.setup(tmp_path / "workspace")
