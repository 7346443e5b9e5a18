"""A scripted Anthropic Messages API server on 127.0.0.1, for tests and benchmarks.

It speaks the real wire format of ``POST /v1/messages``: JSON answers and server-sent-event
streams with the real event sequence (``message_start``, ``content_block_start``, ``ping``,
``content_block_delta`` with text, ``input_json_delta``, ``thinking_delta`` and
``signature_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``). Like the real
API it answers HTTP 400 with an ``invalid_request_error`` body when roles do not alternate, when
a ``tool_result`` does not answer a ``tool_use`` of the assistant turn right before it (or a
``tool_use`` is left unanswered), when more than four ``cache_control`` breakpoints are set, or
when a thinking tool loop leaves out the signed thinking block. It simulates prompt caching: the
prefix up to each ``cache_control`` breakpoint is remembered, and a later request that repeats it
reports ``cache_read_input_tokens`` (the rest up to the last breakpoint is
``cache_creation_input_tokens``).

```python
async with FakeAnthropicServer(lambda body: "hello") as server:
    model = Claude(id="claude-sonnet-4-5", api_key="test", base_url=server.base_url)
```

The replies are those of ``FakeOpenAIServer``: a string, an ``AssistantMessage`` (its
``reasoning`` becomes a signed ``thinking`` block, unless ``provider_data["anthropic_blocks"]``
gives the blocks), or a fault (``HTTPFault``, ``BadBody``, ``TruncatedStream``, ``Hang``,
``RawStream``).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from agentica.messages import AssistantMessage
from agentica.testing.openai_server import (
    BadBody,
    Hang,
    HTTPFault,
    RawStream,
    ServerReply,
    TruncatedStream,
    send_raw,
)

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["FakeAnthropicServer", "request_error"]

Responder: TypeAlias = Callable[[dict[str, Any]], ServerReply | Awaitable[ServerReply]]

_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_THINKING = ("thinking", "redacted_thinking")


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def _content(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def request_error(body: dict[str, Any]) -> str | None:
    """The API's complaint about ``body``, if it has one the real API would make."""
    if not body.get("model"):
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= max_tokens:
            return "`max_tokens` must be greater than `thinking.budget_tokens`."
    breakpoints = 0
    for block in [*(body.get("tools") or []), *(body.get("system") or [])]:
        if isinstance(block, dict) and "cache_control" in block:
            breakpoints += 1
    previous: dict[str, Any] | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if previous is not None and previous.get("role") == role:
            return (
                f"messages: roles must alternate between 'user' and 'assistant', but found "
                f"multiple '{role}' roles in a row (messages.{index})"
            )
        content = _content(message)
        if not content:
            return f"messages.{index}: all messages must have non-empty content"
        uses = {
            b.get("id")
            for b in (_content(previous) if previous and previous["role"] == "assistant" else [])
            if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        answered: set[Any] = set()
        seen_other = False
        for position, block in enumerate(content):
            if not isinstance(block, dict):
                return f"messages.{index}.content.{position}: Input should be an object"
            kind = block.get("type")
            if "cache_control" in block:
                breakpoints += 1
                if kind in _THINKING:
                    return (
                        f"messages.{index}.content.{position}: cache_control cannot be set "
                        "on thinking blocks"
                    )
            if kind == "text" and not str(block.get("text") or "").strip():
                return f"messages.{index}.content.{position}: text content blocks must be non-empty"
            if kind == "tool_result":
                if role != "user":
                    return f"messages.{index}: tool_result blocks are only allowed in user messages"
                if seen_other:
                    return (
                        f"messages.{index}: tool_result blocks must come first in the content, "
                        "before any other block"
                    )
                if block.get("tool_use_id") not in uses:
                    return (
                        f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous message."
                    )
                answered.add(block.get("tool_use_id"))
            else:
                seen_other = True
            if kind == "tool_use" and role != "assistant":
                return f"messages.{index}: tool_use blocks are only allowed in assistant messages"
            if kind == "thinking" and not block.get("signature"):
                return f"messages.{index}.content.{position}.thinking.signature: Field required"
        if uses and uses - answered:
            missing = ", ".join(sorted(str(u) for u in uses - answered))
            return (
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {missing}. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message."
            )
        previous = message
    last = messages[-1]
    if (
        thinking.get("type") == "enabled"
        and last.get("role") == "user"
        and len(messages) >= 2
        and any(b.get("type") == "tool_result" for b in _content(last) if isinstance(b, dict))
    ):
        first = _content(messages[-2])[0]
        if not isinstance(first, dict) or first.get("type") not in _THINKING:
            return (
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                f"`redacted_thinking`, but found `{first.get('type')}`. When `thinking` is "
                "enabled, a final `assistant` message must start with a thinking block."
            )
    if breakpoints > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
    return None


def _strip_cache(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


class FakeAnthropicServer:
    """A scripted Messages API server; ``responder(request_body)`` decides each reply.

    Args:
        responder: returns the reply for a request body: a string (text), an
            ``AssistantMessage`` (text, tool calls, reasoning; tool-call ids are filled in if
            empty), or a fault (``HTTPFault``, ``BadBody``, ``TruncatedStream``, ``Hang``,
            ``RawStream``); may be async. ``TruncatedStream(reply, chunks=n)`` sends ``n`` SSE
            events, then drops the connection.
        latency: seconds to wait before answering each request.
        validate: answer 400 like the real API for malformed conversations (see
            ``request_error``) and requests without an ``anthropic-version`` header.
        api_key: when set, requests whose ``x-api-key`` differs get a 401.

    ``requests`` and ``headers`` record each request's body and headers.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        validate: bool = True,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
    ) -> None:
        self.responder = responder
        self.latency = latency
        self.validate = validate
        self.api_key = api_key
        self.host = host
        self.port = port
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._ids = itertools.count(1)
        self._cache: dict[str, int] = {}  # prefix digest -> its tokens
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> FakeAnthropicServer:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        # Cancel a handler when its client disconnects, so a ``Hang`` the client gave up on does
        # not hold ``stop()`` for aiohttp's shutdown timeout.
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

    async def __aenter__(self) -> FakeAnthropicServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ----------------------------------------------------------------- handling

    @staticmethod
    def _error(status: int, kind: str, text: str) -> web.Response:
        from aiohttp import web

        return web.json_response(
            {
                "type": "error",
                "error": {"type": kind, "message": text},
                "request_id": "req_fake",
            },
            status=status,
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "invalid_request_error", "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return self._error(400, "invalid_request_error", "The request body is not an object.")
        if self.record:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return self._error(401, "authentication_error", "invalid x-api-key")
        if self.validate:
            if not request.headers.get("anthropic-version"):
                return self._error(
                    400, "invalid_request_error", "anthropic-version: header is required"
                )
            problem = request_error(body)
            if problem:
                return self._error(400, "invalid_request_error", problem)
        reply = self.responder(body)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            return self._error(504, "api_error", "hung")
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
        blocks = self._blocks(message)
        stop = message.finish_reason
        stop = _ANTHROPIC_STOP.get(stop, stop) if stop else None
        stop = stop or ("tool_use" if message.tool_calls else "end_turn")
        usage = self._usage(body, blocks)
        answer = {
            "id": f"msg_fake{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if body.get("stream"):
            return await self._stream(request, answer, truncate_after)
        return web.json_response(answer)

    def _blocks(self, message: AssistantMessage) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        given = (message.provider_data or {}).get("anthropic_blocks")
        if isinstance(given, list):
            blocks.extend(given)
        elif message.reasoning:
            signature = hashlib.sha256(message.reasoning.encode()).hexdigest()[:32]
            blocks.append(
                {"type": "thinking", "thinking": message.reasoning, "signature": "sig" + signature}
            )
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id or f"toolu_fake{next(self._ids):04d}",
                    "name": call.name,
                    "input": arguments if isinstance(arguments, dict) else {},
                }
            )
        return blocks

    def _usage(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, int]:
        """Token counts (about 4 characters a token), with prompt caching simulated."""
        segments: list[Any] = []  # the prompt in cache order: tools, system, messages
        marks: list[int] = []  # positions of segments with cache_control
        for tool in body.get("tools") or []:
            segments.append(_strip_cache(tool))
            if "cache_control" in tool:
                marks.append(len(segments) - 1)
        system = body.get("system") or []
        for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
            segments.append(_strip_cache(block))
            if "cache_control" in block:
                marks.append(len(segments) - 1)
        for message in body.get("messages") or []:
            segments.append(message.get("role"))
            for block in _content(message):
                segments.append(_strip_cache(block))
                if isinstance(block, dict) and "cache_control" in block:
                    marks.append(len(segments) - 1)
        digests: list[str] = []
        totals: list[int] = []
        digest, total = hashlib.sha256(), 0
        for segment in segments:
            digest.update(json.dumps(segment, sort_keys=True).encode())
            total += _tokens(segment)
            digests.append(digest.hexdigest())
            totals.append(total)
        read = written = 0
        if marks:
            last = marks[-1]
            hit = next((i for i in range(last, -1, -1) if digests[i] in self._cache), None)
            read = totals[hit] if hit is not None else 0
            written = totals[last] - read
            for mark in marks:
                self._cache[digests[mark]] = totals[mark]
        output = sum(_tokens(b) for b in blocks) + 1
        return {
            "input_tokens": total - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": output,
        }

    def _events(self, answer: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        usage = answer["usage"]
        start_usage = usage | {"output_tokens": 1}
        start = {k: v for k, v in answer.items() if k != "usage"} | {
            "content": [],
            "stop_reason": None,
            "usage": start_usage,
        }
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]

        def delta(index: int, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            return (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": payload},
            )

        for index, block in enumerate(answer["content"]):
            kind = block["type"]
            if kind == "text":
                opening: dict[str, Any] = {"type": "text", "text": ""}
            elif kind == "thinking":
                opening = {"type": "thinking", "thinking": "", "signature": ""}
            elif kind == "tool_use":
                opening = {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": {},
                }
            else:  # redacted_thinking and anything else arrive whole
                opening = block
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": opening},
                )
            )
            if index == 0:
                events.append(("ping", {"type": "ping"}))
            if kind == "text":
                words = block["text"].split(" ")
                for number, word in enumerate(words):
                    piece = word if number == len(words) - 1 else word + " "
                    events.append(delta(index, {"type": "text_delta", "text": piece}))
            elif kind == "thinking":
                text = block["thinking"]
                half = len(text) // 2
                for piece in (text[:half], text[half:]):
                    events.append(delta(index, {"type": "thinking_delta", "thinking": piece}))
                events.append(
                    delta(index, {"type": "signature_delta", "signature": block["signature"]})
                )
            elif kind == "tool_use":
                arguments = json.dumps(block["input"])
                half = len(arguments) // 2
                for piece in (arguments[:half], arguments[half:]):
                    events.append(delta(index, {"type": "input_json_delta", "partial_json": piece}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    async def _stream(
        self, request: web.Request, answer: dict[str, Any], truncate_after: int | None
    ) -> web.StreamResponse:
        from aiohttp import web

        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for number, (name, data) in enumerate(self._events(answer)):
            if truncate_after is not None and number >= truncate_after:
                if request.transport is not None:
                    request.transport.close()  # an abrupt end, as when a server dies
                return response
            await response.write(
                f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
            )
        await response.write_eof()
        return response
