"""Executors on the server's side: the students' computers connected with ``agentica connect``.

``Executors`` keeps the connected ones by student. A ``Connection`` is one executor's socket:
``call(method, **args)`` sends a ``Call`` and waits for its ``Result``; command output and ends
that the executor streams are routed to their handles. Through a connection,
``RemoteCommands`` is a ``CommandBackend`` and ``RemoteFiles`` a ``FileBackend``: an agent's
commands and files go to the student's workspace, never to the server. An executor that goes
away fails what was waiting on it: calls raise ``ToolError`` ("the executor disconnected"),
running commands end with exit code -1 and say so, and the agent goes on. An executor serves
only the student who connected it: ``pick`` looks in that student's executors only. With
tracing on, each call is a ``team.operation <method>`` span (ids and outcome, no arguments).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentica.errors import ToolError, UsageError
from agentica.tools.commands import CappedOutput, CommandResult, CommandStatus
from agentica.tools.files import BackendError, FileInfo, GrepLine
from agentica_team.executor_protocol import Call, Exited, Message, Output, Result, dump
from agentica_team.telemetry import OFF, Telemetry

__all__ = [
    "DISCONNECTED",
    "Connection",
    "ExecutorInfo",
    "Executors",
    "RemoteCommand",
    "RemoteCommands",
    "RemoteFiles",
]

DISCONNECTED = "the executor disconnected"
CALL_TIMEOUT = 120.0
"""Seconds a call other than a running command may take on the executor."""


@dataclass(frozen=True, slots=True)
class ExecutorInfo:
    """A connected executor: its id, whose it is, the name and workspace it reported."""

    id: str
    user_id: str
    name: str
    workspace: str
    can: tuple[str, ...]
    sandboxed: bool
    connected_at: float = field(default_factory=time.time)


class RemoteCommand:
    """A command running on an executor (a ``CommandHandle``)."""

    def __init__(self, cid: str, connection: Connection, max_output: int) -> None:
        self._id = cid
        self._connection = connection
        self._output = CappedOutput(max_output)
        self._result: CommandResult | None = None
        self._ended = asyncio.Event()

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
        return self._output.text()

    def stream(self) -> AsyncIterator[str]:
        return self._output.stream()

    async def wait(self, timeout: float | None) -> CommandResult | None:
        try:
            async with asyncio.timeout(timeout):
                await self._ended.wait()
        except TimeoutError:
            return None
        return self._result

    async def stop(self) -> CommandResult:
        if self._result is None:
            with contextlib.suppress(ToolError):  # gone with its executor: ended as lost
                await self._connection.call("command.stop", cid=self._id)
            await self._ended.wait()
        assert self._result is not None
        return self._result

    def _add(self, text: str) -> None:
        if self._result is None:
            self._output.feed(text.encode("utf-8", "replace"))

    def _end(self, result: CommandResult) -> None:
        if self._result is None:
            self._result = result
            self._output.close()
            self._ended.set()

    def _lose(self) -> None:
        self._add(f"\n[{DISCONNECTED}: the command's end is unknown]\n")
        self._end(CommandResult(exit_code=-1, output=self._output.text(),
                                total_bytes=self._output.total))  # fmt: skip


class Connection:
    """One connected executor (see the module docstring); ``send`` writes a text frame."""

    def __init__(self, info: ExecutorInfo, send: Callable[[str], Awaitable[None]]) -> None:
        self.info = info
        self._send = send
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._starting: dict[int, int] = {}  # call id -> max_output of a command.start
        self._commands: dict[str, RemoteCommand] = {}
        self.closed = False
        self.telemetry: Telemetry = OFF
        """Where its calls' spans go (``Executors.add`` gives it the service's)."""

    async def call(self, method: str, *, within: float | None = CALL_TIMEOUT, **args: Any) -> Any:
        """Ask the executor; its value, or the error it raised (``ToolError`` for the model,
        ``BackendError``, ``UsageError``); ``ToolError`` when it is or goes away, or does not
        answer ``within`` seconds."""
        call_id = next(self._ids)
        info = self.info
        span = self.telemetry.operation(
            method, executor=info.id, op=f"call{call_id}", user_id=info.user_id
        )
        try:
            value = await self._call(call_id, method, within, args)
        except asyncio.CancelledError:
            span.end("cancelled")
            raise
        except BaseException as exc:
            span.end("failed", type(exc).__name__)
            raise
        span.end("completed")
        return value

    async def _call(
        self, call_id: int, method: str, within: float | None, args: dict[str, Any]
    ) -> Any:
        if self.closed:
            raise ToolError(f"{DISCONNECTED}; ask the student to run `agentica connect` again")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        if method == "command.start":
            self._starting[call_id] = int(args.get("max_output") or 10_000)
        try:
            try:
                frame = dump(Call(id=call_id, method=method, args=args))
            except ValueError:  # a lone surrogate: not text JSON can carry
                raise ToolError(f"{method}: the arguments are not valid text") from None
            await self._send(frame)
            async with asyncio.timeout(within):
                return await future
        except TimeoutError:
            waited = f"{within:.0f} s" if within is not None else "in time"
            raise ToolError(f"the executor did not answer {method} within {waited}") from None
        finally:
            self._waiting.pop(call_id, None)
            self._starting.pop(call_id, None)

    def received(self, message: Message) -> None:
        """Route a message from the executor."""
        if isinstance(message, Result):
            self._result(message)
        elif isinstance(message, Output):
            command = self._commands.get(message.cid)
            if command is not None:
                command._add(message.text)
        elif isinstance(message, Exited):
            command = self._commands.pop(message.cid, None)
            if command is not None:
                command._end(_command_result(message.result))

    def _result(self, message: Result) -> None:
        future = self._waiting.get(message.id)
        if future is None or future.done():
            return
        if message.kind:
            future.set_exception(_error(message.kind, message.error))
            return
        max_output = self._starting.get(message.id)
        if max_output is None:
            future.set_result(message.value)
            return
        cid = str((message.value or {}).get("cid", ""))
        command = self._commands[cid] = RemoteCommand(cid, self, max_output)
        future.set_result(command)  # registered before its first output is read

    def lose(self) -> None:
        """The executor went away: fail every call waiting and end every running command."""
        self.closed = True
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ToolError(DISCONNECTED))
        for command in self._commands.values():
            command._lose()
        self._commands.clear()


def _error(kind: str, text: str) -> Exception:
    text = text[:2000] or "the executor refused"
    if kind == "backend":
        return BackendError(text)
    if kind == "usage":
        return UsageError(f"the executor cannot do this: {text}")
    return ToolError(text)


def _command_result(data: dict[str, Any]) -> CommandResult:
    try:
        return CommandResult(
            exit_code=int(data.get("exit_code", -1)),
            output=str(data.get("output", ""))[:4_000_000],
            total_bytes=int(data.get("total_bytes", 0)),
            cut_bytes=int(data.get("cut_bytes", 0)),
            timed_out=bool(data.get("timed_out", False)),
            stopped=bool(data.get("stopped", False)) and not bool(data.get("timed_out", False)),
            duration=float(data.get("duration", 0.0)),
        )
    except (TypeError, ValueError):
        return CommandResult(exit_code=-1, output="[the executor reported an unreadable result]")


class RemoteCommands:
    """A ``CommandBackend`` whose commands run on an executor."""

    python: str | None = "python3"

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def start(
        self, command: str, *, timeout: float | None = None, max_output: int = 10_000
    ) -> RemoteCommand:
        if "\0" in command:
            raise ToolError("The command contains a NUL character; remove it.")
        started: RemoteCommand = await self.connection.call(
            "command.start", command=command, timeout=timeout, max_output=max_output
        )
        return started


class RemoteFiles:
    """A ``FileBackend`` over an executor's workspace."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    async def ls(self, path: str = "/") -> list[FileInfo]:
        return [_info(item) for item in await self.connection.call("files.ls", path=path)]

    async def stat(self, path: str) -> FileInfo | None:
        found = await self.connection.call("files.stat", path=path)
        return None if found is None else _info(found)

    async def read(self, path: str) -> str:
        return str(await self.connection.call("files.read", path=path))

    async def write(self, path: str, content: str) -> FileInfo:
        if not isinstance(content, str):
            raise BackendError(f"write needs text, not {type(content).__name__}; decode it first")
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            raise BackendError(
                "the content is not valid text (it has a lone surrogate); write it as UTF-8 text"
            ) from None
        return _info(await self.connection.call("files.write", path=path, content=content))

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        found = await self.connection.call("files.glob", pattern=pattern, path=path, limit=limit)
        return [_info(item) for item in found]

    async def grep(self, pattern: str, path: str = "/", **options: Any) -> list[GrepLine]:
        found = await self.connection.call("files.grep", pattern=pattern, path=path, **options)
        return [GrepLine(**item) for item in found]


def _info(data: Any) -> FileInfo:
    if not isinstance(data, dict):
        raise BackendError("the executor sent a malformed file entry")
    return FileInfo(**data)


class Executors:
    """The connected executors, by student (their calls traced to ``telemetry``)."""

    def __init__(self, telemetry: Telemetry = OFF) -> None:
        self._by_user: dict[str, dict[str, Connection]] = {}
        self.telemetry = telemetry

    def add(self, connection: Connection) -> None:
        connection.telemetry = self.telemetry
        self._by_user.setdefault(connection.info.user_id, {})[connection.info.id] = connection

    def remove(self, connection: Connection) -> None:
        mine = self._by_user.get(connection.info.user_id, {})
        if mine.get(connection.info.id) is connection:
            del mine[connection.info.id]
        if not mine:
            self._by_user.pop(connection.info.user_id, None)

    def connections(self, user_id: str) -> list[Connection]:
        """``user_id``'s connected executors, oldest first."""
        return list(self._by_user.get(user_id, {}).values())

    def of(self, user_id: str) -> list[ExecutorInfo]:
        """``user_id``'s connected executors, oldest first."""
        return [c.info for c in self._by_user.get(user_id, {}).values()]

    def pick(self, user_id: str, executor_id: str = "") -> Connection | None:
        """``user_id``'s executor ``executor_id``, else their newest; ``None`` if they have
        none (never another student's)."""
        mine = self._by_user.get(user_id, {})
        if executor_id:
            return mine.get(executor_id)
        return next(reversed(mine.values()), None) if mine else None
