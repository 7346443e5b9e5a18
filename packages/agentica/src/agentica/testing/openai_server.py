"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

It speaks the real Chat Completions wire format (JSON and server-sent-event streams with
tool-call deltas and usage), checks that every tool result answers a pending ``tool_call_id``
(answering HTTP 400 like the real API otherwise), waits a configurable latency per request, and
can misbehave on demand: HTTP errors, bodies that are not JSON, streams cut short, hangs, and
hand-made bodies sent piece by piece (``RawStream``: any bytes, slowly if asked).

```python
async with FakeOpenAIServer(lambda body: "hello") as server:
    model = OpenAILike(id="fake", base_url=server.base_url)
```

Run it as a process (the benchmarks do): ``python -m agentica.testing
--responder package.module:function --latency 0.1`` prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import itertools
import json
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from agentica.messages import AssistantMessage, ToolCall, Usage
from agentica.models.openai_wire import chunk_body, completion_body

if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "BadBody",
    "FakeOpenAIServer",
    "HTTPFault",
    "Hang",
    "RawStream",
    "ServerReply",
    "TruncatedStream",
    "tool_pair_error",
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


ServerReply: TypeAlias = (
    AssistantMessage | str | HTTPFault | BadBody | TruncatedStream | Hang | RawStream
)
Responder: TypeAlias = Callable[[dict[str, Any]], ServerReply | Awaitable[ServerReply]]


def tool_pair_error(messages: list[dict[str, Any]]) -> str | None:
    """The API's complaint about unanswered or unknown tool calls in ``messages``, if any."""
    pending: dict[str, str] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (
                    f"Invalid parameter: messages[{index}] with role 'tool' must be a response to "
                    f"a preceding message with 'tool_calls' (unknown tool_call_id {call_id!r})."
                )
            del pending[call_id]
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(pending)} "
                f"(before messages[{index}])."
            )
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if not call.get("id"):
                    return f"messages[{index}].tool_calls has a call without an id"
                pending[call["id"]] = call.get("function", {}).get("name", "")
    if pending:
        return f"Tool calls without results at the end of messages: {', '.join(pending)}."
    return None


def _usage(body: dict[str, Any], message: AssistantMessage) -> Usage:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = (
        len(message.content or "") // 4
        + sum(len(c.arguments) // 4 + 5 for c in message.tool_calls)
        + 1
    )
    return Usage(input_tokens=prompt, output_tokens=completion)


class FakeOpenAIServer:
    """A scripted Chat Completions server; ``responder(request_body)`` decides each reply.

    Args:
        responder: returns the reply for a request body: a string (text), an
            ``AssistantMessage`` (text and/or tool calls; ids are filled in if empty), or a fault
            (``HTTPFault``, ``BadBody``, ``TruncatedStream``, ``Hang``, ``RawStream``); may be
            async.
        latency: seconds to wait before answering each request.
        validate_tool_pairs: answer 400 when the messages break tool-call pairing.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        validate_tool_pairs: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
    ) -> None:
        self.responder = responder
        self.latency = latency
        self.validate_tool_pairs = validate_tool_pairs
        self.host = host
        self.port = port
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> FakeOpenAIServer:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        # Cancel a handler when its client disconnects (as a real server does), so a ``Hang``
        # the client gave up on does not hold ``stop()`` for aiohttp's 60 s shutdown timeout.
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=1024)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAIServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.")
        if self.record:
            self.requests.append(body)
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.validate_tool_pairs:
            problem = tool_pair_error(body.get("messages") or [])
            if problem:
                return self._error(400, problem)
        reply = self.responder(body)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            return self._error(504, "hung")
        if isinstance(reply, HTTPFault):
            payload = reply.body if isinstance(reply.body, bytes | str) else json.dumps(reply.body)
            return web.Response(
                status=reply.status,
                body=payload,
                headers=reply.headers,
                content_type="application/json",
            )
        if isinstance(reply, BadBody):
            return web.Response(status=200, body=reply.body, content_type="application/json")
        if isinstance(reply, RawStream):
            return await send_raw(request, reply)
        truncate_after: int | None = None
        if isinstance(reply, TruncatedStream):
            truncate_after = reply.chunks
            reply = reply.reply
        message = AssistantMessage(content=reply) if isinstance(reply, str) else reply
        message = AssistantMessage(
            content=message.content,
            reasoning=message.reasoning,
            tool_calls=[
                ToolCall(id=c.id or f"call_{next(self._ids)}", name=c.name, arguments=c.arguments)
                for c in message.tool_calls
            ],
        )
        model = body.get("model", "fake")
        if body.get("stream"):
            return await self._stream(request, body, message, model, truncate_after)
        return web.json_response(
            completion_body(
                message,
                model=model,
                response_id=f"chatcmpl-{next(self._ids)}",
                usage=_usage(body, message),
            )
        )

    def _error(self, status: int, text: str) -> web.Response:
        from aiohttp import web

        return web.json_response(
            {
                "error": {
                    "message": text,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            },
            status=status,
        )

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        message: AssistantMessage,
        model: str,
        truncate_after: int | None,
    ) -> web.StreamResponse:
        from aiohttp import web

        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        rid = f"chatcmpl-{next(self._ids)}"
        chunks = [
            chunk_body(response_id=rid, model=model, delta={"role": "assistant", "content": ""})
        ]
        if message.reasoning:
            chunks.append(
                chunk_body(
                    response_id=rid, model=model, delta={"reasoning_content": message.reasoning}
                )
            )
        words = (message.content or "").split(" ") if message.content else []
        for n, word in enumerate(words):
            piece = word if n == len(words) - 1 else word + " "
            chunks.append(chunk_body(response_id=rid, model=model, delta={"content": piece}))
        for index, c in enumerate(message.tool_calls):
            half = len(c.arguments) // 2
            first = {"index": index, "id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments[:half]}}  # fmt: skip
            rest = {"index": index, "function": {"arguments": c.arguments[half:]}}
            chunks.append(chunk_body(response_id=rid, model=model, delta={"tool_calls": [first]}))
            chunks.append(chunk_body(response_id=rid, model=model, delta={"tool_calls": [rest]}))
        finish = "tool_calls" if message.tool_calls else "stop"
        chunks.append(chunk_body(response_id=rid, model=model, delta={}, finish_reason=finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(chunk_body(response_id=rid, model=model, usage=_usage(body, message)))
        for number, data in enumerate(chunks):
            if truncate_after is not None and number >= truncate_after:
                if request.transport is not None:
                    request.transport.close()  # an abrupt end, as when a server dies
                return response
            await response.write(data)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _load(path: str) -> Responder:
    module, _, name = path.partition(":")
    responder = getattr(importlib.import_module(module), name)
    assert callable(responder)
    return responder  # type: ignore[no-any-return]


async def _serve(args: argparse.Namespace) -> None:
    server = FakeOpenAIServer(
        _load(args.responder), latency=args.latency, port=args.port, record=False
    )
    await server.start()
    sys.stdout.write(f"PORT {server.port}\n")
    sys.stdout.flush()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--responder", required=True, help="module:function deciding replies")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
