"""The command-execution interface: ``CommandBackend``, its ``CommandHandle`` and
``CommandResult``, and ``CappedOutput`` (the output cap every backend applies).

The shell tools (``agentica.deep.Shell``) depend on this protocol only; the built-in
implementations are in ``agentica.deep.shell`` and ``agentica.testing.conformance.commands``
checks any implementation.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["CappedOutput", "CommandBackend", "CommandHandle", "CommandResult", "CommandStatus"]

CommandStatus = Literal["running", "exited", "timed_out", "stopped"]
"""Where a command is: still ``running``; ``exited`` by itself; killed because its ``timeout``
passed (``timed_out``); killed by ``stop()`` (``stopped``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """How a command ended.

    Attributes:
        exit_code: the command's exit status; ``128 + N`` when signal ``N`` killed it (137 for
            SIGKILL), as the shell reports it. A backend that lost the command entirely (its
            process vanished) reports a negative number or ``128 + N`` for what killed it.
        output: stdout and stderr merged, in order, decoded as UTF-8 (undecodable bytes
            replaced), with the middle cut out when it was longer than the cap (see
            ``CappedOutput``).
        total_bytes: how many bytes the command wrote in all.
        cut_bytes: how many of them ``output`` leaves out (0 when nothing was cut).
        timed_out: killed because its ``timeout`` passed.
        stopped: killed by ``CommandHandle.stop()`` (never both flags).
        duration: seconds from its start until it and every process it started were gone.
    """

    exit_code: int
    output: str
    total_bytes: int = 0
    cut_bytes: int = 0
    timed_out: bool = False
    stopped: bool = False
    duration: float = 0.0

    @property
    def status(self) -> CommandStatus:
        if self.timed_out:
            return "timed_out"
        return "stopped" if self.stopped else "exited"


@runtime_checkable
class CommandHandle(Protocol):
    """One started command. Every method may be called from any task, any number of times.

    ``id`` is unique within its backend (for logs and for a service to name the command), and
    ``status`` and ``result`` are cheap reads of what is known now: ``result`` is ``None``
    while ``status == "running"``.
    """

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> CommandStatus: ...

    @property
    def result(self) -> CommandResult | None: ...

    def output(self) -> str:
        """The output so far, capped the same way as ``CommandResult.output``."""
        ...

    def stream(self) -> AsyncIterator[str]:
        """The output as it comes: first the output so far (as ``output()``, when there is
        some), then each piece as the command writes it, ending once the command ended and its
        output was read. A reader that falls far behind (more than the cap, and at least
        256 KiB) gets a ``[... N bytes not streamed ...]`` marker instead of what it missed
        (memory stays bounded)."""
        ...

    async def wait(self, timeout: float | None) -> CommandResult | None:
        """Wait up to ``timeout`` seconds (``None``: until it ends) for the command to end; its
        result, or ``None`` when it is still running. Cancelling the wait leaves the command
        running."""
        ...

    async def stop(self) -> CommandResult:
        """Kill the command and every process it started; its result once they are all gone.
        A command that had already ended keeps its result (``stopped`` stays ``False``)."""
        ...


@runtime_checkable
class CommandBackend(Protocol):
    """Where shell commands run: on this computer (``agentica.deep.shell.LocalCommands``), in a
    sandbox (``BwrapCommands``, or your own with docker, firejail or a VM), or on another
    computer over the network. Check an implementation with
    ``agentica.testing.conformance.commands``.

    The contract, which the shell tools rely on (the conformance suite checks what a test can
    observe: ending, output, input, working directory, environment and concurrency; not the
    death of the owner nor the split between ``ToolError`` and ``UsageError``):

    - **Command.** ``start(command)`` runs ``/bin/sh -c command`` (POSIX ``sh``) and returns as
      soon as it runs; the command is non-empty and has no NUL character (the shell tools check).
    - **Working directory.** The workspace root: relative paths in commands are resolved there.
    - **Input.** stdin is ``/dev/null``: a command that reads it sees end of file at once.
    - **Output.** stdout and stderr are merged in the order written and capped as they are read
      (``CappedOutput``): the first ``max_output // 2`` and the last ``max_output -
      max_output // 2`` bytes are kept, the rest only counted, so a command printing gigabytes
      costs no memory and the model sees where the output was cut.
    - **Ending.** When ``timeout`` seconds pass, or ``stop()`` is called, the command and every
      process it started are killed: its process group, background jobs, and processes that left
      the group (``setsid``, double forks). Give them a short grace (SIGTERM) and then kill them
      (SIGKILL); ``wait`` and ``stop`` return only once none is left. A command that ends
      leaving background jobs behind has them killed too. Nothing outlives the backend's owner:
      when the process that started a command dies, the command dies.
    - **Environment.** Commands never inherit the host's environment (it holds API keys): give
      them a minimal one (``PATH``, ``HOME``, ``LANG``) plus what the backend's user configured.
    - **Errors the model sees.** ``start`` raises ``agentica.errors.ToolError`` with a message
      written for the model when this command cannot start (too long, a resource limit), and
      ``agentica.errors.UsageError`` when the backend cannot run any command (misconfigured, the
      sandbox cannot work here): the developer must fix that. A failing command is not an error:
      its ``exit_code`` and ``output`` say what happened.
    - **Concurrency.** Commands are independent: several may run at once, and stopping one
      leaves the others alone.

    ``python`` is the Python interpreter commands can run, as a command name or path (``"python3"``;
    ``None``: there is none). ``Shell(python=True)``'s ``run_python`` runs it.
    """

    @property
    def python(self) -> str | None: ...

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> CommandHandle:
        """Start ``command``; ``timeout`` seconds before it is killed (``None``: none; it runs
        until ``stop()``); ``max_output`` bytes of its output kept (at least 100)."""
        ...


_SKIPPED = "\n[... {:,} bytes not streamed: the reader fell behind ...]\n"


class CappedOutput:
    """A command's output while it is read: the first and last bytes kept, the rest counted.

    Feed it the bytes as they come (``feed``); ``text()`` is the output as the model sees it,
    with a note where the middle was cut. Use it in your own backend so the model sees the same
    note everywhere. ``stream()`` gives the pieces to readers as they come; call ``close()``
    once the output ended.
    """

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.closed = False
        self._backlog = max(limit, 1 << 18)  # bytes a stream reader may fall behind
        self._readers: list[_Reader] = []

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        for reader in self._readers:
            reader.push(data, self._backlog)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data or self.tail_limit == 0:
            return
        if len(data) >= self.tail_limit:
            self.tail = bytearray(data[-self.tail_limit :])
        else:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit + 65536:
                del self.tail[: -self.tail_limit]

    def close(self) -> None:
        """The output ended: streams finish once they have read it."""
        self.closed = True
        for reader in self._readers:
            reader.ready.set()

    @property
    def cut(self) -> int:
        """Bytes ``text()`` leaves out."""
        kept = len(self.head) + min(len(self.tail), self.tail_limit)
        return max(0, self.total - kept)

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        omitted = self.total - len(self.head) - len(tail)
        if omitted <= 0:
            return (bytes(self.head) + tail).decode(errors="replace")
        return (
            self.head.decode(errors="replace")
            + f"\n[... output cut: {omitted:,} of {self.total:,} bytes omitted; showing the "
            f"first {len(self.head):,} and the last {len(tail):,} bytes. To see more, write "
            "the output to a file (command > out.txt) and read parts of it with grep, head or "
            "tail ...]\n" + tail.decode(errors="replace")
        )

    async def stream(self) -> AsyncIterator[str]:
        """The output so far, then each piece as it is fed, until ``close()``."""
        reader = _Reader()
        first = self.text()
        self._readers.append(reader)
        if self.closed:
            reader.ready.set()
        try:
            if first:
                yield first
            while True:
                await reader.ready.wait()
                reader.ready.clear()
                piece = reader.take()
                if piece:
                    yield piece
                if self.closed and not reader.pending:
                    if tail := reader.decoder.decode(b"", final=True):
                        yield tail
                    return
        finally:
            self._readers.remove(reader)


class _Reader:
    """One ``CappedOutput.stream()`` reader's unread bytes (at most its backlog)."""

    def __init__(self) -> None:
        self.pending = bytearray()
        self.skipped = 0
        self.ready = asyncio.Event()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, data: bytes, backlog: int) -> None:
        self.pending += data
        if len(self.pending) > backlog:
            self.skipped += len(self.pending) - backlog
            del self.pending[: len(self.pending) - backlog]
        self.ready.set()

    def take(self) -> str:
        data, self.pending = bytes(self.pending), bytearray()
        if not self.skipped:
            return self.decoder.decode(data)
        text = self.decoder.decode(b"", final=True) + _SKIPPED.format(self.skipped)
        self.skipped = 0
        self.decoder.reset()
        return text + self.decoder.decode(data)
