"""Conformance checks for ``CommandBackend`` implementations (``agentica.tools.commands``).

Each check is an async function of a ``CommandBackendCase`` (a fresh backend and its workspace)
that raises ``AssertionError`` saying what is wrong; ``COMMAND_BACKEND_CHECKS`` lists them all
and ``check_command_backend`` runs them, each against a fresh backend from a factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentica.testing.conformance._asserts import NotApplicable, equal, require, shown
from agentica.testing.conformance._asserts import check as _check
from agentica.tools.commands import CommandBackend, CommandHandle, CommandResult

__all__ = [
    "COMMAND_BACKEND_CHECKS",
    "SECRET_VARIABLE",
    "CommandBackendCase",
    "CommandBackendCheck",
    "CommandBackendFactory",
    "check_command_backend",
]

SECRET_VARIABLE = "AGENTICA_CONFORMANCE_SECRET"
"""``check_command_backend`` sets this variable in its own process's environment (a fresh
random value) before it builds the backend; no command may see it."""


@dataclass(slots=True)
class CommandBackendCase:
    """A fresh backend for one check and its workspace.

    The checks run POSIX tools in it: ``sh``, ``echo``, ``cat``, ``env``, ``pwd``, ``sleep``,
    ``seq``, ``yes``, ``head``, ``wc``, ``touch`` and ``setsid``.

    Attributes:
        backend: the backend under test; its workspace is empty.
        workspace: the workspace's real path (no symbolic links) as commands see it (for a
            remote backend, the path on the other computer).
        close: called after the check (close a connection, remove a container).
    """

    backend: CommandBackend
    workspace: str
    close: Callable[[], Awaitable[None]] | None = None


CommandBackendCheck = Callable[[CommandBackendCase], Awaitable[None]]
CommandBackendFactory = Callable[[Path], CommandBackendCase | Awaitable[CommandBackendCase]]
"""Makes a fresh case whose backend runs commands in the given empty directory."""

_WAIT = 60.0  # seconds a check waits for something that takes a fraction of a second
_KILL_TIME = 30.0  # seconds past its timeout (or stop) by which a command must be gone


# ---------------------------------------------------------------------------------- helpers


async def _start(
    case: CommandBackendCase,
    command: str,
    *,
    timeout: float | None = None,
    max_output: int = 10_000,
) -> CommandHandle:
    return await case.backend.start(command, timeout=timeout, max_output=max_output)


async def _finish(handle: CommandHandle, what: str, within: float = _WAIT) -> CommandResult:
    """The result of a command that must end within ``within`` seconds."""
    result = await handle.wait(within)
    if result is None:
        await handle.stop()
        raise AssertionError(f"{what}: still running after {within:g} s")
    return result


async def _run(
    case: CommandBackendCase, command: str, *, timeout: float = _WAIT, max_output: int = 10_000
) -> CommandResult:
    handle = await _start(case, command, timeout=timeout, max_output=max_output)
    return await _finish(handle, f"{command[:80]!r} (timeout {timeout:g} s)", timeout + _KILL_TIME)


async def _output_shows(handle: CommandHandle, text: str, what: str) -> None:
    """Wait until the output so far contains ``text``."""
    deadline = time.monotonic() + _WAIT
    while text not in handle.output():
        if handle.result is not None or time.monotonic() > deadline:
            result = handle.result or await handle.stop()
            raise AssertionError(f"{what}: {text!r} never showed; output {shown(result.output)}")
        await asyncio.sleep(0.05)


# A command that starts three loops each appending to a file in the workspace every 0.1 s: a
# background job (in the command's process group), a ``setsid`` one (its own session) and a
# double-forked one (re-parented); once all three files exist it says so.
_BEATS = ("job.beat", "session.beat", "orphan.beat")
_LOOP = "while :; do echo x >> {0}; sleep 0.1; done"
_SPAWN_BEATS = (
    f"sh -c {shlex.quote(_LOOP.format(_BEATS[0]))} & "
    f"setsid sh -c {shlex.quote(_LOOP.format(_BEATS[1]))} & "
    f"( (sh -c {shlex.quote(_LOOP.format(_BEATS[2]))} &) & ); "
    + "while "
    + " || ".join(f"[ ! -s {name} ]" for name in _BEATS)
    + "; do sleep 0.05; done; echo started"
)


async def _beat_sizes(case: CommandBackendCase) -> list[int]:
    listing = " ".join(_BEATS)
    result = await _run(
        case, f'for f in {listing}; do if [ -f "$f" ]; then wc -c < "$f"; else echo -1; fi; done'
    )
    try:
        return [int(line) for line in result.output.split()]
    except ValueError:
        raise AssertionError(f"could not read the loops' files: {shown(result.output)}") from None


async def _nothing_survives(case: CommandBackendCase, what: str) -> None:
    """The three loops of ``_SPAWN_BEATS`` stopped writing: none of them survived."""
    before = await _beat_sizes(case)
    missing = [name for name, size in zip(_BEATS, before, strict=True) if size <= 0]
    require(not missing, f"{what}: the loops never started ({', '.join(missing)} missing)")
    await asyncio.sleep(1.0)
    after = await _beat_sizes(case)
    survivors = [name for name, old, new in zip(_BEATS, before, after, strict=True) if new != old]
    require(
        not survivors,
        f"{what}: processes the command started are still running (still writing: "
        f"{', '.join(survivors)}); kill its process group and every descendant, including "
        "setsid and double-forked ones",
    )


@contextlib.contextmanager
def _secret_in_environment() -> Iterator[str]:
    """``SECRET_VARIABLE`` set to a fresh value in this process's environment (unless set)."""
    value = os.environ.get(SECRET_VARIABLE)
    if value:
        yield value
        return
    value = "conformance-secret-" + secrets.token_hex(8)
    os.environ[SECRET_VARIABLE] = value
    try:
        yield value
    finally:
        os.environ.pop(SECRET_VARIABLE, None)


# ---------------------------------------------------------------------------------- checks


@_check
async def check_is_a_command_backend(case: CommandBackendCase) -> None:
    """The backend and its handles implement the protocols; handles have distinct ids."""
    require(isinstance(case.backend, CommandBackend), "the backend is not a CommandBackend")
    first, second = await _start(case, "true"), await _start(case, "true")
    for handle in (first, second):
        require(isinstance(handle, CommandHandle), "start() did not return a CommandHandle")
        await _finish(handle, "true")
    require(first.id != second.id, f"two commands have the same id {first.id!r}")
    python = case.backend.python
    if python is not None:
        result = await _run(case, f"{shlex.quote(python)} -c 'print(6 * 7)'")
        equal(f"{python} -c 'print(6 * 7)' (the backend's python)", result.output, "42\n")


@_check
async def check_exit_codes(case: CommandBackendCase) -> None:
    """Exit codes as the shell reports them: 128 + N for a command killed by signal N."""
    expected = {
        "true": 0,
        "false": 1,
        "exit 3": 3,
        "exit 255": 255,
        "no_such_command_for_conformance": 127,
        "kill -TERM $$": 143,
        "kill -KILL $$": 137,
    }
    for command, code in expected.items():
        result = await _run(case, command)
        equal(f"the exit code of {command!r}", result.exit_code, code)
        equal(f"the status of {command!r}", result.status, "exited")
        require(not result.stopped and not result.timed_out, f"{command!r} was not stopped")


@_check
async def check_output_in_order(case: CommandBackendCase) -> None:
    """stdout and stderr are merged in the order written; nothing is cut from small output."""
    result = await _run(case, "echo out; echo err >&2; echo again; printf 'no newline'")
    equal("the output", result.output, "out\nerr\nagain\nno newline")
    equal("total_bytes", result.total_bytes, len(result.output))
    equal("cut_bytes", result.cut_bytes, 0)
    silent = await _run(case, "true")
    equal("the output of 'true'", silent.output, "")
    text = await _run(case, "printf 'caf\\303\\251 \\342\\202\\254\\n'")
    equal("UTF-8 output", text.output, "café €\n")


@_check
async def check_stdin_is_dev_null(case: CommandBackendCase) -> None:
    """A command reading stdin sees end of file at once (it never waits for input)."""
    result = await _run(case, "cat; if read line; then echo got; else echo eof; fi", timeout=20)
    require(not result.timed_out, "a command reading stdin waited for input until its timeout")
    equal("reading stdin", result.output, "eof\n")


@_check
async def check_working_directory(case: CommandBackendCase) -> None:
    """Commands run in the workspace: relative paths are resolved there."""
    result = await _run(case, "pwd -P")
    equal("the working directory (pwd -P)", result.output.strip(), case.workspace)
    place = shlex.quote(case.workspace + "/probe.txt")
    written = await _run(case, f"echo here > probe.txt && cat {place}")
    equal("a file written at a relative path, read from the workspace", written.output, "here\n")


_SHARED_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "SHELL",
        "PYTHONUNBUFFERED",
    }
)
"""What a minimal environment may share with the host's (same value, no secret)."""


@_check
async def check_environment_has_no_secrets(case: CommandBackendCase) -> None:
    """Commands do not inherit the host's environment: a secret there is not passed on."""
    with _secret_in_environment() as secret:
        result = await _run(case, "env")
        plain = await _run(case, f'echo "${{{SECRET_VARIABLE}:-unset}}"')
    require(
        SECRET_VARIABLE not in result.output and secret not in result.output,
        f"a command sees the host's environment variable {SECRET_VARIABLE}: commands must get a "
        "minimal environment (PATH, HOME, LANG), never the host's",
    )
    equal(f"${SECRET_VARIABLE} in a command", plain.output, "unset\n")
    require("PATH=" in result.output, "commands have no PATH")
    # a backend built before the secret was set could still pass the host's environment on
    seen = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    leaked = sorted(
        name for name, value in os.environ.items()
        if name not in _SHARED_VARIABLES and not name.startswith("LC_")
        and len(value) >= 8 and seen.get(name) == value
    )  # fmt: skip
    require(not leaked, f"commands see the host's environment variables {leaked[:5]}")


def _seq_output(count: int) -> str:
    return "".join(f"{i}\n" for i in range(1, count + 1))


@_check
async def check_output_is_capped(case: CommandBackendCase) -> None:
    """Long output keeps its first and last ``max_output // 2`` bytes; the rest is counted."""
    full = _seq_output(200_000)
    result = await _run(case, "seq 1 200000", max_output=2000)
    equal("the exit code of seq", result.exit_code, 0)
    equal("total_bytes", result.total_bytes, len(full))
    equal("cut_bytes", result.cut_bytes, len(full) - 2000)
    require(
        result.output.startswith(full[:1000]) and result.output.endswith(full[-1000:]),
        f"the capped output does not keep the first and last 1000 bytes: {shown(result.output)}",
    )
    cut = result.cut_bytes
    require(
        f"{cut:,}" in result.output or str(cut) in result.output,
        f"the capped output does not say how many bytes were cut ({cut}): {shown(result.output)}",
    )
    require(len(result.output) < 3000, f"the capped output is {len(result.output)} characters")


@_check
async def check_output_memory_is_bounded(case: CommandBackendCase) -> None:
    """200 MB of output cost the caller no more memory than the cap."""
    try:
        import resource
    except ImportError:
        raise NotApplicable("the resource module (peak memory) is missing here") from None
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB (Linux)
    result = await _run(case, "yes | head -c 200000000", timeout=120, max_output=2000)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    equal("the exit code", result.exit_code, 0)
    equal("total_bytes", result.total_bytes, 200_000_000)
    equal("cut_bytes", result.cut_bytes, 200_000_000 - 2000)
    require(grown < 100, f"reading 200 MB of output grew the peak memory by {grown:.0f} MiB")


@_check
async def check_output_streams(case: CommandBackendCase) -> None:
    """``stream()`` gives output while the command runs, then the rest, then ends."""
    handle = await _start(
        case, "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second", timeout=_WAIT
    )
    seen: list[str] = []
    try:
        async with asyncio.timeout(_WAIT):
            async for piece in handle.stream():
                seen.append(piece)
                if "first" in "".join(seen):
                    break
            equal("the status once 'first' was streamed", handle.status, "running")
            await _finish(await _start(case, "touch go"), "touch go")
            async for piece in handle.stream():
                seen.append(piece)
    except TimeoutError:
        await handle.stop()
        raise AssertionError(f"stream() did not end; streamed {shown(seen)}") from None
    result = await _finish(handle, "the streamed command")
    equal("the result", (result.exit_code, result.output), (0, "first\nsecond\n"))
    require("second" in "".join(seen), f"stream() missed the end: {shown(seen)}")
    late = [piece async for piece in handle.stream()]
    equal("stream() of a finished command", "".join(late), "first\nsecond\n")


@_check
async def check_wait_and_stop(case: CommandBackendCase) -> None:
    """``wait`` returns None while running; ``stop`` of an ended command keeps its result."""
    handle = await _start(case, "echo begin; while [ ! -e go ]; do sleep 0.05; done; exit 4")
    require(await handle.wait(0.3) is None, "wait(0.3) returned a result for a running command")
    equal("the status of a running command", handle.status, "running")
    require(handle.result is None, "result is set while the command runs")
    await _output_shows(handle, "begin", "output() of a running command")
    await _finish(await _start(case, "touch go"), "touch go")
    result = await _finish(handle, "the command")
    equal("the exit code", result.exit_code, 4)
    ended = handle.result
    if ended is None:
        raise AssertionError("result is None once the command ended")
    equal("result once it ended", (ended.exit_code, ended.output), (4, result.output))
    again = await handle.stop()
    equal("stop() of an ended command", (again.exit_code, again.stopped, handle.status), (
        4, False, "exited",
    ))  # fmt: skip


@_check
async def check_timeout_kills_everything(case: CommandBackendCase) -> None:
    """A command past its timeout is killed with its background jobs, ``setsid`` and
    double-forked processes; the result says it timed out."""
    started = time.monotonic()
    handle = await _start(case, _SPAWN_BEATS + "; sleep 1000", timeout=3)
    result = await _finish(handle, "a command with a 3 s timeout", 3 + _KILL_TIME)
    took = time.monotonic() - started
    equal("the status", (result.status, result.timed_out, result.stopped), (
        "timed_out", True, False,
    ))  # fmt: skip
    require(took >= 2.5, f"the command was killed after {took:.1f} s, before its 3 s timeout")
    require("started" in result.output, f"the loops did not start: {shown(result.output)}")
    await _nothing_survives(case, "after the timeout")


@_check
async def check_stop_kills_everything(case: CommandBackendCase) -> None:
    """``stop()`` kills the command with its background jobs, ``setsid`` and double-forked
    processes; the result says it was stopped."""
    handle = await _start(case, _SPAWN_BEATS + "; sleep 1000")
    await _output_shows(handle, "started", "the command")
    started = time.monotonic()
    result = await handle.stop()
    require(time.monotonic() - started < _KILL_TIME, f"stop() took more than {_KILL_TIME:g} s")
    equal("the status", (result.status, result.stopped, result.timed_out), (
        "stopped", True, False,
    ))  # fmt: skip
    equal("handle.status after stop()", handle.status, "stopped")
    await _nothing_survives(case, "after stop()")
    again = await handle.stop()
    equal("a second stop()", (again.exit_code, again.stopped), (result.exit_code, True))


@_check
async def check_background_jobs_end_with_the_command(case: CommandBackendCase) -> None:
    """A command that exits leaving processes behind does not leave them running."""
    result = await _run(case, _SPAWN_BEATS)
    equal("the exit code", (result.exit_code, result.status), (0, "exited"))
    await _nothing_survives(case, "after the command exited")


@_check
async def check_commands_are_independent(case: CommandBackendCase) -> None:
    """Commands run at once, each with its own output and exit code; stopping one leaves the
    others running."""
    handles = await asyncio.gather(
        *(_start(case, f"sleep 0.{n}; echo id-{n}; exit {n}") for n in range(1, 5))
    )
    results = await asyncio.gather(*(_finish(h, f"command {n}") for n, h in enumerate(handles, 1)))
    got = [(r.exit_code, r.output) for r in results]
    equal("four commands at once", got, [(n, f"id-{n}\n") for n in range(1, 5)])
    equal("their ids", len({h.id for h in handles}), 4)
    first = await _start(case, "echo a; sleep 1000")
    second = await _start(case, "echo b; while [ ! -e go ]; do sleep 0.05; done; echo b-done")
    await _output_shows(first, "a", "the first command")
    stopped = await first.stop()
    require(stopped.stopped, "stop() did not stop the first command")
    equal("the second command once the first was stopped", second.status, "running")
    await _finish(await _start(case, "touch go"), "touch go")
    result = await _finish(second, "the second command")
    equal("the second command's result", (result.exit_code, result.output), (0, "b\nb-done\n"))


COMMAND_BACKEND_CHECKS: tuple[CommandBackendCheck, ...] = (
    check_is_a_command_backend,
    check_exit_codes,
    check_output_in_order,
    check_stdin_is_dev_null,
    check_working_directory,
    check_environment_has_no_secrets,
    check_output_is_capped,
    check_output_memory_is_bounded,
    check_output_streams,
    check_wait_and_stop,
    check_timeout_kills_everything,
    check_stop_kills_everything,
    check_background_jobs_end_with_the_command,
    check_commands_are_independent,
)
"""Every check, in a stable order; parametrize a test over them (``ids=lambda c: c.__name__``)."""


async def check_command_backend(
    factory: CommandBackendFactory,
    checks: Sequence[CommandBackendCheck] = COMMAND_BACKEND_CHECKS,
) -> list[str]:
    """Run ``checks``, each on a fresh case that ``factory`` makes for a new empty directory
    (removed afterwards), with ``SECRET_VARIABLE`` in this process's environment; raise
    ``AssertionError`` listing every failure, else return the names of the checks that did not
    apply."""
    failures: list[str] = []
    skipped: list[str] = []
    with _secret_in_environment():
        for check in checks:
            try:
                await _run_one(factory, check)
            except NotApplicable:
                skipped.append(check.__name__)
            except AssertionError as exc:
                failures.append(f"{check.__name__}: {exc}")
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(checks)} checks failed:\n" + "\n".join(failures)
        )
    return skipped


def _new_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="agentica-conformance-")).resolve()


async def _run_one(factory: CommandBackendFactory, check: CommandBackendCheck) -> None:
    folder = await asyncio.to_thread(_new_folder)
    try:
        made = factory(folder)
        case = made if isinstance(made, CommandBackendCase) else await made
        try:
            await check(case)
        finally:
            if case.close is not None:
                await case.close()
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)
