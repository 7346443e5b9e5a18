"""Every built-in command backend passes the shipped conformance suite
(``agentica.testing.conformance.commands``), the suite catches broken backends, and ``Shell``
runs its tools on a backend it did not build."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agentica.deep.shell import BwrapCommands, LocalCommand, LocalCommands, Shell
from agentica.errors import UsageError
from agentica.messages import RunUsage
from agentica.testing.conformance import (
    COMMAND_BACKEND_CHECKS,
    CommandBackendCase,
    CommandBackendCheck,
    NotApplicable,
    check_command_backend,
)
from agentica.testing.conformance.commands import (
    check_environment_has_no_secrets,
    check_output_is_capped,
    check_stop_kills_everything,
    check_wait_and_stop,
)
from agentica.tools.commands import (
    CappedOutput,
    CommandBackend,
    CommandResult,
    CommandStatus,
)
from agentica.tools.context import RunContext

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")


def local(workspace: Path) -> CommandBackendCase:
    return CommandBackendCase(LocalCommands(workspace, kill_grace=0.3), workspace=str(workspace))


async def bwrap(workspace: Path) -> CommandBackendCase:
    try:
        backend = BwrapCommands(workspace, kill_grace=0.3)
        await backend.sandboxed()
    except UsageError as exc:  # bubblewrap missing, or it cannot create namespaces here
        pytest.skip(str(exc))
    return CommandBackendCase(backend, workspace=str(workspace))


BACKENDS: dict[str, Callable[[Path], object]] = {"local": local, "bwrap": bwrap}


@pytest.mark.parametrize("check", COMMAND_BACKEND_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_builtin_backends_conform(backend: str, check: CommandBackendCheck) -> None:
    factory = local if backend == "local" else bwrap
    try:
        skipped = await check_command_backend(factory, [check])
    except NotApplicable as exc:  # pragma: no cover - only where resource is missing
        pytest.skip(str(exc))
    if skipped:
        pytest.skip(f"{check.__name__} does not apply here")


# ------------------------------------------------------------------ the suite catches bad ones


class LeakyCommands(LocalCommands):
    """Passes the host's whole environment to its commands (a common mistake)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, env=dict(os.environ), kill_grace=0.3)


class UncappedCommands(LocalCommands):
    """Keeps all of a command's output, whatever ``max_output`` says."""

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> LocalCommand:
        return await super().start(command, timeout=timeout, max_output=10**9)


async def test_the_suite_catches_a_backend_that_leaks_the_environment() -> None:
    def leaky(workspace: Path) -> CommandBackendCase:
        return CommandBackendCase(LeakyCommands(workspace), workspace=str(workspace))

    with pytest.raises(AssertionError, match="AGENTICA_CONFORMANCE_SECRET"):
        await check_command_backend(leaky, [check_environment_has_no_secrets])


async def test_the_suite_catches_a_backend_that_does_not_cap_output() -> None:
    def uncapped(workspace: Path) -> CommandBackendCase:
        return CommandBackendCase(
            UncappedCommands(workspace, kill_grace=0.3), workspace=str(workspace)
        )

    with pytest.raises(AssertionError, match="check_output_is_capped: cut_bytes"):
        await check_command_backend(uncapped, [check_output_is_capped])


class GroupKillCommands:
    """A backend of one's own, written the obvious way: each command in its own process group,
    killed with ``killpg``. A ``setsid`` child escapes that, and the suite must say so."""

    python = None

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ids = itertools.count(1)

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> GroupKillCommand:
        pipe = Pipe(CappedOutput(max_output))
        transport, _ = await asyncio.get_running_loop().subprocess_exec(
            lambda: pipe, "/bin/sh", "-c", command, cwd=self.root,
            env={"PATH": os.environ["PATH"]}, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        return GroupKillCommand(f"g{next(self.ids)}", transport, pipe)


class Pipe(asyncio.SubprocessProtocol):
    def __init__(self, output: CappedOutput) -> None:
        self.output = output
        self.exited = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.output.feed(data if isinstance(data, bytes) else data.encode())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def process_exited(self) -> None:
        self.exited.set()  # an escaped child may still hold the pipe: do not wait for it

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport.close()  # exited, and the pipe is closed


class GroupKillCommand:
    def __init__(self, id: str, transport: asyncio.SubprocessTransport, pipe: Pipe) -> None:
        self.id = id
        self.transport = transport
        self.pipe = pipe
        self.stopped = False
        self.started = time.monotonic()

    @property
    def status(self) -> CommandStatus:
        if self.transport.get_returncode() is None:
            return "running"
        return "stopped" if self.stopped else "exited"

    @property
    def result(self) -> CommandResult | None:
        code = self.transport.get_returncode()
        if code is None:
            return None
        output = self.pipe.output
        return CommandResult(
            exit_code=code if code >= 0 else 128 - code, output=output.text(),
            total_bytes=output.total, cut_bytes=output.cut, stopped=self.stopped,
            duration=time.monotonic() - self.started,
        )  # fmt: skip

    def output(self) -> str:
        return self.pipe.output.text()

    def stream(self) -> AsyncIterator[str]:
        return self.pipe.output.stream()

    async def wait(self, timeout: float | None) -> CommandResult | None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.pipe.exited.wait(), timeout)
        return self.result

    async def stop(self) -> CommandResult:
        if self.transport.get_returncode() is None:
            self.stopped = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.transport.get_pid(), signal.SIGKILL)
        await self.pipe.exited.wait()
        self.transport.close()
        result = self.result
        assert result is not None
        return result


def kill_processes_in(folder: Path) -> None:
    """SIGKILL every process whose working directory is ``folder``."""
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if name.isdigit() and os.readlink(f"/proc/{name}/cwd") == str(folder):
                os.kill(int(name), signal.SIGKILL)


async def test_the_suite_catches_a_backend_that_leaves_setsid_children(tmp_path: Path) -> None:
    backend = GroupKillCommands(tmp_path)
    assert isinstance(backend, CommandBackend)
    case = CommandBackendCase(backend, workspace=str(tmp_path))
    try:
        await check_wait_and_stop(case)  # the obvious way does this much right
        with pytest.raises(AssertionError, match=r"still running \(still writing: session.beat\)"):
            await check_stop_kills_everything(case)
    finally:
        await asyncio.to_thread(kill_processes_in, tmp_path)


# ------------------------------------------------------------------ Shell(backend=...)


class CountingCommands(LocalCommands):
    """A backend of one's own: the built-in one, counting the commands it ran."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, kill_grace=0.3)
        self.commands: list[str] = []

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> LocalCommand:
        self.commands.append(command)
        return await super().start(command, timeout=timeout, max_output=max_output)


async def test_shell_runs_its_tools_on_the_given_backend(tmp_path: Path) -> None:
    backend = CountingCommands(tmp_path)
    assert isinstance(backend, CommandBackend)
    shell = Shell(backend=backend, python=True, max_output=200, operations_end="session")
    assert shell.root is None and not await shell.sandboxed()
    assert await shell.execute("echo hi; exit 2") == "exit code 2\nhi\n"
    assert "42" in await shell.run_python("print(6 * 7)")
    assert "output cut" in await shell.execute("seq 1 1000")
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), user_id="u", session_id="s")
    await shell.start_command(ctx, "echo started; exec sleep 300")
    assert (await shell.stop_command(ctx, "cmd1")).startswith("cmd1 was stopped")
    assert len(backend.commands) == 4 and backend.commands[0] == "echo hi; exit 2"
    assert "print(6 * 7)" in backend.commands[1]
    await shell.aclose()


def test_shell_refuses_built_in_options_with_a_backend_of_ones_own(tmp_path: Path) -> None:
    backend = LocalCommands(tmp_path)
    with pytest.raises(UsageError, match="sandbox, allow_network would have no effect"):
        Shell(backend=backend, sandbox="bwrap", allow_network=True)
    with pytest.raises(UsageError, match="root"):
        Shell(tmp_path, backend=backend)
    with pytest.raises(UsageError, match=r"a root .* or a backend"):
        Shell()
