"""What the scripted provider servers (``FakeOpenAIServer``, ``FakeAnthropicServer``) share: the
faults a responder can ask for, and ``ScriptedServer``: start/stop on 127.0.0.1, the request log,
latency, and the handling of each request up to the provider's own answer."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias

from agentica.messages import AssistantMessage

if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "BadBody",
    "HTTPFault",
    "Hang",
    "RawStream",
    "Responder",
    "ScriptedServer",
    "ServerReply",
    "TruncatedStream",
    "send_raw",
]


@dataclass(slots=True)
class HTTPFault:
    """Answer with this HTTP status, body and headers."""

    status: int
    body: Any = field(default_factory=lambda: {"error": {"message": "injected failure"}})
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class BadBody:
    """Answer 200 with this raw body (for example, text that is not JSON)."""

    body: bytes = b"this is not json"


@dataclass(slots=True)
class TruncatedStream:
    """Stream ``reply`` but close the connection after ``chunks`` chunks, without ``[DONE]``."""

    reply: AssistantMessage | str
    chunks: int = 1


@dataclass(slots=True)
class Hang:
    """Wait this many seconds before answering anything."""

    seconds: float = 3600.0


@dataclass(slots=True)
class RawStream:
    """Answer 200 and send ``pieces`` as the body, ``interval`` seconds apart, then end it.

    The pieces are sent as they are (hand-made server-sent events, keep-alive comments, bytes
    that are not events at all), for probing how a client copes with what a careless server
    sends; ``pieces`` may be a generator, so a slow trickle need not be built in advance.
    """

    pieces: Iterable[bytes]
    interval: float = 0.0
    content_type: str = "text/event-stream"


ServerReply: TypeAlias = (
    AssistantMessage | str | HTTPFault | BadBody | TruncatedStream | Hang | RawStream
)
Responder: TypeAlias = Callable[[dict[str, Any]], ServerReply | Awaitable[ServerReply]]


async def send_raw(request: web.Request, raw: RawStream) -> web.StreamResponse:
    """Send a ``RawStream`` answer (shared by the scripted servers)."""
    from aiohttp import web

    response = web.StreamResponse(headers={"Content-Type": raw.content_type})
    await response.prepare(request)
    for number, piece in enumerate(raw.pieces):
        if number and raw.interval:
            await asyncio.sleep(raw.interval)
        await response.write(piece)
    await response.write_eof()
    return response


async def _send_fault(
    request: web.Request, reply: HTTPFault | BadBody | RawStream
) -> web.StreamResponse:
    from aiohttp import web

    if isinstance(reply, RawStream):
        return await send_raw(request, reply)
    if isinstance(reply, BadBody):
        return web.Response(status=200, body=reply.body, content_type="application/json")
    payload = reply.body if isinstance(reply.body, bytes | str) else json.dumps(reply.body)
    return web.Response(
        status=reply.status, body=payload, headers=reply.headers, content_type="application/json"
    )


class ScriptedServer:
    """A scripted provider server on ``host``:``port`` (0: a free port, known once started);
    ``responder(request_body)`` decides each reply.

    Each request is read (a body that is not JSON gets a 400), logged in ``requests`` when
    ``record`` is on, delayed by ``latency`` seconds, checked (``_refusal``), and answered with
    the responder's reply: a fault (``HTTPFault``, ``BadBody``, ``RawStream``, ``Hang``) is sent
    as asked; a text or an ``AssistantMessage``, possibly in a ``TruncatedStream``, is answered
    in the provider's format (``_answer``). A subclass gives its ``route``, its ``_error`` body,
    its checks and its answer.
    """

    route: ClassVar[str]  # the POST path the API answers on
    base_path: ClassVar[str] = ""  # what ``base_url`` adds to the host and port
    not_json: ClassVar[str]  # the 400 message for a body that is not JSON
    not_object: ClassVar[str | None] = None  # the 400 message for JSON that is not an object
    hang_kind: ClassVar[str]  # the error type of the 504 after a ``Hang``

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
    ) -> None:
        self.responder = responder
        self.latency = latency
        self.host = host
        self.port = port
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.base_path}"

    async def start(self) -> Self:
        # aiohttp's first import takes 0.2-0.4 s (its SSL context): not on the event loop
        web = await asyncio.to_thread(importlib.import_module, "aiohttp.web")
        app = web.Application()
        app.router.add_post(self.route, self._handle)
        # Cancel a handler when its client disconnects (as a real server does), so a ``Hang``
        # the client gave up on does not hold ``stop()`` for aiohttp's 60 s shutdown timeout.
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ----------------------------------------------------------------- the provider's part

    def _error(self, status: int, text: str, kind: str = "invalid_request_error") -> web.Response:
        """An error answer in the provider's format."""
        raise NotImplementedError

    def _refusal(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        """The error answer to a request the real API would refuse (``None``: accepted)."""
        raise NotImplementedError

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        message: AssistantMessage,
        truncate_after: int | None,
    ) -> web.StreamResponse:
        """``message`` in the provider's format: JSON, or a stream cut after
        ``truncate_after`` events when that is set."""
        raise NotImplementedError

    def _record(self, request: web.Request, body: dict[str, Any]) -> None:
        self.requests.append(body)

    # ----------------------------------------------------------------- handling

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, self.not_json)
        if self.not_object is not None and not isinstance(body, dict):
            return self._error(400, self.not_object)
        if self.record:
            self._record(request, body)
        if self.latency:
            await asyncio.sleep(self.latency)
        refusal = self._refusal(request, body)
        if refusal is not None:
            return refusal
        reply = self.responder(body)
        if inspect.isawaitable(reply):
            reply = await reply
        return await self._reply(request, body, reply)

    async def _reply(
        self, request: web.Request, body: dict[str, Any], reply: ServerReply
    ) -> web.StreamResponse:
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            return self._error(504, "hung", self.hang_kind)
        if isinstance(reply, HTTPFault | BadBody | RawStream):
            return await _send_fault(request, reply)
        truncate_after: int | None = None
        if isinstance(reply, TruncatedStream):
            truncate_after = reply.chunks
            reply = reply.reply
        message = AssistantMessage(content=reply) if isinstance(reply, str) else reply
        return await self._answer(request, body, message, truncate_after)

    @staticmethod
    async def _send_events(
        request: web.Request,
        events: Iterable[bytes],
        truncate_after: int | None,
        *,
        headers: Mapping[str, str],
        tail: bytes = b"",
    ) -> web.StreamResponse:
        """Stream ``events``, then ``tail``; with ``truncate_after``, drop the connection after
        that many events instead (an abrupt end, as when a server dies)."""
        from aiohttp import web

        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        for number, data in enumerate(events):
            if truncate_after is not None and number >= truncate_after:
                if request.transport is not None:
                    request.transport.close()
                return response
            await response.write(data)
        if tail:
            await response.write(tail)
        await response.write_eof()
        return response
