"""The ``Shell`` capability (the shell tools, over a ``CommandBackend``) and ``CodeNotRun``."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import itertools
import os
import re
import shlex
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from agentica.deep.shell.header_row import HeaderSkip, header_skipped
from agentica.deep.shell.hints import (
    COMMON_PACKAGES,
    check_command,
    check_python,
    data_remarks,
    file_states,
    hint,
    missing_imports,
    repair_brackets,
    show_written,
    source_lines,
    tool_stand_ins,
    workspace_paths,
    written_files,
)
from agentica.deep.shell.local import BwrapCommands, LocalCommands, check_limits
from agentica.deep.shell.trace import failed_check, trace_command
from agentica.errors import AgenticaError, ToolError, UsageError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.storage.records import RunRecord
from agentica.tools.call import running_call
from agentica.tools.commands import CommandBackend, CommandHandle, CommandResult
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

__all__ = ["CodeNotRun", "Shell"]

SessionKey = tuple[str | None, str | None]
Sandbox = Literal["none", "bwrap", "auto"]

_CODE_BLOCK = re.compile(r"```[ \t]*(python3?|py|bash|sh|shell|console)[ \t]*\n", re.IGNORECASE)
_PYTHON_FENCES = frozenset({"python", "python3", "py"})
_SHELL_FENCES = frozenset({"bash", "sh", "shell", "console"})
_TIMEOUT_SLACK = 15.0  # seconds past the timeout before the shell stops a command itself
_KEPT_FINISHED = 16  # finished background commands a session keeps listing
_DEFAULT_MEMORY = 4 * 2**30


_TRACE_TIMEOUT = 10.0  # seconds for the traced call (a test's call is quick)


def _noted(result: str, notes: list[str], tool: str) -> str:
    """``result`` of ``tool`` with ``notes`` (remarks on the command, not its output): notes of
    the tool call when it is one (checks that read the output skip them), else after it."""
    call = running_call()
    if call is not None and call.name == tool:
        call.notes.extend(notes)
        return result
    return "".join([result, *(f"\n{note}" for note in notes)])


@dataclass(eq=False, kw_only=True)
class _Operation:
    """A background command: its handle, and why the shell stopped it (once it did)."""

    id: str
    command: str
    run_id: str
    handle: CommandHandle
    started: float
    reason: str | None = None

    def status(self) -> str:
        return _status(self.handle.result, self.reason, self.started)


def _status(result: CommandResult | None, reason: str | None, started: float) -> str:
    """One line: how the command ended (or that it is still running)."""
    if result is None:
        return f"still running after {time.monotonic() - started:.0f} s"
    code = result.exit_code
    if reason is not None and (result.stopped or result.timed_out):
        return f"{reason} (exit code {code})"
    if code > 128 and code - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        return f"exit code {code} (killed by {signal.Signals(code - 128).name})"
    return f"exit code {code}"


def _report(header: str, output: str, code: int | None) -> str:
    text = f"{header}\n{output}" if output else f"{header} (no output)"
    return text + hint(code, output)


def _check_options(
    timeout: float,
    max_timeout: float,
    max_output: int,
    sandbox: str,
    operations_end: str,
    kill_grace: float,
    max_operations: int,
) -> None:
    if not 0 < timeout <= max_timeout:
        raise UsageError("Shell needs 0 < timeout <= max_timeout")
    if max_output < 100:
        raise UsageError("Shell max_output must be at least 100 characters")
    if sandbox not in ("none", "bwrap", "auto"):
        raise UsageError(f"Shell sandbox must be 'none', 'bwrap' or 'auto', not {sandbox!r}")
    if operations_end not in ("run", "session"):
        raise UsageError(f"Shell operations_end must be 'run' or 'session', not {operations_end!r}")
    if kill_grace < 0 or max_operations < 1:
        raise UsageError("Shell needs kill_grace >= 0 and max_operations >= 1")


def _builtin_options(**given: object) -> list[str]:
    """The built-in backend's options given other values than their defaults."""
    defaults: dict[str, object] = {
        "root": None, "env": None, "sandbox": "none", "allow_network": False,
        "max_processes": 1024, "max_memory": _DEFAULT_MEMORY,
    }  # fmt: skip
    return [name for name, value in given.items() if value != defaults[name]]


_PYTHON_FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)(?![\w/-])")


async def _new_python_file(ctx: RunContext[Any]) -> str | None:
    """The ``.py`` file the task names that does not exist yet, when the agent can write files
    (the first such name), else None."""
    if ctx.files is None or "write_file" not in ctx.functions:
        return None
    names: list[str] = _PYTHON_FILE.findall(ctx.input)
    for name in dict.fromkeys(names):
        try:
            if await ctx.files.stat(name) is None:
                return name
        except AgenticaError:
            continue
    return None


async def _replaced_function(ctx: RunContext[Any], code: str) -> tuple[str, str, str] | None:
    """``(file, name, its definition there)`` when ``code`` defines a function that an existing
    ``.py`` file the task names defines otherwise (the model's fix, written in its reply
    instead of into the file), when the agent can edit files; else None."""
    if ctx.files is None or "edit_file" not in ctx.functions:
        return None
    try:
        written = {
            node.name: ast.unparse(node)
            for node in ast.parse(code).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names: list[str] = _PYTHON_FILE.findall(ctx.input)
    for name in dict.fromkeys(names):
        if PurePosixPath(name).name.startswith("test_") or name.endswith("_test.py"):
            continue  # (the tests judge the fix; they are not where it goes)
        try:
            text = await ctx.files.read(name)
            tree = ast.parse(text)
        except (AgenticaError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            mine = written.get(node.name)
            source = ast.get_source_segment(text, node)
            if mine is not None and source is not None and mine != ast.unparse(node):
                return name, node.name, source
    return None


class CodeNotRun(Capability):
    """Send back an answer that shows code instead of running it, with the call that runs it.

    Small models often answer with a fenced Python or shell block and stop, so nothing ran. The
    advice depends on the tools the agent has: ``run_python`` for Python, ``execute`` for shell
    commands (and for Python saved to a file); an agent with neither is left alone. ``Shell``
    does this for its agent; ``DeepAgent`` also gives it to its subagents, which get the shell's
    tools but not the ``Shell`` itself.

    Args:
        max_nudges: how many times per run (0: never).
    """

    name = "code_not_run"

    def __init__(self, *, max_nudges: int = 2) -> None:
        self.max_nudges = max_nudges

    async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
        """After a nudge, the next model call runs the code (``run_python`` or ``execute``)."""
        choice: str | None = ctx.state.pop(f"{self.name}.choice", None)
        return choice

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        nudged = int(ctx.state.get(self.name, 0))
        if nudged >= self.max_nudges:
            return None
        found = _CODE_BLOCK.search(message.content or "")
        if found is None:
            return None
        functions = ctx.functions
        language = found.group(1).lower()
        if language in _PYTHON_FENCES and (target := await _new_python_file(ctx)) is not None:
            # seen: "Write fib.py with a function fib(n)" answered with the function in a
            # block; told to run it, the model ran it, and fib.py was never written
            ctx.state[self.name] = nudged + 1
            ctx.state[f"{self.name}.choice"] = "write_file"
            return (
                f"You wrote code in your reply, but the task asks for {target}, which does not "
                f"exist yet: save the code in it with write_file (path {target!r}). Then go on "
                "with the task."
            )
        code = (message.content or "")[found.end() :].split("```", 1)[0]
        if language in _PYTHON_FENCES and (old := await _replaced_function(ctx, code)):
            # seen: fix-leap-year's right is_leap written in the reply; told to run it, the
            # model ran the definition, and dates.py kept the bug
            path, name, source = old
            ctx.state[self.name] = nudged + 1
            ctx.state[f"{self.name}.choice"] = "edit_file"
            return (
                f"You wrote a new {name} in your reply, but {path} still has the old one, so "
                f"nothing changed. Put yours in the file now with edit_file: path {path!r}, "
                f"old_string the old definition as the file has it:\n{source}\nand new_string "
                "your version. Then go on with the task."
            )
        if language in _PYTHON_FENCES and "run_python" in functions:
            how, tool = "call run_python with the code", "run_python"
        elif "execute" not in functions:
            return None
        elif language in _SHELL_FENCES:
            how, tool = "call execute with the command", "execute"
        else:
            how, tool = "save it with a file tool and run it with execute (python file.py)", ""
        ctx.state[self.name] = nudged + 1
        if tool:
            ctx.state[f"{self.name}.choice"] = tool
        return (
            f"You wrote code in your reply but did not run it, so nothing happened. To run it, "
            f"{how}; the standard library is there, third-party packages may not be. Then "
            "go on with the task."
        )


class Shell(Capability):
    """Shell commands in a workspace, and background commands that can be waited for and stopped.

    ```python
    shell = Shell("workspace/", timeout=60, sandbox="auto")
    agent = Agent(model=..., capabilities=[shell])
    ...
    await shell.aclose()  # stops the background commands that are still running
    ```

    Tools: ``execute`` (run a command and return its output and exit code), ``start_command``
    (start a long command in the background and return its id), ``wait_command`` (its output so
    far, or its final output once it finished), ``stop_command`` and ``list_commands``; with
    ``python=True`` also ``run_python``. Background commands belong to the session
    (``RunContext.user_id``, ``session_id``) that started them: another session can neither see
    nor stop them. With ``operations_end="run"`` they are stopped when the run that started them
    ends; with ``"session"`` they live until ``aclose()``.

    The commands run through a ``CommandBackend``: by default the built-in one this shell builds
    from ``root`` and the sandbox options (``LocalCommands``, or ``BwrapCommands`` for
    ``sandbox="bwrap"`` and ``"auto"``), or ``backend=`` your own (a container, a VM, another
    computer). Either way a command never outlives its tool call (``execute``), its background
    command, or the Python process that started it; its output is capped (the first and last
    ``max_output // 2`` bytes kept, the rest counted); and it does not see the parent's
    environment.

    Sandbox: ``"bwrap"`` runs every command under bubblewrap (see ``BwrapCommands``);
    ``"auto"`` uses bubblewrap when it is installed and can create namespaces here (checked once
    per ``Shell``) and otherwise runs commands unsandboxed with a logged warning; ``"none"``
    never sandboxes. The default is ``"none"`` (for ``DeepAgent`` too): commands run as the user
    running agentica, with the network, the whole file system and no resource limits. A
    sandboxed command has no network (``pip install`` fails unless ``allow_network=True``), sees
    no file outside the workspace and the system directories (tools in ``~/.local/bin`` or
    ``/opt`` are missing) and starts some 50-100 ms later. On Debian and Ubuntu the package is
    ``bubblewrap``.

    Args:
        root: the workspace: the commands' working directory and ``HOME`` (the built-in backend).
        backend: run the commands with this ``CommandBackend`` instead of the built-in one
            (then leave out ``root``, ``env``, ``sandbox``, ``allow_network``, ``max_processes``
            and ``max_memory``: they configure the built-in backend).
        timeout: default seconds an ``execute`` command may run before it is stopped.
        max_timeout: the most seconds a model may ask for (``execute`` and ``wait_command``).
        max_output: characters (bytes) of output kept per command: the first and last halves.
        env: environment variables for the commands, added to the minimal environment (``PATH``,
            ``HOME``, ``LANG``, ``PYTHONUNBUFFERED``); the parent's environment is never passed.
        sandbox: ``"none"``, ``"bwrap"`` (bubblewrap, required) or ``"auto"`` (bubblewrap when it
            is installed and works here).
        allow_network: keep the network in the sandbox (without a sandbox it is always there).
        max_processes: the most processes and threads a sandboxed command may have at once (see
            ``BwrapCommands`` for where this holds).
        max_memory: the most bytes of data memory each process of a sandboxed command may use.
        operations_end: ``"run"``: background commands are stopped when the run that started them
            ends; ``"session"``: they run until ``aclose()``.
        kill_grace: seconds between SIGTERM and SIGKILL when a command is stopped.
        max_operations: background commands one session may have running at once.
        background: offer ``start_command``, ``wait_command``, ``stop_command`` and
            ``list_commands`` (leave them out to keep a small model's prompt short).
        python: also offer ``run_python(code)``, which runs Python source with the backend's
            interpreter (the built-in backend: the one running agentica, ``sys.executable``),
            the same way as ``execute``.
        max_code_nudges: how often per run a model that answers with a code block instead of
            running it is told to run it (0: never).
    """

    name = "shell"

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        backend: CommandBackend | None = None,
        timeout: float = 60.0,
        max_timeout: float = 600.0,
        max_output: int = 10_000,
        env: Mapping[str, str] | None = None,
        sandbox: Sandbox = "none",
        allow_network: bool = False,
        max_processes: int = 1024,
        max_memory: int = _DEFAULT_MEMORY,
        operations_end: Literal["run", "session"] = "run",
        kill_grace: float = 2.0,
        max_operations: int = 8,
        background: bool = True,
        python: bool = False,
        max_code_nudges: int = 2,
    ) -> None:
        _check_options(
            timeout, max_timeout, max_output, sandbox, operations_end, kill_grace, max_operations
        )
        self.root: Path | None = None
        self._sandbox: BwrapCommands | None = None
        if backend is None:
            if root is None:
                raise UsageError("Shell needs a root (the workspace directory) or a backend")
            check_limits(max_processes, max_memory)
            backend = self._builtin(
                root, env, sandbox, kill_grace, allow_network, max_processes, max_memory
            )
        elif given := _builtin_options(
            root=root, env=env, sandbox=sandbox, allow_network=allow_network,
            max_processes=max_processes, max_memory=max_memory,
        ):  # fmt: skip
            raise UsageError(
                f"Shell(backend=...) runs the commands with that backend, so {', '.join(given)} "
                "would have no effect: configure the backend instead"
            )
        if python and backend.python is None:
            raise UsageError("Shell(python=True) needs a backend with a Python interpreter")
        self.backend: CommandBackend = backend
        self.max_code_nudges = max_code_nudges
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.max_output = max_output
        self.sandbox = sandbox
        self.operations_end = operations_end
        self.kill_grace = kill_grace
        self.max_operations = max_operations
        self._operations: dict[SessionKey, dict[str, _Operation]] = {}
        self._ids = itertools.count(1)
        self.background = background
        self.python = python
        self._code_not_run = CodeNotRun(max_nudges=max_code_nudges)
        self._tools = self._build_tools()

    def _builtin(
        self,
        root: str | os.PathLike[str],
        env: Mapping[str, str] | None,
        sandbox: Sandbox,
        kill_grace: float,
        allow_network: bool,
        max_processes: int,
        max_memory: int,
    ) -> LocalCommands:
        if sandbox == "none":
            backend = LocalCommands(root, env=env, kill_grace=kill_grace)
        else:
            backend = self._sandbox = BwrapCommands(
                root, env=env, kill_grace=kill_grace, allow_network=allow_network,
                max_processes=max_processes, max_memory=max_memory, fallback=sandbox == "auto",
            )  # fmt: skip
        self.root = backend.root
        return backend

    async def sandboxed(self) -> bool:
        """Whether commands run under bubblewrap (checked once, on first use; ``False`` with a
        backend of your own).

        Raises ``UsageError`` for ``sandbox="bwrap"`` when bubblewrap cannot run here.
        """
        return self._sandbox is not None and await self._sandbox.sandboxed()

    # ------------------------------------------------------------------ commands

    def _limit(self, timeout: float | None) -> float:
        if timeout is None or timeout <= 0:
            return self.timeout
        return min(float(timeout), self.max_timeout)

    async def execute(self, command: str, timeout: float | None = None) -> str:
        """Run ``command`` with ``/bin/sh -c`` in the workspace; its exit code and output.

        Raises ``ToolError`` for a command that cannot run. Cancelling the caller stops the
        command and everything it started.
        """
        if (problem := check_command(command)) is not None:
            raise ToolError(problem)
        result = await self._run(command, timeout)
        trace = await self._trace(result)
        return _noted(result, [] if trace is None else [trace], "execute")

    async def run_python(self, code: str, timeout: float | None = None) -> str:
        """Run Python source ``code`` in the workspace; its exit code and output."""
        if (problem := check_python(code)) is not None:
            raise ToolError(problem)
        code, repairs = repair_brackets(code)
        code, stand_ins = tool_stand_ins(code)
        code, imported = missing_imports(code)
        moved: list[str] = []
        if self.root is not None:  # (a backend elsewhere has its own machine to look at)
            code, moved = await asyncio.to_thread(workspace_paths, code, self.root)
        command = self._python_command(code)
        before = {} if self.root is None else await asyncio.to_thread(file_states, code, self.root)
        started = time.time()
        result = source_lines(await self._run(command, timeout), code)
        remarks: list[str] = []
        written: list[tuple[str, str | None]] = []
        if self.root is not None and (skip := await self._header_skipped(code, result, before)):
            code = skip.code  # (the first run changed no file: running it again is safe)
            command = self._python_command(code)
            result = source_lines(await self._run(command, timeout), code)
            remarks.append(
                f"Your code read the header row of {skip.file} as data ({skip.value!r} is a "
                f"column name, not a number), so it failed. It was run again with line "
                f"{skip.line} changed to skip that row, `{skip.loop}`; the output above is "
                "from that run. Skip the header row yourself next time."
            )
        if self.root is not None:
            remarks += await asyncio.to_thread(data_remarks, code, self.root, started, result)
            written = await asyncio.to_thread(written_files, before, self.root)
        if result.endswith("(no output)") and written:
            result += f"; the code printed nothing, and {show_written(written)}"
        elif result.endswith("(no output)"):
            result += "; the code printed nothing: print() the values you need to see"
        if moved:
            remarks.append(
                f"Your code named {', '.join(moved)} the way the file tools do; it was run with "
                "the path inside the workspace, without the leading /. In code, write paths "
                "without it."
            )
        if repairs:
            remarks.append(
                f"Your code was run with a bracket fixed: {'; '.join(repairs)}. Write the right "
                "bracket yourself next time."
            )
        if stand_ins:
            names = " and ".join(stand_ins)
            remarks.append(
                f"Your code called {names}, which are tools, not Python functions; it was run "
                "with stand-ins that read and write the file defined on an added first line, so "
                "error line numbers count that line. In code, use open() next time."
            )
        if imported:
            names = ", ".join(imported)
            remarks.append(
                f"Your code used {names} without importing it; it was run with `import {names}` "
                "added as line 1, so error line numbers count that line. Write the import "
                "yourself next time."
            )
        notes = [f"({remark})" for remark in remarks]
        if (trace := await self._trace(result)) is not None:
            notes.append(trace)
        return _noted(result, notes, "run_python")

    def _python_command(self, code: str) -> str:
        """The shell command that runs Python ``code`` (``exec``: no shell left behind)."""
        return "exec " + shlex.join([self.backend.python or "python3", "-E", "-s", "-c", code])

    async def _header_skipped(
        self, code: str, output: str, before: dict[str, tuple[int, int] | None]
    ) -> HeaderSkip | None:
        """``code`` put right when it failed on a data file's header row, and only when that
        run changed none of the files the code names (see ``header_row``)."""
        if self.root is None or "Traceback" not in output or "Error: " not in output:
            return None
        skip = await asyncio.to_thread(header_skipped, code, output, self.root)
        if skip is None:
            return None
        written = await asyncio.to_thread(written_files, before, self.root)
        return None if written else skip

    async def _trace(self, output: str) -> str | None:
        """What the call a failed ``assertEqual`` in a test run's ``output`` made did, line
        by line in the workspace's code (see ``trace``), or None."""
        if self.root is None or "AssertionError" not in output:
            return None
        found = await asyncio.to_thread(failed_check, output, self.root)
        if found is None:
            return None
        python = self.backend.python or "python3"
        result, timed_out = await self._finish(trace_command(python, *found), _TRACE_TIMEOUT)
        steps = result.output.strip()
        if timed_out or result.exit_code != 0 or not steps:
            return None
        return (
            f"[trace] What {found[1]} did, line by line, in the code under test:\n{steps}\n"
            "Find the first step whose value is not what it should be: that line is the one "
            "to change."
        )

    async def _finish(self, command: str, limit: float) -> tuple[CommandResult, bool]:
        """Run ``command`` to its end (or its time ``limit``): its result, and whether it was
        stopped for time."""
        handle = await self.backend.start(command, timeout=limit, max_output=self.max_output)
        try:
            result = await handle.wait(limit + self.kill_grace + _TIMEOUT_SLACK)
        except BaseException:
            await asyncio.shield(handle.stop())
            raise
        timed_out = result is None or result.timed_out
        if result is None:  # the backend did not keep the timeout
            result = await handle.stop()
        return result, timed_out

    async def _run(self, command: str, timeout: float | None) -> str:
        limit = self._limit(timeout)
        started = time.monotonic()
        result, timed_out = await self._finish(command, limit)
        reason = f"killed after {limit:g} s timeout"
        header = _status(result, reason, started)
        if timed_out:
            header = (
                f"{header}. The command did not finish in time; for long commands use "
                "start_command, then wait_command."
            )
        return _report(header, result.output, result.exit_code)

    # ------------------------------------------------------------------ background commands

    def _session(self, ctx: RunContext[Any]) -> dict[str, _Operation]:
        return self._operations.setdefault((ctx.user_id, ctx.session_id), {})

    def _find(self, ctx: RunContext[Any], id: str) -> _Operation:
        operations = self._operations.get((ctx.user_id, ctx.session_id), {})
        operation = operations.get(id.strip())
        if operation is None:
            known = ", ".join(operations) or "none"
            raise ToolError(
                f"There is no background command {id!r} in this session (ids: {known}). "
                "Use the id start_command returned, or call list_commands."
            )
        return operation

    def _prune(self, operations: dict[str, _Operation]) -> None:
        finished = [op for op in operations.values() if op.handle.status != "running"]
        for op in finished[: max(0, len(finished) - _KEPT_FINISHED)]:
            del operations[op.id]

    @staticmethod
    async def _stop(operation: _Operation, reason: str) -> CommandResult:
        if operation.reason is None and operation.handle.status == "running":
            operation.reason = reason
        return await operation.handle.stop()

    async def start_command(self, ctx: RunContext[Any], command: str) -> str:
        """Start ``command`` in the background; a message with its id."""
        if (problem := check_command(command)) is not None:
            raise ToolError(problem)
        operations = self._session(ctx)
        self._prune(operations)
        running = [op.id for op in operations.values() if op.handle.status == "running"]
        if len(running) >= self.max_operations:
            raise ToolError(
                f"{len(running)} background commands are already running ({', '.join(running)}). "
                "Stop one with stop_command first."
            )
        handle = await self.backend.start(command, timeout=None, max_output=self.max_output)
        op_id = f"cmd{next(self._ids)}"
        operations[op_id] = _Operation(
            id=op_id, command=command, run_id=ctx.run_id, handle=handle, started=time.monotonic()
        )
        return (
            f"Started background command {op_id}. Call wait_command(id={op_id!r}) to see its "
            f"output, stop_command(id={op_id!r}) to stop it."
        )

    async def wait_command(self, ctx: RunContext[Any], id: str, timeout: float = 30) -> str:
        """Wait up to ``timeout`` s for a background command; its output so far or its result."""
        operation = self._find(ctx, id)
        limit = min(max(float(timeout), 0.0), self.max_timeout)
        result = await operation.handle.wait(limit)
        if result is None:
            elapsed = time.monotonic() - operation.started
            return _report(
                f"{operation.id} is still running (after {elapsed:.0f} s). Output so far:",
                operation.handle.output(),
                None,
            )
        header = f"{operation.id} finished: {operation.status()}"
        return _report(header, result.output, result.exit_code)

    async def stop_command(self, ctx: RunContext[Any], id: str) -> str:
        """Stop a background command and everything it started; its final output."""
        operation = self._find(ctx, id)
        already = operation.handle.status != "running"
        result = await self._stop(operation, "stopped by stop_command")
        state = "had already finished" if already else "was stopped"
        header = f"{operation.id} {state}: {operation.status()}"
        return _report(header, result.output, result.exit_code)

    def list_commands(self, ctx: RunContext[Any]) -> str:
        """The background commands of the run's session, one line each."""
        operations = self._operations.get((ctx.user_id, ctx.session_id), {})
        if not operations:
            return "No background commands. Start one with start_command."
        return "\n".join(
            f"{op.id}: {op.status()}: {op.command[:100]}" for op in operations.values()
        )

    async def aclose(self, user_id: str | None = None, session_id: str | None = None) -> None:
        """Stop the background commands (of one user or session when given) and forget them."""
        stops = []
        for key in list(self._operations):
            if (user_id is None or key[0] == user_id) and (
                session_id is None or key[1] == session_id
            ):
                operations = self._operations.pop(key)
                stops += [
                    self._stop(op, "stopped: the session was closed") for op in operations.values()
                ]
        await asyncio.gather(*stops)

    # ------------------------------------------------------------------ capability hooks

    async def after_run(self, ctx: RunContext[Any], record: RunRecord) -> None:
        if self.operations_end != "run":
            return
        operations = self._operations.get((ctx.user_id, ctx.session_id), {})
        ended = [op for op in operations.values() if op.run_id == ctx.run_id]
        await asyncio.gather(*(self._stop(op, "stopped: the run ended") for op in ended))
        for op in ended:
            operations.pop(op.id, None)

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """A model that shows code in its answer instead of running it is told to run it
        (at most ``max_code_nudges`` times per run; see ``CodeNotRun``)."""
        return await self._code_not_run.review_answer(ctx, message)

    async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
        """After its nudge, the next model call runs the code (see ``CodeNotRun``)."""
        return await self._code_not_run.tool_choice(ctx)

    def tools(self) -> Sequence[ToolLike]:
        return self._tools

    def _build_tools(self) -> list[Function]:
        shell = self
        slack = self.max_timeout + self.kill_grace + 30.0  # the engine's limit: after ours

        async def execute(ctx: RunContext[Any], command: str, timeout: float | None = None) -> str:
            """Run a shell command in the workspace; returns its exit code and output.

            Args:
                command: the command, e.g. "ls -la" or "python script.py".
                timeout: seconds before it is stopped (optional).
            """
            return await shell.execute(command, timeout)

        async def start_command(ctx: RunContext[Any], command: str) -> str:
            """Start a long-running shell command in the background; returns its id.

            Args:
                command: the command, e.g. "python train.py".
            """
            return await shell.start_command(ctx, command)

        async def wait_command(ctx: RunContext[Any], id: str, timeout: float = 30) -> str:
            """Wait for a background command; returns its output and whether it finished.

            Args:
                id: the id start_command returned.
                timeout: seconds to wait.
            """
            return await shell.wait_command(ctx, id, timeout)

        async def stop_command(ctx: RunContext[Any], id: str) -> str:
            """Stop a background command; returns its final output.

            Args:
                id: the id start_command returned.
            """
            return await shell.stop_command(ctx, id)

        async def list_commands(ctx: RunContext[Any]) -> str:
            """List the background commands."""
            return shell.list_commands(ctx)

        async def run_python(ctx: RunContext[Any], code: str) -> str:
            """Run Python code in the workspace; returns what it printed.

            Args:
                code: Python source code (not a shell command); print() what you need.
            """
            return await shell.run_python(code)

        tools = [Function.from_callable(execute, timeout=slack)]
        if self.python:
            tools.append(
                self._with_missing_packages(Function.from_callable(run_python, timeout=slack))
            )
        if self.background:
            tools += [
                Function.from_callable(start_command),
                Function.from_callable(wait_command, timeout=slack),
                Function.from_callable(stop_command, timeout=slack),
                Function.from_callable(list_commands),
            ]
        return tools

    def _with_missing_packages(self, run_python: Function) -> Function:
        """``run_python`` saying which of ``COMMON_PACKAGES`` the built-in backend's interpreter
        lacks: models reach for pandas first; say so before the ImportError."""
        if self.root is None:  # a backend of one's own: its interpreter is not this one
            return run_python
        missing = [m for m in COMMON_PACKAGES if importlib.util.find_spec(m) is None]
        if not missing:
            return run_python
        return run_python.with_options(
            description=f"{run_python.description} Not installed here: "
            f"{', '.join(missing)} (use the standard library)."
        )
