"""A scripted Anthropic Messages API server on 127.0.0.1, for tests and benchmarks: the real wire
format of ``POST /v1/messages`` (JSON answers and event streams), the real API's refusals of a
malformed conversation (``request_error``), and simulated prompt caching (``FakeAnthropicServer``).

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

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from agentica.messages import AssistantMessage
from agentica.testing._server import Responder, ScriptedServer

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["FakeAnthropicServer", "request_error"]

_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_THINKING = ("thinking", "redacted_thinking")
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")
_TOOL_ID_RULE = "String should match pattern '^[a-zA-Z0-9_-]+$'"


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def _content(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def request_error(body: dict[str, Any]) -> str | None:
    """The API's complaint about ``body``, if it has one the real API would make."""
    problem = _parameter_error(body)
    if problem:
        return problem
    messages: list[dict[str, Any]] = body["messages"]
    breakpoints = sum(
        1
        for block in [*(body.get("tools") or []), *(body.get("system") or [])]
        if isinstance(block, dict) and "cache_control" in block
    )
    previous: dict[str, Any] | None = None
    for index, message in enumerate(messages):
        problem, marks = _message_error(index, message, previous)
        if problem:
            return problem
        breakpoints += marks
        previous = message
    problem = _thinking_loop_error(body.get("thinking") or {}, messages)
    if problem:
        return problem
    if not body.get("tools") and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
        for m in messages
        for b in _content(m)
    ):
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    if breakpoints > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
    return None


def _parameter_error(body: dict[str, Any]) -> str | None:
    """What is wrong with the request's top-level parameters, if anything."""
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
    return None


def _message_error(
    index: int, message: dict[str, Any], previous: dict[str, Any] | None
) -> tuple[str | None, int]:
    """What is wrong with ``messages[index]``, if anything, and its ``cache_control`` count."""
    role = message.get("role")
    if role not in ("user", "assistant"):
        return f"messages.{index}.role: Input should be 'user' or 'assistant'", 0
    if previous is not None and previous.get("role") == role:
        return (
            f"messages: roles must alternate between 'user' and 'assistant', but found "
            f"multiple '{role}' roles in a row (messages.{index})"
        ), 0
    content = _content(message)
    if not content:
        return f"messages.{index}: all messages must have non-empty content", 0
    uses = {
        b.get("id")
        for b in (_content(previous) if previous and previous["role"] == "assistant" else [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    answered: set[Any] = set()
    seen_other = False
    marks = 0
    for position, block in enumerate(content):
        where = f"messages.{index}.content.{position}"
        if not isinstance(block, dict):
            return f"{where}: Input should be an object", marks
        marks += "cache_control" in block
        if block.get("type") == "tool_result":
            problem = _result_error(index, where, block, role, uses, seen_other)
            answered.add(block.get("tool_use_id"))
        else:
            problem = _block_error(index, where, block, role)
            seen_other = True
        if problem:
            return problem, marks
    if uses and uses - answered:
        missing = ", ".join(sorted(str(u) for u in uses - answered))
        return (
            f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {missing}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        ), marks
    return None, marks


def _block_error(index: int, where: str, block: dict[str, Any], role: str) -> str | None:
    """What is wrong with one content block other than a ``tool_result``, if anything."""
    kind = block.get("type")
    if "cache_control" in block and kind in _THINKING:
        return f"{where}: cache_control cannot be set on thinking blocks"
    if kind == "text" and not str(block.get("text") or "").strip():
        return f"{where}: text content blocks must be non-empty"
    if kind == "tool_use" and role != "assistant":
        return f"messages.{index}: tool_use blocks are only allowed in assistant messages"
    if kind == "tool_use" and not _TOOL_ID.fullmatch(str(block.get("id") or "")):
        return f"{where}.tool_use.id: {_TOOL_ID_RULE}"
    if kind == "thinking" and not block.get("signature"):
        return f"{where}.thinking.signature: Field required"
    return None


def _result_error(
    index: int, where: str, block: dict[str, Any], role: str, uses: set[Any], seen_other: bool
) -> str | None:
    """What is wrong with a ``tool_result`` block, if anything."""
    if role != "user":
        return f"messages.{index}: tool_result blocks are only allowed in user messages"
    if seen_other:
        return (
            f"messages.{index}: tool_result blocks must come first in the content, "
            "before any other block"
        )
    if not _TOOL_ID.fullmatch(str(block.get("tool_use_id") or "")):
        return f"{where}.tool_result.tool_use_id: {_TOOL_ID_RULE}"
    if block.get("tool_use_id") not in uses:
        return (
            f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
            "`tool_use` block in the previous message."
        )
    return None


def _thinking_loop_error(thinking: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """With thinking on, a tool loop must replay the signed thinking block that started it."""
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
    return None


def _strip_cache(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


class FakeAnthropicServer(ScriptedServer):
    """A scripted Messages API server; ``responder(request_body)`` decides each reply.

    Streams carry the real event sequence (``message_start``, ``content_block_start``, ``ping``,
    ``content_block_delta`` with text, ``input_json_delta``, ``thinking_delta`` and
    ``signature_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``). Like the
    real API it answers HTTP 400 with an ``invalid_request_error`` body when roles do not
    alternate, when a ``tool_result`` does not answer a ``tool_use`` of the assistant turn right
    before it (or a ``tool_use`` is left unanswered), when a tool-call id has other characters
    than letters, digits, ``_`` and ``-``, when more than four ``cache_control``
    breakpoints are set, or when a thinking tool loop leaves out the signed thinking block. It
    simulates prompt caching: the prefix up to each ``cache_control`` breakpoint is remembered,
    and a later request that repeats it reports ``cache_read_input_tokens`` (the rest up to the
    last breakpoint is ``cache_creation_input_tokens``).

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

    route = "/v1/messages"
    not_json = "The request body is not valid JSON."
    not_object = "The request body is not an object."
    hang_kind = "api_error"

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
        super().__init__(responder, latency=latency, host=host, port=port, record=record)
        self.validate = validate
        self.api_key = api_key
        self.headers: list[dict[str, str]] = []
        self._cache: dict[str, int] = {}  # prefix digest -> its tokens

    # ----------------------------------------------------------------- handling

    def _error(self, status: int, text: str, kind: str = "invalid_request_error") -> web.Response:
        from aiohttp import web

        return web.json_response(
            {
                "type": "error",
                "error": {"type": kind, "message": text},
                "request_id": "req_fake",
            },
            status=status,
        )

    def _record(self, request: web.Request, body: dict[str, Any]) -> None:
        super()._record(request, body)
        self.headers.append(dict(request.headers))

    def _refusal(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return self._error(401, "invalid x-api-key", "authentication_error")
        if not self.validate:
            return None
        if not request.headers.get("anthropic-version"):
            return self._error(400, "anthropic-version: header is required")
        problem = request_error(body)
        return self._error(400, problem) if problem else None

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        message: AssistantMessage,
        truncate_after: int | None,
    ) -> web.StreamResponse:
        from aiohttp import web

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
        if not body.get("stream"):
            return web.json_response(answer)
        events = [
            f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
            for name, data in _events(answer)
        ]
        return await self._send_events(
            request,
            events,
            truncate_after,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
        )

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


def _events(answer: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stream of events that sends ``answer``, as the real API orders them."""
    usage = answer["usage"]
    start = {k: v for k, v in answer.items() if k != "usage"} | {
        "content": [],
        "stop_reason": None,
        "usage": usage | {"output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(answer["content"]):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": _opening(block)},
            )
        )
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        for payload in _block_deltas(block):
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": payload},
                )
            )
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


def _opening(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as ``content_block_start`` opens it (its content follows as deltas)."""
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": ""}
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    return block  # redacted_thinking and anything else arrive whole


def _block_deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``delta`` payloads that send a content block's content."""
    kind = block["type"]
    if kind == "text":
        words = block["text"].split(" ")
        return [
            {"type": "text_delta", "text": word if number == len(words) - 1 else word + " "}
            for number, word in enumerate(words)
        ]
    if kind == "thinking":
        text = block["thinking"]
        half = len(text) // 2
        return [
            {"type": "thinking_delta", "thinking": text[:half]},
            {"type": "thinking_delta", "thinking": text[half:]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    if kind == "tool_use":
        arguments = json.dumps(block["input"])
        half = len(arguments) // 2
        return [
            {"type": "input_json_delta", "partial_json": arguments[:half]},
            {"type": "input_json_delta", "partial_json": arguments[half:]},
        ]
    return []
