"""Process plumbing for the local backends: one supervised process (``Process``), its output
pipe, and the last-resort kill when the supervisor does not answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentica.deep.shell.supervisor import descendants
from agentica.tools.commands import CappedOutput

logger = logging.getLogger(__name__)

SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
"""The supervisor program (``supervisor.py``), run by path with ``python -I -S``."""
PIPE_GUARD = 5.0  # seconds to wait for the output pipe to close once the supervisor exited


def kill_tree(root: int) -> None:
    """SIGKILL ``root`` and its descendants (when the supervisor itself does not answer)."""
    for pid in [*descendants(root), root]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, output: CappedOutput) -> None:
        self.output = output
        self.done = asyncio.Event()
        self.transport: asyncio.SubprocessTransport | None = None
        self._guard: asyncio.TimerHandle | None = None
        self.ended: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.output.feed(data if isinstance(data, bytes) else data.encode())

    def process_exited(self) -> None:
        # the supervisor killed every descendant before it exited, so the pipe closes at once;
        # should something still hold it, stop reading after a while
        self._guard = asyncio.get_running_loop().call_later(PIPE_GUARD, self._close_pipes)

    def _close_pipes(self) -> None:
        if self.transport is None:
            return
        for fd in (0, 1):
            pipe = self.transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()

    def connection_lost(self, exc: Exception | None) -> None:
        # the supervisor exited and the pipes are closed: release the transport
        if self._guard is not None:
            self._guard.cancel()
        if self.transport is not None:
            self.transport.close()
        self.ended = time.monotonic()
        self.output.close()
        self.done.set()


class Process:
    """One command under its supervisor (``supervisor.py``): its output, its end, and how to
    stop it. The supervisor's stdin is a pipe from us: when we die it closes, and the
    supervisor kills the command."""

    def __init__(
        self, transport: asyncio.SubprocessTransport, protocol: _Protocol, grace: float
    ) -> None:
        self.transport = transport
        self.protocol = protocol
        self.grace = grace
        self.started = time.monotonic()
        self.stopping = False

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        max_output: int,
        grace: float,
        cgroup: str = "",
    ) -> Process:
        loop = asyncio.get_running_loop()
        supervisor = [sys.executable or "python3", "-I", "-S", SUPERVISOR]
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(CappedOutput(max_output)),
            *supervisor, str(os.getpid()), f"{grace:g}", cgroup, *argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, cwd=cwd, env=dict(env), start_new_session=True,
        )  # fmt: skip
        return cls(transport, protocol, grace)

    @property
    def output(self) -> CappedOutput:
        return self.protocol.output

    @property
    def finished(self) -> bool:
        return self.protocol.done.is_set()

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode()

    @property
    def elapsed(self) -> float:
        return (self.protocol.ended or time.monotonic()) - self.started

    async def wait(self, timeout: float | None) -> bool:
        """Wait until the command ended (True) or ``timeout`` passed (False)."""
        if not self.finished:
            try:
                async with asyncio.timeout(timeout):
                    await self.protocol.done.wait()
            except TimeoutError:
                return False
        return True

    def request_stop(self) -> bool:
        """Tell the supervisor to stop the command (it goes on alone if we are cancelled);
        False when it had already ended or been told."""
        if self.transport.get_returncode() is not None or self.stopping:
            return False
        self.stopping = True
        with contextlib.suppress(OSError):  # ProcessLookupError: it just ended
            self.transport.send_signal(signal.SIGTERM)
        return True

    async def stop(self) -> None:
        """Stop the command and wait until it and its children are gone."""
        self.request_stop()
        if await self.wait(self.grace + 5.0):
            return
        # the supervisor does not answer: kill it and what it started ourselves
        logger.warning("the shell supervisor %s did not stop; killing it", self.transport.get_pid())
        await asyncio.to_thread(kill_tree, self.transport.get_pid())
        await self.wait(PIPE_GUARD + 5.0)
