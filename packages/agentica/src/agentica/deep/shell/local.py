"""The built-in command backends: ``LocalCommands`` (this computer, no sandbox) and
``BwrapCommands`` (this computer, under bubblewrap), and their handle ``LocalCommand``."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from agentica.deep.shell.process import Process
from agentica.deep.shell.sandbox import Sandbox, SandboxOptions, minimal_env, probe
from agentica.errors import ToolError, UsageError
from agentica.tools.commands import CommandResult, CommandStatus

__all__ = ["BwrapCommands", "LocalCommand", "LocalCommands"]

logger = logging.getLogger(__name__)


class LocalCommand:
    """A command started by ``LocalCommands`` or ``BwrapCommands`` (a ``CommandHandle``)."""

    def __init__(self, id: str, process: Process, timeout: float | None) -> None:
        self._id = id
        self._process = process
        self._ending: CommandStatus = "exited"  # "timed_out" or "stopped" once it was stopped
        self._result: CommandResult | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        if timeout is not None:
            self._timer = asyncio.get_running_loop().call_later(timeout, self._time_out)

    @property
    def id(self) -> str:
        return self._id

    @property
    def status(self) -> CommandStatus:
        return self._ending if self._process.finished else "running"

    @property
    def result(self) -> CommandResult | None:
        if self._result is None and self._process.finished:
            if self._timer is not None:
                self._timer.cancel()
            code = self._process.returncode
            self._result = self._snapshot(-1 if code is None else code)
        return self._result

    def _snapshot(self, exit_code: int) -> CommandResult:
        output = self._process.output
        return CommandResult(
            exit_code=exit_code,
            output=output.text(),
            total_bytes=output.total,
            cut_bytes=output.cut,
            timed_out=self._ending == "timed_out",
            stopped=self._ending == "stopped",
            duration=self._process.elapsed,
        )

    def output(self) -> str:
        return self._process.output.text()

    def stream(self) -> AsyncIterator[str]:
        return self._process.output.stream()

    async def wait(self, timeout: float | None) -> CommandResult | None:
        if await self._process.wait(timeout):
            return self.result
        return None

    async def stop(self) -> CommandResult:
        if self._process.request_stop():
            self._ending = "stopped"
        await self._process.stop()
        # the supervisor and then the last-resort kill did not end it: say what is known
        return self.result or self._snapshot(128 + signal.SIGKILL)

    def _time_out(self) -> None:
        if self._process.request_stop():
            self._ending = "timed_out"
            self._stopper = asyncio.ensure_future(self._process.stop())


class LocalCommands:
    """Commands run on this computer as the user running agentica, with no sandbox: the
    network, the whole file system and no resource limits (a ``CommandBackend``).

    Every command runs under a small supervisor (``supervisor.py``, see its ``Supervisor``) so
    that a command never outlives its timeout, its ``stop()``, or the Python process that
    started it, even when that process is killed with SIGKILL.

    Environment: commands do not inherit the parent's environment (which holds API keys): they
    get ``PATH`` (the parent's), ``HOME`` (the workspace), ``LANG`` (the parent's, else
    ``C.UTF-8``), ``PYTHONUNBUFFERED=1`` (so background Python programs show their output as
    they go), ``PYTHONDONTWRITEBYTECODE=1`` (no ``__pycache__`` in the workspace, no stale
    bytecode of a file edited within the second), and the ``env`` mapping, which adds to or
    replaces these.

    Args:
        root: the workspace: the commands' working directory and ``HOME``.
        env: environment variables for the commands, added to the minimal environment.
        kill_grace: seconds between SIGTERM and SIGKILL when a command is stopped.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        kill_grace: float = 2.0,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise UsageError(f"Shell root {str(self.root)!r} is not a directory; create it first")
        if kill_grace < 0:
            raise UsageError("Shell needs kill_grace >= 0")
        self.env = minimal_env(self.root, env)
        self.kill_grace = kill_grace
        self.python: str | None = sys.executable or "python3"
        self._ids = itertools.count(1)

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> LocalCommand:
        if "\0" in command:
            raise ToolError("The command contains a NUL character; remove it.")
        argv, cgroup = await self._wrap(["/bin/sh", "-c", command])
        try:
            process = await Process.start(
                argv, cwd=self.root, env=self.env, max_output=max_output,
                grace=self.kill_grace, cgroup=cgroup,
            )  # fmt: skip
        except OSError as exc:
            raise ToolError(
                f"The command could not be started: {exc}. If it is very long, write it to a "
                "script file and run `sh script.sh`."
            ) from None
        return LocalCommand(f"local-{next(self._ids)}", process, timeout)

    async def _wrap(self, argv: list[str]) -> tuple[list[str], str]:
        """The argv to run and the supervisor's pids cgroup argument."""
        return argv, ""


def check_limits(max_processes: int, max_memory: int) -> None:
    if max_processes < 4 or max_memory < 64 * 2**20:
        raise UsageError(
            "Shell needs max_processes >= 4 and max_memory >= 64 MiB (67108864 bytes): a "
            "command needs a few processes and Python itself some memory"
        )


class BwrapCommands(LocalCommands):
    """Commands run on this computer under bubblewrap (a ``CommandBackend``), as
    ``Shell(sandbox="bwrap")`` and ``"auto"`` run them.

    Each command runs in new user, PID, IPC, UTS, cgroup and network namespaces (the network
    only with ``allow_network=True``; it also exposes the host's abstract unix sockets), with
    every capability dropped, no new privileges (setuid programs gain nothing), no nested user
    namespaces, ``--die-with-parent`` and ``--new-session``. The command sees only: ``/usr``,
    ``/bin``, ``/sbin``, ``/lib*`` and ``/etc`` read-only, where every entry of ``/etc`` that
    not everyone may read (``/etc/shadow``, ``/etc/gshadow``, private keys) is empty; the
    interpreter's directories (``sys.prefix``, ``sys.base_prefix``: ``run_python`` runs it),
    read-only; a fresh ``/dev`` and ``/proc`` (its own processes only); a private ``/tmp``; and
    the workspace, writable. ``/home``, ``/root``, ``/run``, ``/var``, ``/opt``, ``/sys`` and the
    host's other files are absent, and the rest of ``/`` is read-only. Inside, the command is
    uid 0 of its own user namespace, mapped to the user running agentica: when that is root, a
    root-only file under the shown system directories is readable (``/etc`` is checked once per
    backend, the other directories not at all), so keep secrets out of them.

    Resource limits, set inside the sandbox before the command starts: ``max_processes``
    (``RLIMIT_NPROC``, processes and threads) and ``max_memory`` (``RLIMIT_DATA``, bytes per
    process), no core files. The kernel never applies ``RLIMIT_NPROC`` to root, so when
    agentica runs as root each command also gets its own pids cgroup (``pids.max =
    max_processes``) where one can be created (a cgroup v1 ``pids`` hierarchy, or cgroup v2
    with ``pids`` enabled below agentica's group); where none can, a warning says that the
    process limit does not hold.

    Whether bubblewrap works here is checked once, on the first command (``sandboxed()``).
    With ``fallback=True`` (``sandbox="auto"``) commands then run unsandboxed, with a logged
    warning, where it does not; otherwise that raises ``UsageError``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        kill_grace: float = 2.0,
        allow_network: bool = False,
        max_processes: int = 1024,
        max_memory: int = 4 * 2**30,
        fallback: bool = False,
    ) -> None:
        super().__init__(root, env=env, kill_grace=kill_grace)
        check_limits(max_processes, max_memory)
        self.options = SandboxOptions(
            allow_network=allow_network, max_processes=max_processes, max_memory=max_memory
        )
        self.fallback = fallback
        self._bwrap = shutil.which("bwrap")
        if not fallback and self._bwrap is None:
            raise UsageError(
                "Shell(sandbox='bwrap') needs bubblewrap, which is not installed: install it "
                "(apt-get install bubblewrap, dnf install bubblewrap) or use sandbox='auto'"
            )
        self._sandbox: Sandbox | None = None
        self._sandboxed: bool | None = None
        self._sandbox_error: str | None = None

    async def sandboxed(self) -> bool:
        """Whether commands run under bubblewrap (checked once, on first use).

        Raises ``UsageError`` without ``fallback`` when bubblewrap cannot run here.
        """
        if self._sandboxed is not None:
            return self._sandboxed
        if self._sandbox_error is None:
            found: Sandbox | str = "bubblewrap (bwrap) is not installed"
            if self._bwrap is not None:
                found = await probe(self._bwrap, self.root, self.options, self.env)
            if isinstance(found, Sandbox):
                self._sandbox, self._sandboxed = found, True
                return True
            self._sandbox_error = found
        if not self.fallback:
            raise UsageError(
                f"Shell(sandbox='bwrap') cannot run commands: {self._sandbox_error}. Allow "
                "unprivileged user namespaces on this host, or use sandbox='auto' or 'none'."
            )
        logger.warning(
            "Shell(sandbox='auto'): running commands without a sandbox: %s", self._sandbox_error
        )
        self._sandboxed = False
        return False

    async def _wrap(self, argv: list[str]) -> tuple[list[str], str]:
        if await self.sandboxed() and self._sandbox is not None:
            return [*self._sandbox.argv, *argv], self._sandbox.cgroup
        return argv, ""
