"""The editor's files and terminals as the deep agent's ``FileBackend`` and ``CommandBackend``
(ACP's ``fs/*`` and ``terminal/*`` requests), for editors that offer them.

``EditorFiles`` reads and writes through the editor, so the agent sees unsaved buffers and the
editor sees its edits at once; listing and searching stay on the local workspace (ACP has no
such requests), which also checks every path first: a path outside the workspace, or through a
symbolic link that leaves it, is refused before the editor is asked. ``EditorCommands`` runs
commands in the editor's terminals (the user sees them run); a command that outlives its
timeout is killed there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agentica.deep.backends import FilesystemBackend, normalize_path
from agentica.deep.backends.paths import check_content
from agentica.errors import ToolError
from agentica.tools.commands import CommandResult, CommandStatus
from agentica.tools.files import BackendError, FileInfo, GrepLine

__all__ = ["EditorCommands", "EditorFiles"]


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class EditorFiles:
    """Files read and written through the editor (``fs/read_text_file``,
    ``fs/write_text_file``); the rest, and every path check, on the local workspace ``root``."""

    def __init__(
        self, conn: Any, session_id: str, root: str, *, read: bool = True, write: bool = True
    ) -> None:
        self.conn = conn
        self.session_id = session_id
        self.root = os.path.realpath(root)
        self.local = FilesystemBackend(self.root)
        self.through_read = read
        self.through_write = write

    async def ls(self, path: str = "/") -> list[FileInfo]:
        return await self.local.ls(path)

    async def stat(self, path: str) -> FileInfo | None:
        return await self.local.stat(path)

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        return await self.local.glob(pattern, path, limit=limit)

    async def grep(self, pattern: str, path: str = "/", **options: Any) -> list[GrepLine]:
        return await self.local.grep(pattern, path, **options)

    async def read(self, path: str) -> str:
        info = await self.local.stat(path)  # the path rules, and links that leave the root
        if not self.through_read or info is None or info.is_dir:
            return await self.local.read(path)  # (raises the local backend's error)
        host = await self._host(info.path)
        try:
            found = await self.conn.read_text_file(session_id=self.session_id, path=host)
        except Exception as exc:
            raise BackendError(
                f"the editor could not read {{path}}: {exc}", path=info.path
            ) from None
        return str(found.content)

    async def write(self, path: str, content: str) -> FileInfo:
        if not self.through_write:
            return await self.local.write(path, content)
        p = normalize_path(path)
        check_content(p, content, self.local.max_write_bytes)  # text, within the write limit
        existing = await self.local.stat(p)
        if p == "/" or (existing is not None and existing.is_dir):
            return await self.local.write(path, content)
        host = await self._host(p, folders=True)
        try:
            await self.conn.write_text_file(session_id=self.session_id, path=host, content=content)
        except Exception as exc:
            raise BackendError(f"the editor could not write {{path}}: {exc}", path=p) from None
        written = await self.local.stat(p)
        if written is not None:
            return written
        return FileInfo(p, False, len(content.encode("utf-8", "replace")), time.time())

    async def _host(self, p: str, *, folders: bool = False) -> str:
        """The file's absolute path, once its nearest existing folder (links resolved) is known
        to be inside the workspace; with ``folders``, its missing folders are made (a write
        creates them, as every backend's does)."""
        host = os.path.join(self.root, p.lstrip("/"))

        def check() -> str:
            probe = host
            while not os.path.lexists(probe):
                probe = os.path.dirname(probe)
            real = os.path.realpath(probe)
            if not _inside(self.root, real):
                raise BackendError("{path} leads out of the workspace; use another path", path=p)
            if folders:
                os.makedirs(os.path.dirname(host), exist_ok=True)
            return host

        return await asyncio.to_thread(check)


class _Terminal:
    """One command in an editor's terminal; a task follows it to its end."""

    def __init__(self, conn: Any, session_id: str, terminal_id: str, timeout: float | None) -> None:
        self.conn = conn
        self.session_id = session_id
        self.terminal_id = terminal_id
        self._id = uuid.uuid4().hex[:8]
        self._output = ""
        self._result: CommandResult | None = None
        self._stopping = False
        self._started = time.monotonic()
        self._ended = asyncio.Event()
        self._follow = asyncio.create_task(self._watch(timeout))

    @property
    def id(self) -> str:
        return self._id

    @property
    def status(self) -> CommandStatus:
        return "running" if self._result is None else self._result.status

    @property
    def result(self) -> CommandResult | None:
        return self._result

    def output(self) -> str:
        return self._output if self._result is None else self._result.output

    async def stream(self) -> AsyncIterator[str]:
        sent = 0
        while True:
            ended = self._ended.is_set()
            text = self.output() if ended else await self._poll()
            if len(text) > sent:
                yield text[sent:]
                sent = len(text)
            if ended:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), 0.3)

    async def wait(self, timeout: float | None) -> CommandResult | None:
        try:
            await asyncio.wait_for(asyncio.shield(self._ended.wait()), timeout)
        except TimeoutError:
            return None
        return self._result

    async def stop(self) -> CommandResult:
        if self._result is None:
            self._stopping = True
            with contextlib.suppress(Exception):  # it ended meanwhile, or the editor went away
                await self.conn.kill_terminal(
                    session_id=self.session_id, terminal_id=self.terminal_id
                )
            await self._ended.wait()
        assert self._result is not None
        return self._result

    async def _poll(self) -> str:
        try:
            found = await self.conn.terminal_output(
                session_id=self.session_id, terminal_id=self.terminal_id
            )
        except Exception:
            return self._output
        self._output = str(found.output)
        return self._output

    async def _watch(self, timeout: float | None) -> None:
        timed_out = False
        code = -1
        try:
            try:
                waiting = self.conn.wait_for_terminal_exit(
                    session_id=self.session_id, terminal_id=self.terminal_id
                )
                ended = await asyncio.wait_for(waiting, timeout)
            except TimeoutError:
                timed_out = True
                await self.conn.kill_terminal(
                    session_id=self.session_id, terminal_id=self.terminal_id
                )
                ended = await self.conn.wait_for_terminal_exit(
                    session_id=self.session_id, terminal_id=self.terminal_id
                )
            code = _exit_code(ended.exit_code, ended.signal)
            await self._poll()
        except Exception as exc:
            self._output += f"\n[the editor's terminal failed: {exc}]"
        finally:
            self._result = CommandResult(
                exit_code=code,
                output=self._output,
                total_bytes=len(self._output.encode()),
                timed_out=timed_out,
                stopped=self._stopping and not timed_out,
                duration=time.monotonic() - self._started,
            )
            self._ended.set()
            with contextlib.suppress(Exception):
                await self.conn.release_terminal(
                    session_id=self.session_id, terminal_id=self.terminal_id
                )


def _exit_code(code: int | None, signal: str | None) -> int:
    if code is not None:
        return int(code)
    import signal as signals

    number = getattr(signals, str(signal or "SIGKILL"), signals.SIGKILL)
    return 128 + int(number)


class EditorCommands:
    """Commands in the editor's terminals (``terminal/create`` and friends), run as
    ``/bin/sh -c COMMAND`` in the workspace ``root``."""

    python = "python3"

    def __init__(self, conn: Any, session_id: str, root: str) -> None:
        self.conn = conn
        self.session_id = session_id
        self.root = root

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> _Terminal:
        if not command or "\x00" in command:
            raise ToolError("The command is empty or holds a NUL character.")
        try:
            made = await self.conn.create_terminal(
                session_id=self.session_id,
                command="/bin/sh",
                args=["-c", command],
                cwd=self.root,
                output_byte_limit=max(max_output, 100),
            )
        except Exception as exc:
            raise ToolError(f"the editor could not start the command: {exc}") from None
        return _Terminal(self.conn, self.session_id, str(made.terminal_id), timeout)
