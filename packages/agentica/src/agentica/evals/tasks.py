"""Evaluation tasks: ``EvalTask`` (what the agent is asked, the workspace it starts in, the check
that decides pass or fail) and ``load_tasks``, which reads task sets in three formats.

- ``agentica``: JSONL, one task a line (``id``, ``prompt``, ``files``, ``check``, ``answer``,
  ``metadata``, ``solution``); ``task_set(name)`` finds the sets shipped with agentica.
- ``gaia``: GAIA's layout, a folder with ``metadata.jsonl`` and the attached files.
- ``swebench``: SWE-bench instances (``.json`` or ``.jsonl``); their repositories are local git
  clones (``repos=`` or ``AGENTICA_SWEBENCH_REPOS``), never downloaded.

Loading and ``EvalTask.setup`` block (the runner calls them in a worker thread).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, get_args

from agentica.errors import UsageError
from agentica.evals._process import run, tail
from agentica.evals.checks import (
    AllChecks,
    Check,
    CommandCheck,
    ExpectedAnswer,
    NoReferenceCheck,
    SWEBenchCheck,
)

__all__ = ["REPOS_VARIABLE", "EvalTask", "TaskFormat", "load_tasks", "task_set", "task_sets"]

TaskFormat = Literal["auto", "agentica", "gaia", "swebench"]
REPOS_VARIABLE = "AGENTICA_SWEBENCH_REPOS"
"""The environment variable naming the folder of SWE-bench repositories when ``repos`` is not
given: it holds one git repository per ``owner/name``, named ``owner__name``."""

SETS = Path(__file__).parent / "sets"
_FORMATS_HELP = (
    "the formats are: agentica (a .jsonl file, one task a line with 'id' and 'prompt'), "
    "gaia (a folder with metadata.jsonl, or that file) and swebench (a .json or .jsonl file of "
    "instances with 'instance_id'); pass format=... to choose"
)
_GIT_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalTask:
    """One task of an evaluation: a prompt, the workspace it starts from, and its check.

    Attributes:
        id: unique within its set.
        prompt: what the agent is asked.
        files: relative path -> content, written into the workspace (after ``source``).
        source: a folder whose contents are copied into the workspace first (a repository
            snapshot), or one file copied into it (a GAIA attachment); with ``revision``, a git
            repository checked out instead.
        revision: a commit of the git repository ``source``: the workspace becomes a clean
            checkout of it (SWE-bench's ``base_commit``). Later commits are not reachable from
            any branch, tag or reflog of the checkout.
        check: decides pass or fail after the run (``agentica.evals.checks``).
        metadata: anything else about the task (``{"level": 2}``, ``{"kind": "edit"}``).
        solution: a reference solution, a shell command run in the workspace (``solve``); its
            stdout is the answer. Used to validate task sets, never shown to the agent.
    """

    id: str
    prompt: str
    files: Mapping[str, str | bytes] = field(default_factory=dict, hash=False)
    source: Path | None = None
    revision: str | None = None
    check: Check = field(hash=False)
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)
    solution: str | None = None

    def setup(self, workspace: Path) -> None:
        """Prepare ``workspace`` for the task: check out or copy ``source``, write ``files``.

        Blocking. Raises ``UsageError`` (naming the task and the path) for a file path that is
        absolute, goes up with ``..`` or through a symbolic link, for a ``source`` symbolic
        link pointing outside it, and for a missing source or commit.
        """
        if self.revision is not None:
            _checkout(self, workspace)
        elif self.source is not None:
            _copy_source(self, workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        for path, content in self.files.items():
            _write(self.id, workspace, path, content)

    def solve(self, workspace: Path, *, timeout: float = 600.0) -> str:
        """Run the reference solution in the prepared ``workspace``; return its stdout, stripped
        (the answer, for a task checked by its answer). Blocking.

        Raises ``UsageError`` when the task has no solution or the solution fails.
        """
        if not self.solution:
            raise UsageError(f"task {self.id!r} has no reference solution ('solution')")
        done = run(["sh", "-c", self.solution], cwd=workspace, timeout=timeout, stdout_only=True)
        if not done.ok:
            status = "timed out" if done.timed_out else f"exit status {done.returncode}"
            raise UsageError(
                f"task {self.id!r}: its reference solution failed ({status}): "
                f"{tail(done.output.strip(), 1000)}; fix the task's 'solution'"
            )
        return done.output.strip()


# ---------------------------------------------------------------------------------------------
# Preparing the workspace


def _relative(task_id: str, path: str) -> PurePosixPath:
    """``path`` as a relative path that stays inside the workspace, or ``UsageError``."""
    why = ""
    if not path or "\0" in path:
        why = "is empty or holds a NUL character"
    elif PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
        why = "is absolute"
    elif ".." in PurePosixPath(path.replace("\\", "/")).parts:
        why = "goes up with '..'"
    elif not PurePosixPath(path).parts or PurePosixPath(path).parts == (".",):
        why = "names the workspace itself"
    if why:
        raise UsageError(
            f"task {task_id!r}: the file path {path!r} {why}; "
            "name files relative to the workspace, like 'data/input.csv'"
        )
    return PurePosixPath(path)


def _write(task_id: str, workspace: Path, path: str, content: str | bytes) -> None:
    parts = _relative(task_id, path).parts
    current = workspace
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise UsageError(
                f"task {task_id!r}: the file path {path!r} goes through the symbolic link "
                f"{current.relative_to(workspace)} in the workspace; write the file elsewhere"
            )
    if current.is_dir():
        raise UsageError(f"task {task_id!r}: the file path {path!r} is a folder in the workspace")
    current.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        current.write_bytes(content)
    else:
        current.write_text(content, encoding="utf-8")


def _copy_source(task: EvalTask, workspace: Path) -> None:
    source = task.source
    assert source is not None
    if source.is_file():
        workspace.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, workspace / source.name)
        return
    if not source.is_dir():
        raise UsageError(f"task {task.id!r}: its source {source} does not exist")
    root = source.resolve()
    for folder, dirs, names in os.walk(source):
        for name in [*dirs, *names]:
            link = Path(folder, name)
            if link.is_symlink() and not _stays_inside(link, root):
                raise UsageError(
                    f"task {task.id!r}: the source {source} holds the symbolic link "
                    f"{link.relative_to(source)} pointing outside it (or by an absolute path); "
                    "replace it with a copy or a relative link"
                )
    shutil.copytree(source, workspace, symlinks=True, dirs_exist_ok=True)


def _stays_inside(link: Path, root: Path) -> bool:
    """Whether the symbolic link ``link`` is relative and leads to a place inside ``root``."""
    target = os.readlink(link)
    return not os.path.isabs(target) and (link.parent / target).resolve().is_relative_to(root)


def _git(task: EvalTask, args: list[str], cwd: Path, doing: str) -> None:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    try:
        done = run(["git", *args], cwd=cwd, env=env, timeout=_GIT_TIMEOUT)
    except OSError as error:
        raise UsageError(
            f"task {task.id!r} needs git to check out its repository: {error}"
        ) from None
    if not done.ok:
        raise UsageError(f"task {task.id!r}: {doing} failed: {tail(done.output.strip(), 1000)}")


def _checkout(task: EvalTask, workspace: Path) -> None:
    """The workspace becomes a clean checkout of ``task.revision`` of the repository
    ``task.source``; refs and reflogs that could lead to later commits are removed."""
    source, revision = task.source, task.revision
    assert revision is not None
    if source is None or not source.is_dir():
        repo = task.metadata.get("repo")
        fetch = f"clone https://github.com/{repo} there" if repo else "put the repository there"
        raise UsageError(
            f"task {task.id!r}: no git repository at {source} to check out {revision} from; "
            f"{fetch} (repositories are never downloaded)"
        )
    if workspace.exists() and any(workspace.iterdir()):
        raise UsageError(
            f"task {task.id!r}: the workspace {workspace} must be empty to check out a repository"
        )
    workspace.parent.mkdir(parents=True, exist_ok=True)
    clone = ["clone", "--quiet", "--no-hardlinks", "--no-checkout", str(source.resolve())]
    _git(task, [*clone, str(workspace)], workspace.parent, f"cloning {source}")
    checkout = ["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", revision]
    _git(task, checkout, workspace, f"checking out commit {revision} of {source}")
    _git(task, ["remote", "remove", "origin"], workspace, "removing the remote")
    forget = (
        "git for-each-ref --format='delete %(refname)' | git update-ref --stdin"
        " && git reflog expire --expire=now --all"
    )
    done = run(["sh", "-c", forget], cwd=workspace, timeout=_GIT_TIMEOUT)
    if not done.ok:
        raise UsageError(
            f"task {task.id!r}: removing the later commits' refs failed: {done.output}"
        )


# ---------------------------------------------------------------------------------------------
# Loading


def task_sets() -> list[str]:
    """The names of the task sets shipped with agentica (``files``, ``docs``)."""
    return sorted(path.stem for path in SETS.glob("*.jsonl"))


def task_set(name: str) -> Path:
    """The path of the task set ``name`` shipped with agentica, for ``load_tasks``."""
    if name not in task_sets():
        raise UsageError(
            f"no task set {name!r} ships with agentica; the sets are: {', '.join(task_sets())} "
            "(or pass the path of a task file)"
        )
    return SETS / f"{name}.jsonl"


def load_tasks(
    path: str | os.PathLike[str],
    *,
    format: TaskFormat = "auto",
    repos: str | os.PathLike[str] | None = None,
    limit: int | None = None,
) -> list[EvalTask]:
    """The tasks of the task set at ``path``, in file order (the first ``limit`` of them).

    ``format="auto"`` tells the format from ``path``: a folder with ``metadata.jsonl`` is GAIA;
    a ``.json`` or ``.jsonl`` file whose first object has ``instance_id`` holds SWE-bench
    instances; a ``.jsonl`` file whose first object has ``task_id`` and ``Question`` is GAIA's
    ``metadata.jsonl``; another ``.jsonl`` file is agentica's format. ``repos`` (SWE-bench
    only; default: the environment variable ``AGENTICA_SWEBENCH_REPOS``) is the folder of the
    instances' git repositories, named ``owner__name``. Blocking.

    Raises ``UsageError`` naming the file, the line (or item) and what is wrong.
    """
    where = Path(path)
    if not where.exists():
        raise UsageError(f"no task file or folder at {where}")
    if limit is not None and limit < 0:
        raise UsageError(f"limit must be 0 or more, not {limit}")
    chosen = _detect(where) if format == "auto" else format
    if chosen == "agentica":
        loaded = _load_agentica(where)
    elif chosen == "gaia":
        loaded = _load_gaia(where)
    elif chosen == "swebench":
        loaded = _load_swebench(where, _repos_folder(repos))
    else:
        raise UsageError(
            f"unknown format {format!r}; the formats are {', '.join(get_args(TaskFormat))}"
        )
    tasks: list[EvalTask] = []
    seen: dict[str, str] = {}
    for place, task in loaded:
        if task.id in seen:
            raise UsageError(f"{place}: the id {task.id!r} is already used ({seen[task.id]})")
        seen[task.id] = place
        tasks.append(task)
    if not tasks:
        raise UsageError(f"{where} holds no tasks")
    return tasks if limit is None else tasks[:limit]


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{path} is not UTF-8 text: {error}") from None
    except OSError as error:
        raise UsageError(f"cannot read the task file {path}: {error}") from None


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(place, object)`` for each line of a JSONL file; blank lines and ``//`` lines are
    skipped."""
    for number, line in enumerate(_read_text(path).splitlines(), 1):
        text = line.strip()
        if text and not text.startswith("//"):
            place = f"{path}, line {number}"
            yield place, _json_object(text, place)


def _json_object(text: str, place: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"{place}: not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{place}: expected a JSON object, found {type(value).__name__}")
    return value


def _first_object(path: Path) -> dict[str, Any] | None:
    """The first object of a ``.json`` list or a JSONL file, ``None`` when there is none or it
    does not parse (the format's loader then says what is wrong)."""
    try:
        if path.suffix == ".json":
            value = json.loads(_read_text(path))
            first = value[0] if isinstance(value, list) and value else value
        else:
            first = next(_lines(path))[1]
    except (UsageError, json.JSONDecodeError, StopIteration):
        return None
    return first if isinstance(first, dict) else None


def _detect(path: Path) -> Literal["agentica", "gaia", "swebench"]:
    if path.is_dir():
        if (path / "metadata.jsonl").is_file():
            return "gaia"
        raise UsageError(f"{path} is a folder without metadata.jsonl; {_FORMATS_HELP}")
    first = _first_object(path) if path.suffix in (".json", ".jsonl") else None
    if first is not None and "instance_id" in first:
        return "swebench"
    if first is not None and {"task_id", "Question"} <= first.keys():
        return "gaia"
    if path.suffix == ".jsonl" and (first is None or "prompt" in first):
        return "agentica"
    keys = f" (its first object has the keys {', '.join(first)})" if first else ""
    raise UsageError(f"cannot tell the format of {path}{keys}; {_FORMATS_HELP}")


def _required(obj: Mapping[str, Any], key: str, place: str) -> str:
    """``obj[key]``, a non-empty string, or ``UsageError``."""
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        found = "missing" if value is None else f"{type(value).__name__} {value!r:.60}"
        raise UsageError(f"{place}: '{key}' must be a non-empty string ({found})")
    return value


def _optional(obj: Mapping[str, Any], key: str, place: str) -> str | None:
    """``obj[key]`` when given (a non-empty string, or ``UsageError``), else ``None``."""
    return None if obj.get(key) is None else _required(obj, key, place)


# --- agentica JSONL


_AGENTICA_KEYS = ("id", "prompt", "files", "check", "answer", "metadata", "solution")


def _load_agentica(path: Path) -> list[tuple[str, EvalTask]]:
    return [(place, _agentica_task(obj, place)) for place, obj in _lines(path)]


def _agentica_task(obj: dict[str, Any], place: str) -> EvalTask:
    unknown = [key for key in obj if key not in _AGENTICA_KEYS]
    if unknown:
        raise UsageError(
            f"{place}: unknown key {unknown[0]!r}; the keys are {', '.join(_AGENTICA_KEYS)}"
        )
    task_id = _required(obj, "id", place)
    prompt = _required(obj, "prompt", place)
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise UsageError(f"{place}: 'metadata' must be an object")
    return EvalTask(
        id=task_id,
        prompt=prompt,
        files=_agentica_files(obj.get("files", {}), task_id, place),
        check=_agentica_check(obj, place),
        metadata=metadata,
        solution=_optional(obj, "solution", place),
    )


def _agentica_files(files: object, task_id: str, place: str) -> dict[str, str]:
    if not isinstance(files, dict):
        raise UsageError(f"{place}: 'files' must be an object mapping relative paths to text")
    for name, text in files.items():
        if not isinstance(text, str):
            raise UsageError(
                f"{place}: 'files' maps {name!r} to {type(text).__name__}; give the file's text"
            )
        try:
            _relative(task_id, name)
        except UsageError as error:
            raise UsageError(f"{place}: {error}") from None
    return files


def _agentica_check(obj: dict[str, Any], place: str) -> Check:
    command = _optional(obj, "check", place)
    answer = obj.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = str(answer)
    if answer is not None and (not isinstance(answer, str) or not answer.strip()):
        raise UsageError(f"{place}: 'answer' must be a non-empty string or a number")
    checks: list[Check] = []
    if command is not None:
        checks.append(CommandCheck(command))
    if answer is not None:
        checks.append(ExpectedAnswer(answer))
    if not checks:
        raise UsageError(
            f"{place}: a task needs 'check' (a shell command that exits with 0 when the task "
            "is solved) or 'answer' (the expected final answer), or both"
        )
    return checks[0] if len(checks) == 1 else AllChecks(tuple(checks))


# --- GAIA


def _load_gaia(path: Path) -> list[tuple[str, EvalTask]]:
    metadata = path / "metadata.jsonl" if path.is_dir() else path
    if not metadata.is_file():
        raise UsageError(f"{path} has no metadata.jsonl (GAIA's layout); {_FORMATS_HELP}")
    return [(place, _gaia_task(obj, metadata.parent, place)) for place, obj in _lines(metadata)]


def _gaia_task(obj: dict[str, Any], folder: Path, place: str) -> EvalTask:
    task_id = _required(obj, "task_id", place)
    question = _required(obj, "Question", place)
    prompt, source, metadata = question.strip(), None, {}
    level = obj.get("Level")
    if level is not None:
        metadata["level"] = int(level) if str(level).isdigit() else level
    file_name = obj.get("file_name") or ""
    if file_name:
        if not isinstance(file_name, str) or len(_relative(task_id, file_name).parts) != 1:
            raise UsageError(
                f"{place}: 'file_name' must be the name of a file next to metadata.jsonl"
            )
        source = folder / file_name
        if not source.is_file():
            raise UsageError(f"{place}: the attached file {file_name} is not in {folder}")
        metadata["file_name"] = file_name
        prompt += (
            f"\n\nThe file {file_name} that comes with this question is in the current folder."
        )
    expected = obj.get("Final answer")
    expected = None if expected is None else str(expected).strip()
    if expected in (None, "", "?"):
        check: Check = NoReferenceCheck(
            "no reference answer (GAIA's test split keeps them private)"
        )
        solution = None
    else:
        check, solution = ExpectedAnswer(expected), f"printf '%s\\n' {shlex.quote(expected)}"
    return EvalTask(
        id=task_id, prompt=prompt, source=source, check=check, metadata=metadata, solution=solution
    )


# --- SWE-bench


def _repos_folder(repos: str | os.PathLike[str] | None) -> Path:
    folder = repos if repos is not None else os.environ.get(REPOS_VARIABLE)
    if not folder:
        raise UsageError(
            "SWE-bench instances need local clones of their repositories (nothing is "
            f"downloaded): pass repos=<folder> or set {REPOS_VARIABLE} to a folder holding one "
            "git repository per instance repository, named owner__name (astropy__astropy)"
        )
    if not Path(folder).is_dir():
        raise UsageError(f"the SWE-bench repositories folder {folder} does not exist")
    return Path(folder)


def _load_swebench(path: Path, repos: Path) -> list[tuple[str, EvalTask]]:
    if path.suffix == ".json":
        try:
            items = json.loads(_read_text(path))
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}: not valid JSON ({error})") from None
        if not isinstance(items, list):
            raise UsageError(f"{path}: expected a JSON list of SWE-bench instances")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise UsageError(f"{path}, item {index}: expected a JSON object")
        objects = [(f"{path}, item {index}", item) for index, item in enumerate(items)]
    else:
        objects = list(_lines(path))
    return [(place, _swebench_task(obj, repos, place)) for place, obj in objects]


def _test_ids(obj: dict[str, Any], key: str, place: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise UsageError(f"{place}: '{key}' is not a JSON list ({error})") from None
    if not isinstance(value, list) or not all(isinstance(test, str) for test in value):
        raise UsageError(f"{place}: '{key}' must be a list of pytest test ids")
    return tuple(value)


def _swebench_task(obj: dict[str, Any], repos: Path, place: str) -> EvalTask:
    instance_id, repo, base_commit, problem, test_patch = (
        _required(obj, key, place)
        for key in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch")
    )
    fail_to_pass = _test_ids(obj, "FAIL_TO_PASS", place)
    if not fail_to_pass:
        raise UsageError(f"{place}: 'FAIL_TO_PASS' is empty; it names the tests the fix must pass")
    if repo.count("/") != 1:
        raise UsageError(f"{place}: 'repo' must be owner/name, not {repo!r}")
    metadata: dict[str, Any] = {"repo": repo, "base_commit": base_commit}
    if isinstance(obj.get("hints_text"), str) and obj["hints_text"].strip():
        metadata["hints_text"] = obj["hints_text"]
    patch = _optional(obj, "patch", place)
    return EvalTask(
        id=instance_id,
        prompt=(
            f"{problem.strip()}\n\nThe repository is in the current folder. Change its code so "
            "that it behaves as described above."
        ),
        source=repos / repo.replace("/", "__"),
        revision=base_commit,
        check=SWEBenchCheck(
            test_patch=test_patch,
            fail_to_pass=fail_to_pass,
            pass_to_pass=_test_ids(obj, "PASS_TO_PASS", place),
            base_commit=base_commit,
        ),
        metadata=metadata,
        solution=None if patch is None else _apply_command(patch),
    )


def _apply_command(patch: str) -> str:
    """A shell command applying ``patch`` with ``git apply`` (the patch in a here-document)."""
    marker = "AGENTICA_PATCH_END"
    while marker in patch:
        marker += "_"
    body = patch if patch.endswith("\n") else patch + "\n"
    return f"git apply --whitespace=nowarn <<'{marker}'\n{body}{marker}\n"
