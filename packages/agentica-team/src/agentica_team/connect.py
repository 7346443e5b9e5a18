"""``agentica connect``: a student's computer as the executor of their agent's operations.

``Executor(server, token, workspace)`` dials ``SERVER/api/executors/connect`` over a WebSocket,
says ``Hello`` and then does what the server's ``Call``s ask, in the workspace only: files
through a ``FilesystemBackend`` (nothing outside the folder can be reached, symlinks included)
and commands through ``BwrapCommands`` (bubblewrap; ``sandbox=False`` or no bubblewrap: the
plain ``LocalCommands``, said at start). A command's output streams back as it comes and its end
as ``Exited``. Only the calls in ``METHODS`` run. When the connection drops it reconnects,
waiting 1, 2, 4 ... up to 30 s with jitter; a refused token or protocol ends it with the reason.
The provider key never comes here: the server calls the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import socket
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp

from agentica.deep.backends import FilesystemBackend
from agentica.deep.shell import BwrapCommands, LocalCommands
from agentica.errors import ToolError, UsageError
from agentica.tools.commands import CommandBackend, CommandHandle
from agentica.tools.files import BackendError
from agentica_team.executor_protocol import (
    METHODS,
    VERSION,
    Call,
    Exited,
    Hello,
    Output,
    ProtocolError,
    Result,
    Welcome,
    dump,
    parse,
)

__all__ = ["ConnectRefused", "Executor"]

log = logging.getLogger("agentica_team.connect")

MAX_BACKOFF = 30.0
_REFUSED = {1002, 1008}


class ConnectRefused(Exception):
    """The server refused this executor (a bad token, another protocol version)."""


class Executor:
    """One executor (see the module docstring); ``run()`` until cancelled or refused."""

    def __init__(
        self,
        server: str,
        token: str,
        workspace: str | Path,
        *,
        name: str = "",
        sandbox: bool = True,
        on_status: Callable[[str], None] = print,
    ) -> None:
        self.url = server.rstrip("/") + "/api/executors/connect"
        self.url = self.url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
        self.token = token
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise UsageError(f"the workspace {str(self.workspace)!r} is not a folder; create it")
        self.name = name or socket.gethostname()
        self.files = FilesystemBackend(self.workspace)
        self.sandboxed = sandbox and shutil.which("bwrap") is not None
        self.commands: CommandBackend = (
            BwrapCommands(self.workspace) if self.sandboxed else LocalCommands(self.workspace)
        )
        self.say = on_status
        self.executor_id = ""
        self._running: dict[str, CommandHandle] = {}

    async def run(self) -> None:
        """Connect, serve, reconnect with backoff; ``ConnectRefused`` when refused."""
        if not self.sandboxed:
            self.say("commands run without a sandbox (bubblewrap is not installed or is off)")
        failures = 0
        while True:
            try:
                await self._session()
                failures = 0
            except ConnectRefused:
                raise
            except aiohttp.WSServerHandshakeError as exc:
                if exc.status in (401, 403):
                    raise ConnectRefused(
                        f"the server refused this executor's token (HTTP {exc.status}): check "
                        "--token (your personal token, agt_...)"
                    ) from None
                self.say(f"the server would not open a connection: HTTP {exc.status}")
            except (aiohttp.ClientError, OSError, ProtocolError, TimeoutError) as exc:
                self.say(f"connection lost: {type(exc).__name__}: {str(exc)[:200]}")
            failures += 1
            delay = min(MAX_BACKOFF, 2 ** min(failures - 1, 5)) * random.uniform(0.5, 1.5)
            self.say(f"reconnecting in {delay:.1f} s")
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(self.url, headers=headers, heartbeat=20.0, max_msg_size=0) as ws,
        ):
            hello = Hello(version=VERSION, name=self.name[:100], workspace=str(self.workspace),
                          can=["commands", "files"], sandboxed=self.sandboxed)  # fmt: skip
            await ws.send_str(dump(hello))
            welcome = await self._receive(ws)
            if not isinstance(welcome, Welcome):
                raise ProtocolError("the server did not welcome this executor")
            self.executor_id = welcome.executor_id
            self.say(f"connected to {self.url} as {welcome.executor_id} ({self.workspace})")
            try:
                await self._serve(ws)
            finally:
                await self._stop_all()

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse) -> Any:
        frame = await ws.receive()
        if frame.type == aiohttp.WSMsgType.TEXT:
            return parse(frame.data)
        if frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
            code = ws.close_code or 0
            reason = frame.extra or ""
            if code in _REFUSED:
                raise ConnectRefused(f"the server refused this executor: {reason or code}")
            raise ConnectionResetError(f"the server closed the connection ({code})")
        raise ProtocolError(f"unexpected frame {frame.type!r}")

    async def _serve(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        send_lock = asyncio.Lock()

        async def send(message: Any) -> None:
            async with send_lock:
                await ws.send_str(dump(message))

        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                message = await self._receive(ws)
                if isinstance(message, Call):
                    task = asyncio.create_task(self._answer(message, send))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        finally:
            for task in tasks:
                task.cancel()

    async def _answer(self, call: Call, send: Callable[[Any], Awaitable[None]]) -> None:
        try:
            value = await self._do(call, send)
        except BackendError as exc:
            await send(Result(id=call.id, error=str(exc), kind="backend"))
        except ToolError as exc:
            await send(Result(id=call.id, error=str(exc), kind="tool"))
        except (UsageError, TypeError, ValueError) as exc:
            await send(Result(id=call.id, error=str(exc)[:2000], kind="usage"))
        else:
            await send(Result(id=call.id, value=value))

    async def _do(self, call: Call, send: Callable[[Any], Awaitable[None]]) -> Any:
        if call.method not in METHODS:
            raise UsageError(f"{call.method!r} is not something an executor does")
        args = call.args
        if call.method == "command.start":
            return await self._start(args, send)
        if call.method == "command.stop":
            handle = self._running.get(str(args.get("cid", "")))
            if handle is not None:
                await handle.stop()
            return None
        return await self._file(call.method.removeprefix("files."), args)

    async def _file(self, method: str, args: dict[str, Any]) -> Any:
        files = self.files
        if method == "read":
            return await files.read(str(args["path"]))
        if method == "write":
            return asdict(await files.write(str(args["path"]), str(args["content"])))
        if method == "stat":
            found = await files.stat(str(args["path"]))
            return None if found is None else asdict(found)
        if method == "ls":
            return [asdict(info) for info in await files.ls(str(args.get("path", "/")))]
        if method == "glob":
            matches = await files.glob(str(args["pattern"]), str(args.get("path", "/")),
                                       limit=int(args.get("limit", 1000)))  # fmt: skip
            return [asdict(info) for info in matches]
        options = {k: args[k] for k in ("glob", "context", "limit") if k in args}
        lines = await files.grep(str(args["pattern"]), str(args.get("path", "/")), **options)
        return [asdict(line) for line in lines]

    async def _start(self, args: dict[str, Any], send: Callable[[Any], Awaitable[None]]) -> Any:
        timeout = args.get("timeout")
        handle = await self.commands.start(
            str(args["command"]),
            timeout=None if timeout is None else float(timeout),
            max_output=int(args.get("max_output") or 10_000),
        )
        self._running[handle.id] = handle
        stream = asyncio.get_running_loop().create_task(self._stream(handle, send))
        stream.add_done_callback(lambda _: self._running.pop(handle.id, None))
        return {"cid": handle.id}

    async def _stream(self, handle: CommandHandle, send: Callable[[Any], Awaitable[None]]) -> None:
        await asyncio.sleep(0)  # the start's Result goes first
        try:
            async for piece in handle.stream():
                await send(Output(cid=handle.id, text=piece))
        finally:
            result = await handle.wait(None)
            if result is not None:
                with contextlib.suppress(Exception):
                    await send(Exited(cid=handle.id, result=asdict(result)))

    async def _stop_all(self) -> None:
        for handle in list(self._running.values()):
            with contextlib.suppress(Exception):
                await handle.stop()
        self._running.clear()
