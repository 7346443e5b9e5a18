"""``MCPServer``: an MCP server's tools as a tool group of an agent (on the official ``mcp`` SDK).

```python
files = MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/data"])
agent = Agent(tools=[files])              # connected when a run starts, kept for later runs
async with MCPServer.http("http://127.0.0.1:9000/mcp", headers={"Authorization": ...}) as srv:
    await Agent(tools=[srv]).run("...")   # or: opened and closed by ``async with``
```

The server's tools become ``Function``s with the server's schemas (``Function.from_schema``)
and run like built-in tools: same task group, timeouts, concurrency cap, guardrails, approval.
One connection (``async with``, or opened by the first run) serves every run and agent; a task
of its own holds it (the SDK's contexts must close in the task that opened them). A server that
exits is started again for the next call; ``tools/list_changed`` refreshes the list from the
next turn; resources are two more tools; prompts can be instructions (``prompt_instructions``).
A stdio server gets the SDK's allow-listed environment (``HOME``, ``PATH``, ...) plus ``env``:
provider keys in this process's environment never reach it unless given.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self, TextIO

from agentica.errors import MCPServerError, ToolError, UsageError
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import Tool

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import MessageHandlerFnT
    from mcp_types import CallToolResult, ContentBlock, Prompt, Resource

__all__ = ["MCPProgress", "MCPServer"]

log = logging.getLogger(__name__)

_MODERN = "2026-07-28"  # the protocol era without ping, where changes come through listen()
_CONNECTION_CLOSED = -32000
_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
Opener = Callable[[], AbstractAsyncContextManager["Client"]]


@dataclass(frozen=True, slots=True)
class MCPProgress:
    """A progress notification of a running MCP tool call, reported to the run's stream as a
    ``ToolProgress`` whose ``source`` is the tool's name."""

    server: str
    tool: str
    progress: float
    total: float | None
    message: str | None


@dataclass(slots=True)
class _Link:
    """The connection on one event loop: the task that owns the SDK client, and how to stop it."""

    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock
    listing: asyncio.Lock
    client: Client | None = None
    owner: asyncio.Task[None] | None = None
    stop: asyncio.Event | None = None
    lost: bool = False

    def alive(self) -> bool:
        return (
            self.client is not None
            and not self.lost
            and self.owner is not None
            and not self.owner.done()
        )


_LAUNCHERS = frozenset(
    {"npx", "node", "python", "python3", "uv", "uvx", "pipx", "deno", "bun", "bunx", "sh", "bash"}
)


def _short_name(command: str, args: Sequence[str]) -> str:
    """A name for a stdio server: the command's name (``mcp-server-filesystem``), or for a
    launcher (``npx``, ``python``, ...) the package or script it starts (``server-filesystem``)."""
    base = os.path.basename(command)
    if base.rstrip("0123456789.") not in _LAUNCHERS:
        return base or "mcp"
    for arg in args:
        if not arg.startswith("-"):
            script = arg.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py").removesuffix(".js")
            return script if script not in ("", "index", "main", "dist") else base
    return base


def _as_name(text: str) -> str:
    return _NAME.sub("_", text).strip("_")[:40] or "mcp"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class MCPServer(Tool):
    """An MCP server's tools (and resources) as a tool group; build one with ``stdio``, ``http``
    or ``sse``.

    Args:
        open_client: opens a connected ``mcp.Client`` (what the constructors build).
        name: the server's name, in errors and progress; its ``namespace`` by default.
        namespace: a tool whose name another tool has already is offered as
            ``{namespace}_{name}`` (``None``: the name, sanitized).
        timeout: seconds one tool call may take (``None``: the agent's ``ToolSettings``).
        connect_timeout: seconds to start the server and list its tools.
        tools: offer only these of the server's tools (``None``: all).
        resources: offer ``list_resources`` and ``read_resource`` when the server has resources.
        instructions: text added to the agent's instructions (``None``: what the server says
            about itself, if anything).
    """

    def __init__(
        self,
        open_client: Opener,
        *,
        name: str,
        namespace: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        tools: Collection[str] | None = None,
        resources: bool = True,
        instructions: str | None = None,
    ) -> None:
        super().__init__(name, instructions=instructions)
        self.namespace = _as_name(namespace or name)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.only = frozenset(tools) if tools is not None else None
        self.resources = resources
        self._open = open_client
        self._link: _Link | None = None
        self._listed = False
        self._stale = False

    # ----------------------------------------------------------------- constructors

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        mode: Literal["auto", "legacy"] = "auto",
        **options: Any,
    ) -> MCPServer:
        """A server this process starts (``command args``) and talks to over its stdin and
        stdout. It gets the SDK's allow-listed environment plus ``env``; its stderr goes to
        ``errlog`` (a file; default this process's stderr). ``options``: as for ``MCPServer``."""
        if not command:
            raise UsageError("MCPServer.stdio needs a command, e.g. 'npx' or 'python'")
        args = [str(a) for a in args]
        workdir = os.fspath(cwd) if cwd is not None else None
        server = cls(
            lambda: _stdio_client(server, command, args, env, workdir, errlog, mode),
            name=name or _short_name(command, args),
            **options,
        )
        return server

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        mode: Literal["auto", "legacy"] = "auto",
        **options: Any,
    ) -> MCPServer:
        """A server at ``url`` over streamable HTTP, with ``headers`` on every request (an
        ``Authorization`` header, say). ``options``: as for ``MCPServer``."""
        _check_url(url)
        server = cls(
            lambda: _http_client(server, url, dict(headers or {}), mode),
            name=name or _url_name(url),
            **options,
        )
        return server

    @classmethod
    def sse(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server at ``url`` over the legacy HTTP+SSE transport (``.../sse``)."""
        _check_url(url)
        server = cls(
            lambda: _sse_client(server, url, dict(headers or {})),
            name=name or _url_name(url),
            **options,
        )
        return server

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def prepare(self) -> None:
        """Connect (once) and list the tools (again when the server said they changed)."""
        await self.connect()

    async def connect(self) -> None:
        """Start (or reach) the server and list its tools, unless connected already;
        ``MCPServerError`` when it does not start, answer or list within ``connect_timeout``."""
        client = await self._client()
        if not self._listed or self._stale:
            link = self._link
            if link is None:
                raise MCPServerError(f"MCP server {self.name!r} was closed", server=self.name)
            async with link.listing:
                if not self._listed or self._stale:
                    await self._list(client)

    async def aclose(self) -> None:
        """Close the connection (a stdio server is stopped: stdin closed, then SIGTERM, then
        SIGKILL). The next run connects again."""
        link, self._link = self._link, None
        if link is not None and link.loop is _running_loop():
            await _stop(link)

    async def _client(self) -> Client:
        loop = asyncio.get_running_loop()
        link = self._link
        if link is None or link.loop is not loop:  # a new event loop: its own connection
            link = self._link = _Link(loop, asyncio.Lock(), asyncio.Lock())
        if link.alive():
            assert link.client is not None
            return link.client
        async with link.lock:
            if not link.alive():
                await _stop(link)
                await self._start(link)
            assert link.client is not None
            return link.client

    async def _start(self, link: _Link) -> None:
        if "mcp.client.client" not in sys.modules:  # its first import takes ~0.5 s
            await asyncio.to_thread(importlib.import_module, "mcp.client.client")
        ready: asyncio.Future[Client] = link.loop.create_future()
        link.stop, link.lost = asyncio.Event(), False
        link.owner = asyncio.create_task(self._own(ready, link.stop), name=f"mcp:{self.name}")
        try:
            async with asyncio.timeout(self.connect_timeout):
                link.client = await asyncio.shield(ready)
        except TimeoutError:
            link.owner.cancel()
            await _stop(link)
            raise MCPServerError(
                f"MCP server {self.name!r} did not answer within {self.connect_timeout:g} s; "
                "check that it starts (run its command in a terminal) or raise connect_timeout",
                server=self.name,
            ) from None
        except Exception as exc:
            raise self._failed_to_start(exc) from None
        self._listed = False

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """The owner task: enter the SDK client, hand it out, wait until told to stop (or the
        connection ends), leave it in this same task."""
        try:
            async with self._open() as client:
                ready.set_result(client)
                async with contextlib.AsyncExitStack() as stack:
                    await self._listen(client, stack)
                    await stop.wait()
        except asyncio.CancelledError:
            ready.cancel()  # the waiter gave up (or the loop is closing)
            raise
        except BaseException as exc:  # reported to the waiter, or logged
            if not ready.done():
                ready.set_exception(_leaf(exc))
            else:
                log.info("MCP server %r: the connection ended: %s", self.name, _leaf(exc))

    async def _listen(self, client: Client, stack: contextlib.AsyncExitStack) -> None:
        """On a 2026-07-28 connection, changes come through a listen stream (older ones send
        ``tools/list_changed`` to the message handler)."""
        if client.protocol_version != _MODERN:
            return
        tools = client.server_capabilities.tools
        if tools is None or not tools.list_changed:
            return
        try:
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
        except Exception as exc:  # the server offers no stream: the list is refreshed per run
            log.debug("MCP server %r: no listen stream: %s", self.name, exc)
            return
        watcher = asyncio.create_task(self._watch(subscription))
        stack.callback(watcher.cancel)

    async def _watch(self, subscription: AsyncIterator[Any]) -> None:
        with contextlib.suppress(Exception):
            async for _event in subscription:
                await self.tools_changed()

    async def tools_changed(self) -> None:
        """The server's tools changed (its notification): list them again; the agents that
        have this group offer the new list from their next model call."""
        self._stale = True  # before any await: a call that returns next lists them first
        await self._refresh()

    def _listing(self) -> bool:
        """Whether the tools are being listed again right now."""
        return self._link is not None and self._link.listing.locked()

    async def _refresh(self) -> None:
        link = self._link
        if link is None or not link.alive() or link.client is None:
            return
        async with link.listing:
            if self._stale:
                with contextlib.suppress(MCPServerError):
                    await self._list(link.client)

    def _failed_to_start(self, exc: BaseException) -> MCPServerError:
        exc = _leaf(exc)
        if isinstance(exc, FileNotFoundError):
            reason = f"its command was not found ({exc.filename or exc}); is it installed?"
        elif isinstance(exc, PermissionError):
            reason = f"its command may not be run ({exc})"
        elif _is_closed(exc):
            reason = "it exited before it answered (run its command in a terminal to see why)"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        return MCPServerError(f"MCP server {self.name!r} did not start: {reason}", server=self.name)

    def _lost(self) -> None:
        if self._link is not None:
            self._link.lost = True

    # ----------------------------------------------------------------- tools

    async def _list(self, client: Client) -> None:
        self._stale = False
        try:
            async with asyncio.timeout(self.connect_timeout):
                found = await _pages(lambda cursor: client.list_tools(cursor=cursor), "tools")
            has_resources = self.resources and client.server_capabilities.resources is not None
        except TimeoutError:
            self._stale = True
            raise MCPServerError(
                f"MCP server {self.name!r} did not list its tools within "
                f"{self.connect_timeout:g} s",
                server=self.name,
            ) from None
        except Exception as exc:
            self._stale = True
            if _is_closed(exc):
                self._lost()
            raise MCPServerError(
                f"MCP server {self.name!r} could not list its tools: {_leaf(exc)}",
                server=self.name,
            ) from None
        functions: dict[str, Function] = {}
        for spec in found:
            if self.only is not None and spec.name not in self.only:
                continue
            try:
                functions[spec.name] = self._function(spec)
            except MCPServerError as exc:  # the server's other tools stay usable
                log.warning("%s", exc)
        if has_resources:
            functions.update(self._resource_functions())
        if self.instructions is None and client.instructions:
            self.instructions = client.instructions
        changed = [(f.name, f.definition) for f in functions.values()] != [
            (f.name, f.definition) for f in self.functions.values()
        ]
        self.functions = functions
        self._listed = True
        if changed:
            self.revision += 1

    def _function(self, spec: Any) -> Function:
        name: str = spec.name
        hints = spec.annotations
        retry = bool(hints is not None and (hints.read_only_hint or hints.idempotent_hint))

        async def call(arguments: dict[str, Any], ctx: RunContext[Any]) -> str:
            return await self.call_tool(name, arguments, ctx, retry=retry)

        schema = dict(spec.input_schema or {"type": "object", "properties": {}})
        schema.setdefault("type", "object")
        try:
            return Function.from_schema(
                _as_tool_name(name),
                schema,
                call,
                description=spec.description or spec.title or "",
                timeout=self.timeout,
            )
        except UsageError as exc:
            raise MCPServerError(
                f"MCP server {self.name!r} offers a tool that cannot be used: {exc}",
                server=self.name,
            ) from None

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        ctx: RunContext[Any] | None = None,
        *,
        retry: bool = False,
    ) -> str:
        """Call the server's ``tool``: its result as text for the model; ``ToolError`` with the
        server's message when it reports an error. A server that exited is started again (the
        call is repeated once when the server marks the tool read-only or idempotent)."""
        for attempt in (1, 2):
            client = await self._client()
            try:
                result = await client.call_tool(
                    tool, arguments, progress_callback=_progress(self.name, tool, ctx)
                )
            except Exception as exc:
                if not _is_closed(exc):
                    message = f"MCP server {self.name!r} refused {tool}: {_leaf(exc)}"
                    raise ToolError(message) from None
                self._lost()
                if retry and attempt == 1:
                    continue
                raise ToolError(
                    f"MCP server {self.name!r} exited during {tool} (the connection closed); "
                    "it is started again for the next call. The call may or may not have "
                    "taken effect: check before repeating it."
                ) from None
            if self._stale or self._listing():  # the call changed the tool list: the next
                await self._refresh()  # turn offers the new one
            text = render_content(result)
            if result.is_error:
                raise ToolError(text or f"{tool} failed on MCP server {self.name!r}")
            return text
        raise AssertionError("unreachable")  # pragma: no cover

    # ----------------------------------------------------------------- resources, prompts

    def _resource_functions(self) -> dict[str, Function]:
        listing = {"type": "object", "properties": {}}
        reading = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "the resource's URI"}},
            "required": ["uri"],
        }

        async def list_resources(arguments: dict[str, Any], ctx: RunContext[Any]) -> str:
            found = await self.list_resources()
            lines = [f"{r.uri}  {r.name}" + (f": {r.description}" if r.description else "")
                     for r in found]  # fmt: skip
            return "\n".join(lines) or f"MCP server {self.name!r} has no resources."

        async def read_resource(arguments: dict[str, Any], ctx: RunContext[Any]) -> str:
            return await self.read_resource(str(arguments["uri"]))

        return {
            "list_resources": Function.from_schema(
                "list_resources", listing, list_resources,
                description=f"List the resources of MCP server {self.name!r} (URI and name).",
                timeout=self.timeout,
            ),
            "read_resource": Function.from_schema(
                "read_resource", reading, read_resource,
                description=f"Read one resource of MCP server {self.name!r} by its URI.",
                timeout=self.timeout,
            ),
        }  # fmt: skip

    async def list_resources(self) -> list[Resource]:
        """The server's resources (every page)."""
        client = await self._client()
        found: list[Resource] = await self._request(
            _pages(lambda c: client.list_resources(cursor=c), "resources")
        )
        return found

    async def read_resource(self, uri: str) -> str:
        """A resource's contents as text (binary contents are described, not included)."""
        client = await self._client()
        result = await self._request(client.read_resource(uri))
        parts = []
        for item in result.contents:
            text = getattr(item, "text", None)
            if text is not None:
                parts.append(text)
            else:
                size = len(item.blob) * 3 // 4
                parts.append(f"[binary {item.mime_type or 'data'}: {size} bytes]")
        return "\n".join(parts)

    async def list_prompts(self) -> list[Prompt]:
        """The server's prompts (every page)."""
        client = await self._client()
        found: list[Prompt] = await self._request(
            _pages(lambda c: client.list_prompts(cursor=c), "prompts")
        )
        return found

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> str:
        """The server's prompt ``name`` filled with ``arguments``, as text (its messages in
        order)."""
        client = await self._client()
        result = await self._request(client.get_prompt(name, arguments or {}))
        return "\n\n".join(render_block(m.content) for m in result.messages)

    def prompt_instructions(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> Callable[[RunContext[Any]], Awaitable[str]]:
        """The server's prompt ``name`` as an agent's instructions, fetched when each run
        starts: ``Agent(instructions=server.prompt_instructions("review"), tools=[server])``."""

        async def instructions(ctx: RunContext[Any]) -> str:
            return await self.get_prompt(name, arguments)

        return instructions

    async def _request(self, pending: Awaitable[Any]) -> Any:
        try:
            return await pending
        except Exception as exc:
            if _is_closed(exc):
                self._lost()
            raise ToolError(f"MCP server {self.name!r}: {_leaf(exc)}") from None

    def __repr__(self) -> str:
        return f"<MCPServer {self.name}: {', '.join(self.functions) or 'not listed yet'}>"


# --------------------------------------------------------------------- transports


@contextlib.asynccontextmanager
async def _stdio_client(
    server: MCPServer,
    command: str,
    args: list[str],
    env: dict[str, str] | None,
    cwd: str | None,
    errlog: TextIO | None,
    mode: str,
) -> AsyncIterator[Client]:
    from mcp import Client, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    transport = stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)
    async with Client(transport, mode=mode, message_handler=_handler(server), cache=None) as client:
        yield client


@contextlib.asynccontextmanager
async def _http_client(
    server: MCPServer, url: str, headers: dict[str, str], mode: str
) -> AsyncIterator[Client]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        handler = _handler(server)
        async with Client(transport, mode=mode, message_handler=handler, cache=None) as client:
            yield client


@contextlib.asynccontextmanager
async def _sse_client(
    server: MCPServer, url: str, headers: dict[str, str]
) -> AsyncIterator[Client]:
    from mcp import Client
    from mcp.client.sse import sse_client

    transport = sse_client(url, headers=headers)
    async with Client(transport, message_handler=_handler(server), cache=None) as client:
        yield client


def _handler(server: MCPServer) -> MessageHandlerFnT:
    """The SDK's message handler: a ``tools/list_changed`` notification refreshes the list."""
    from mcp_types import ToolListChangedNotification

    async def handle(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            server._stale = True  # now: the call that caused it lists them before it returns
            await server._refresh()

    return handle


async def _stop(link: _Link) -> None:
    """Let the owner task leave the SDK's contexts (the server is shut down), then forget it."""
    owner, link.owner, link.client = link.owner, None, None
    if owner is None:
        return
    if link.stop is not None:
        link.stop.set()
    done, _ = await asyncio.wait({owner}, timeout=10)  # the SDK stops a server within ~4 s
    if not done:
        owner.cancel()


# --------------------------------------------------------------------- helpers


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _check_url(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"an MCP server URL starts with http:// or https://, not {url[:100]!r}")


def _url_name(url: str) -> str:
    host = url.split("://", 1)[-1].split("/", 1)[0].split("@")[-1]
    return host.split(":", 1)[0] or "mcp"


def _as_tool_name(name: str) -> str:
    """An MCP tool's name as a model may call it (MCP names may hold dots or slashes)."""
    return _NAME.sub("_", name)[:64] or "tool"


def _is_closed(exc: BaseException) -> bool:
    exc = _leaf(exc)
    return getattr(exc, "code", None) == _CONNECTION_CLOSED or isinstance(
        exc, ConnectionError | EOFError | BrokenPipeError
    )


async def _pages(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paged MCP list (at most 100 pages: a server's cursor may never end)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await fetch(cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            break
    return items


def _progress(server: str, tool: str, ctx: RunContext[Any] | None) -> Any:
    if ctx is None:
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        ctx.report(tool, MCPProgress(server, tool, progress, total, message))

    return report


def render_block(block: ContentBlock) -> str:
    """One MCP content block as text for the model."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)  # type: ignore[union-attr]
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4  # type: ignore[union-attr]
        return f"[{kind} {block.mime_type}: {size} bytes]"  # type: ignore[union-attr]
    if kind == "resource_link":
        return f"[resource {block.uri}: {block.name}]"  # type: ignore[union-attr]
    if kind == "resource":
        resource = block.resource  # type: ignore[union-attr]
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {resource.uri}]\n{text}"
        return f"[resource {resource.uri}: binary {resource.mime_type or 'data'}]"
    return json.dumps(block.model_dump(mode="json", exclude_none=True))[:2000]


def render_content(result: CallToolResult) -> str:
    """A tool result as text: its content blocks; the structured content when there is no
    text."""
    parts = [render_block(b) for b in result.content]
    texts = any(getattr(b, "type", "") == "text" for b in result.content)
    if not texts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
