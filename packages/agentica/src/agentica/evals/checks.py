"""Checks: how an evaluation task decides, after the run, whether the agent solved it.

A check is a blocking callable ``(workspace, answer) -> CheckResult`` (the runner calls it in a
worker thread): ``CommandCheck`` runs a shell command in the workspace, ``ExpectedAnswer`` compares
the final answer with the expected one the way GAIA's scorer does (``answers_match``),
``AllChecks`` combines checks, ``NoReferenceCheck`` stands in when a task has no reference
answer, and ``SWEBenchCheck`` runs a SWE-bench instance's tests on a copy of the workspace.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import string
import sys
import sysconfig
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentica.evals._process import Completed, run, tail

__all__ = [
    "ANSWER_VARIABLE",
    "AllChecks",
    "Check",
    "CheckResult",
    "CommandCheck",
    "ExpectedAnswer",
    "NoReferenceCheck",
    "SWEBenchCheck",
    "answer_candidates",
    "answers_match",
    "normalize_answer",
]

ANSWER_VARIABLE = "AGENTICA_ANSWER"
"""The environment variable holding the agent's final answer while a ``CommandCheck`` runs."""

DETAIL_CHARS = 1000  # the end of a failed command's output kept in the detail
_MAX_ENV_ANSWER = 100_000  # Linux refuses a single environment string over 128 KiB


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Whether the task was solved, and why not (or a note) in ``detail``."""

    passed: bool
    detail: str = ""


class Check(Protocol):
    """Decides whether a task was solved, from the workspace the agent left and its final answer.

    Blocking: the runner calls it in a worker thread. It must not change the workspace.
    """

    def __call__(self, workspace: Path, answer: str) -> CheckResult: ...


@dataclass(frozen=True, slots=True)
class CommandCheck:
    """Runs ``command`` with ``sh -c`` in the workspace; exit status 0 means solved.

    The agent's final answer is in the environment variable ``AGENTICA_ANSWER`` (NUL characters
    removed, at most 100,000 characters). A failure's detail is the exit status and the last
    1,000 characters of the output (stdout and stderr); running longer than ``timeout`` seconds
    is a failure too (the command's process group is killed).
    """

    command: str
    timeout: float = 120.0

    def __call__(self, workspace: Path, answer: str) -> CheckResult:
        env = dict(os.environ)
        env[ANSWER_VARIABLE] = answer.replace("\0", "")[:_MAX_ENV_ANSWER]
        try:
            done = run(["sh", "-c", self.command], cwd=workspace, env=env, timeout=self.timeout)
        except OSError as error:
            return CheckResult(False, f"the check command could not start in {workspace}: {error}")
        if done.ok:
            return CheckResult(True)
        output = tail(done.output.strip(), DETAIL_CHARS) or "(no output)"
        if done.timed_out:
            return CheckResult(False, f"timed out after {self.timeout:g} s; output: {output}")
        return CheckResult(False, f"exit status {done.returncode}; output: {output}")


# ---------------------------------------------------------------------------------------------
# Answers: GAIA's scorer


def normalize_answer(text: str, *, keep_punctuation: bool = False) -> str:
    """``text`` lower-cased, without any whitespace and (unless ``keep_punctuation``) without
    ASCII punctuation: how GAIA's scorer compares answers that are not numbers."""
    text = re.sub(r"\s", "", text).lower()
    if keep_punctuation:
        return text
    return text.translate(str.maketrans("", "", string.punctuation))


def _number(text: str) -> float | None:
    """``text`` as a finite number, or ``None``."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _answer_number(text: str) -> float | None:
    """The number an answer states: ``$``, ``%`` and ``,`` removed (``"$1,250"`` -> 1250)."""
    for char in "$%,":
        text = text.replace(char, "")
    return _number(text)


def _element_matches(answer: str, expected: str) -> bool:
    reference = _number(expected)
    if reference is not None:
        return _answer_number(answer) == reference
    return normalize_answer(answer, keep_punctuation=True) == normalize_answer(
        expected, keep_punctuation=True
    )


def answers_match(answer: str, expected: str) -> bool:
    """GAIA's scorer: does ``answer`` (the whole text) state the ``expected`` answer?

    - ``expected`` is a number (``"17"``, ``"0.25"``): ``answer`` without ``$``, ``%`` and ``,``
      must be the same number (``"$17.00"`` matches; ``"17 apples"`` does not).
    - ``expected`` holds ``,`` or ``;``: a list. Both are split on ``,`` and ``;``, must have as
      many elements, and match element by element: as numbers where the expected element is
      one, else as text without whitespace, ignoring case (punctuation counts here).
    - Otherwise text: equal once lower-cased, without whitespace and without punctuation
      (``"St. Louis"`` matches ``"st louis"``).
    """
    reference = _number(expected)
    if reference is not None:
        return _answer_number(answer) == reference
    if "," in expected or ";" in expected:
        expected_items = re.split(r"[,;]", expected)
        answer_items = re.split(r"[,;]", answer)
        return len(expected_items) == len(answer_items) and all(
            _element_matches(a, e) for a, e in zip(answer_items, expected_items, strict=True)
        )
    return normalize_answer(answer) == normalize_answer(expected)


_ANSWER_LABEL = re.compile(r"\b(?:final\s+)?answer\s*:", re.IGNORECASE)
_WRAPPING = "*_`\"' "


def answer_candidates(answer: str) -> list[str]:
    """The parts of a final answer that ``ExpectedAnswer`` compares, in order: the whole answer,
    the text after the last ``FINAL ANSWER:`` or ``Answer:`` (to the end of that line, or the
    next non-empty line), and the last non-empty line. Each is also tried without Markdown
    emphasis or quotes around it (``**42**`` -> ``42``)."""
    found = [answer.strip()]
    labels = list(_ANSWER_LABEL.finditer(answer))
    if labels:
        after = [line.strip() for line in answer[labels[-1].end() :].splitlines()]
        found += [line for line in after if line][:1]
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    if lines:
        found.append(lines[-1])
    found += [text.strip(_WRAPPING).rstrip(".").strip(_WRAPPING) for text in found]
    return [text for text in dict.fromkeys(found) if text]


@dataclass(frozen=True, slots=True)
class ExpectedAnswer:
    """The final answer states ``expected``, compared with GAIA's scorer (``answers_match``).

    The agent may write prose around the answer: the check passes when any of
    ``answer_candidates(answer)`` matches, that is the whole answer, the text after the last
    ``FINAL ANSWER:`` / ``Answer:`` (any case), or the last non-empty line.
    """

    expected: str

    def __call__(self, workspace: Path, answer: str) -> CheckResult:
        candidates = answer_candidates(answer)
        if any(answers_match(candidate, self.expected) for candidate in candidates):
            return CheckResult(True)
        got = repr(tail(answer.strip(), 200)) if answer.strip() else "no answer"
        return CheckResult(False, f"expected {self.expected!r}, got {got}")


@dataclass(frozen=True, slots=True)
class NoReferenceCheck:
    """A task without a reference answer (GAIA's test split): never passes, says why."""

    reason: str = "no reference answer"

    def __call__(self, workspace: Path, answer: str) -> CheckResult:
        return CheckResult(False, self.reason)


@dataclass(frozen=True, slots=True)
class AllChecks:
    """Passes when every check passes. All of them run; the detail joins the failures'."""

    checks: Sequence[Check]

    def __call__(self, workspace: Path, answer: str) -> CheckResult:
        results = [check(workspace, answer) for check in self.checks]
        failed = [result.detail or "failed" for result in results if not result.passed]
        return CheckResult(not failed, "; ".join(failed))


# ---------------------------------------------------------------------------------------------
# SWE-bench


class _TimedOut(Exception):
    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.step = step


@dataclass(frozen=True, slots=True, kw_only=True)
class SWEBenchCheck:
    """A SWE-bench instance's tests: every ``fail_to_pass`` and ``pass_to_pass`` test must pass.

    On a temporary copy of the workspace (the agent's workspace is never changed): the files
    ``test_patch`` touches are reset to ``base_commit`` (when given) and ``test_patch`` is
    applied; a virtualenv is made with ``--system-site-packages`` from ``python`` (when its base
    interpreter has no pytest, or its setuptools cannot build the repository, the virtualenv also
    sees the environment running the check, so nothing is downloaded); the repository is
    installed into it (``pip install --no-deps --no-build-isolation --no-index -e .``; when that
    fails, it is put on ``PYTHONPATH``); and
    ``python -m pytest`` runs the files holding the tests (as SWE-bench's harness does: one
    test id pytest cannot find would stop it from running any), reporting through
    ``--junitxml``. The detail names up to 5 tests that did not pass (failed, or not found).
    All of this must fit in ``timeout`` seconds.
    """

    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    base_commit: str = ""
    timeout: float = 900.0
    python: str = sys.executable

    def __call__(self, workspace: Path, answer: str) -> CheckResult:
        if not workspace.is_dir():
            return CheckResult(False, f"the workspace {workspace} does not exist")
        deadline = time.monotonic() + self.timeout
        with tempfile.TemporaryDirectory(prefix="agentica-swebench-") as tmp:
            trial = _Trial(self, Path(tmp), deadline)
            try:
                return trial.judge(workspace)
            except _TimedOut as error:
                return CheckResult(
                    False,
                    f"timed out after {self.timeout:g} s while {error.step} "
                    "(SWEBenchCheck(timeout=...) allows more)",
                )


_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_HIDDEN_VARIABLES = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_CURRENT_TEST",
)


class _Trial:
    """One run of a ``SWEBenchCheck`` in the temporary folder ``root``."""

    def __init__(self, check: SWEBenchCheck, root: Path, deadline: float) -> None:
        self.check = check
        self.root = root
        self.repo = root / "repo"
        self.venv = root / "venv"
        self.deadline = deadline
        self.notes: list[str] = []

    def judge(self, workspace: Path) -> CheckResult:
        try:
            shutil.copytree(workspace, self.repo, symlinks=True, ignore=_special_files)
        except (OSError, shutil.Error) as error:
            return CheckResult(False, f"the workspace could not be copied: {error}")
        self._reset_test_files()
        applied = self._apply_test_patch()
        if not applied.ok:
            return CheckResult(
                False, f"the test patch does not apply: {tail(applied.output, DETAIL_CHARS)}"
            )
        env = self._environment()
        return self._run_tests(env)

    def _step(self, what: str, args: Sequence[str], env: dict[str, str] | None = None) -> Completed:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise _TimedOut(what)
        done = run(args, cwd=self.repo, env=env, timeout=remaining)
        if done.timed_out:
            raise _TimedOut(what)
        return done

    def _reset_test_files(self) -> None:
        """The files the test patch touches as they were at the base commit (the agent may have
        changed them); a file the base commit does not have is removed."""
        paths = sorted({p for pair in _DIFF_HEADER.findall(self.check.test_patch) for p in pair})
        if not self.check.base_commit or not paths or not (self.repo / ".git").exists():
            return
        base = self.check.base_commit
        listed = self._step(
            "resetting test files", ["git", "ls-tree", "--name-only", base, "--", *paths]
        )
        if not listed.ok:
            return
        known = set(listed.output.splitlines())
        if known:
            self._step("resetting test files", ["git", "checkout", base, "--", *sorted(known)])
        for path in paths:
            target = self.repo / path
            if path not in known and (target.is_file() or target.is_symlink()):
                target.unlink()

    def _apply_test_patch(self) -> Completed:
        patch = self.root / "test.patch"
        patch.write_text(self.check.test_patch, encoding="utf-8")
        applied = self._step(
            "applying the test patch", ["git", "apply", "--whitespace=nowarn", str(patch)]
        )
        if applied.ok or shutil.which("patch") is None:
            return applied
        fallback = self._step(
            "applying the test patch", ["patch", "--batch", "--fuzz=5", "-p1", "-i", str(patch)]
        )
        return fallback if fallback.ok else applied

    def _environment(self) -> dict[str, str]:
        """A virtualenv with the repository installed (or on ``PYTHONPATH``); its environment
        variables."""
        venv = ["-m", "venv", "--system-site-packages", "--without-pip", str(self.venv)]
        self._step("creating a virtualenv", [self.check.python, *venv])
        bin_dir = self.venv / ("Scripts" if os.name == "nt" else "bin")
        env = {k: v for k, v in os.environ.items() if k not in _HIDDEN_VARIABLES}
        env |= {
            "VIRTUAL_ENV": str(self.venv),
            "PATH": str(bin_dir) + os.pathsep + env.get("PATH", ""),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_NO_INDEX": "1",
        }
        finds_pytest = (
            "import importlib.util, sys; sys.exit(not importlib.util.find_spec('pytest'))"
        )
        sees_running = False
        if not self._step("creating a virtualenv", [self._python(), "-c", finds_pytest], env).ok:
            sees_running = _see_running_environment(self.venv)
        has_project = any((self.repo / name).is_file() for name in ("pyproject.toml", "setup.py"))
        installed = has_project and self._install(env)
        if has_project and not installed and not sees_running:
            # the base interpreter's setuptools may be too old to build it: try the running one's
            installed = _see_running_environment(self.venv) and self._install(env)
        if not installed:
            roots = [self.repo, self.repo / "src"]
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in roots if p.is_dir())
            if has_project:
                self.notes.append("pip could not install the repository: it is on PYTHONPATH")
        return env

    def _install(self, env: dict[str, str]) -> bool:
        pip = [self._python(), "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
        pip += ["--no-index", "-e", "."]
        installed = self._step("installing the repository", pip, env)
        if not installed.ok and "No module named pip" in installed.output:
            self._step("installing pip", [self._python(), "-m", "ensurepip", "--default-pip"], env)
            installed = self._step("installing the repository", pip, env)
        return installed.ok

    def _python(self) -> str:
        return str(self.venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))

    def _run_tests(self, env: dict[str, str]) -> CheckResult:
        """pytest on the files holding the tests (an id pytest cannot find would stop it from
        running any), then each test's outcome from the JUnit report."""
        ids = list(dict.fromkeys((*self.check.fail_to_pass, *self.check.pass_to_pass)))
        files = dict.fromkeys(test.split("::")[0] for test in ids)
        present = [name for name in files if (self.repo / name).exists()]
        report = self.root / "report.xml"
        args = ["-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(self.repo)]
        args += [f"--junitxml={report}", *present]
        done = self._step("running the tests", [self._python(), *args], env) if present else None
        notes = f" ({'; '.join(self.notes)})" if self.notes else ""
        try:
            outcomes = _junit_outcomes(report) if present else {}
        except (OSError, ElementTree.ParseError):
            output = tail(done.output, DETAIL_CHARS) if done else ""
            return CheckResult(False, f"pytest wrote no report{notes}: {output}")
        failing = [test for test in ids if not outcomes.get(_junit_key(test), False)]
        if not failing:
            return CheckResult(True, f"{len(ids)} tests passed{notes}")
        named = [
            f"{test} ({'failed' if _junit_key(test) in outcomes else 'not found'})"
            for test in failing[:5]
        ]
        more = f" and {len(failing) - 5} more" if len(failing) > 5 else ""
        return CheckResult(
            False,
            f"{len(failing)} of {len(ids)} tests did not pass: {', '.join(named)}{more}{notes}",
        )


def _special_files(folder: str, names: list[str]) -> list[str]:
    """Sockets, pipes and devices a copy would hang on or fail at: left out."""
    skipped = []
    for name in names:
        path = Path(folder, name)
        if not (path.is_symlink() or path.is_dir() or path.is_file()):
            skipped.append(name)
    return skipped


def _see_running_environment(venv: Path) -> bool:
    """Let ``venv`` import the packages of the environment running the check after its own and
    before its base interpreter's (for pytest when the base interpreter has none, for a newer
    setuptools when it cannot build the repository): a ``.pth`` file adding its site-packages.
    False when there is nothing more to see."""
    if sys.prefix == sys.base_prefix:
        return False  # not a virtualenv: --system-site-packages already sees it
    site_dir = Path(
        sysconfig.get_path("purelib", "venv", {"base": str(venv), "platbase": str(venv)})
    )
    running = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    calls = "; ".join(f"site.addsitedir({path!r})" for path in running)
    (site_dir / "zz_agentica_running_environment.pth").write_text(f"import site; {calls}\n")
    return True


def _junit_key(test_id: str) -> str:
    """A pytest test id as its JUnit report names it (``tests/test_a.py::TestX::test_b[1]`` ->
    ``tests.test_a.TestX::test_b[1]``)."""
    address, bracket, params = test_id.partition("[")
    names = address.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1]


def _junit_outcomes(report: Path) -> dict[str, bool]:
    """``{junit key: passed}`` from a pytest JUnit XML report (a skipped test did not pass; an
    expected failure did)."""
    outcomes: dict[str, bool] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        passed = case.find("failure") is None and case.find("error") is None
        skipped = case.find("skipped")
        if skipped is not None and skipped.get("type") != "pytest.xfail":
            passed = False
        outcomes[key] = outcomes.get(key, True) and passed
    return outcomes
