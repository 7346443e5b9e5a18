"""Deterministic models for tests: scripted replies, a user function, and call-every-tool.

They implement the same ``Model`` protocol as real providers (including streaming, which splits
replies into chunks and tool-call arguments into pieces), so framework logic is tested on the real
run loop without a network. Every request a model receives is recorded in ``requests``.

```python
model = ScriptedModel([tool_calls(call("fetch", i=1), call("fetch", i=2)), "done"])
agent = Agent(model=model, tools=[fetch])
assert (await agent.run("go")).content == "done"
assert len(model.requests) == 2
```
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agentica.errors import ModelError, UsageError
from agentica.messages import (
    AssistantMessage,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolMessage,
    Usage,
)
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelStreamEvent,
    ResponseDone,
    StreamAssembler,
)
from agentica.models.pricing import ModelPrice

__all__ = [
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "StreamReply",
    "ToolCallingModel",
    "call",
    "chunks",
    "model_error",
    "text",
    "tool_calls",
]


@dataclass(slots=True, kw_only=True)
class StreamReply:
    """A reply streamed as the given text chunks (and, optionally, tool calls after them)."""

    chunks: list[str]
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _ErrorReply:
    error: BaseException


Reply: TypeAlias = str | AssistantMessage | StreamReply | _ErrorReply


def text(content: str) -> AssistantMessage:
    """A plain text reply."""
    return AssistantMessage(content=content)


def call(name: str, arguments: dict[str, Any] | str | None = None, /, **kwargs: Any) -> ToolCall:
    """One tool call: ``call("fetch", i=1)`` or ``call("fetch", '{"i": 1}')`` (raw JSON kept)."""
    if isinstance(arguments, str):
        raw = arguments
    else:
        raw = json.dumps({**(arguments or {}), **kwargs})
    return ToolCall(id="", name=name, arguments=raw)


def tool_calls(*calls: ToolCall | str, content: str | None = None) -> AssistantMessage:
    """A reply with one or several (parallel) tool calls; a bare name means no arguments."""
    made = [c if isinstance(c, ToolCall) else call(c) for c in calls]
    return AssistantMessage(content=content, tool_calls=made)


def chunks(*parts: str) -> StreamReply:
    """A text reply streamed as exactly these chunks."""
    return StreamReply(chunks=list(parts))


def model_error(error: BaseException | str) -> _ErrorReply:
    """A reply that raises ``error`` (a string becomes a retryable ``ModelError``)."""
    return _ErrorReply(
        ModelError(error, provider="scripted", retryable=True) if isinstance(error, str) else error
    )


def _estimate(messages: Sequence[Message]) -> int:
    total = 0
    for m in messages:
        content = getattr(m, "content", None)
        if isinstance(content, str):
            total += len(content) // 4 + 4
    return total


class _RecordingModel:
    """Shared plumbing: ids, request recording, usage, streaming a finished reply."""

    def __init__(
        self,
        *,
        id: str,
        latency: float = 0.0,
        price: ModelPrice | None = None,
        context_window: int | None = None,
    ) -> None:
        self._id = id
        self.latency = latency
        self.price = price
        self.context_window = context_window
        self.requests: list[ModelRequest] = []
        self._ids = itertools.count(1)

    @property
    def id(self) -> str:
        return self._id

    @property
    def provider(self) -> str:
        return "scripted"

    async def aclose(self) -> None:
        return None

    async def _reply(self, request: ModelRequest) -> Reply:  # pragma: no cover - abstract
        raise NotImplementedError

    def _finish(self, message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
        calls = [
            ToolCall(id=c.id or f"call_{next(self._ids)}", name=c.name, arguments=c.arguments)
            for c in message.tool_calls
        ]
        usage = message.usage or Usage(
            input_tokens=_estimate(request.messages),
            output_tokens=len(message.content or "") // 4 + 10 * len(calls) + 1,
        )
        return AssistantMessage(
            content=message.content,
            tool_calls=calls,
            reasoning=message.reasoning,
            usage=usage,
            model=self._id,
            finish_reason=message.finish_reason or ("tool_calls" if calls else "stop"),
            provider_data=message.provider_data,
        )

    async def _next(self, request: ModelRequest) -> str | AssistantMessage | StreamReply:
        self.requests.append(request)
        if self.latency:
            await asyncio.sleep(self.latency)
        reply = await self._reply(request)
        if isinstance(reply, _ErrorReply):
            raise reply.error
        return reply

    async def response(self, request: ModelRequest) -> ModelResponse:
        reply = await self._next(request)
        if isinstance(reply, StreamReply):
            reply = AssistantMessage(
                content="".join(reply.chunks) or None,
                tool_calls=reply.calls,
                reasoning="".join(reply.reasoning) or None,
            )
        elif isinstance(reply, str):
            reply = AssistantMessage(content=reply)
        return ModelResponse(message=self._finish(reply, request), provider="scripted")

    async def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        reply = await self._next(request)
        if isinstance(reply, str):
            reply = AssistantMessage(content=reply)
        if isinstance(reply, AssistantMessage):
            stream = StreamReply(
                chunks=re.findall(r"\S+\s*|\s+", reply.content or ""),
                calls=reply.tool_calls,
                reasoning=[reply.reasoning] if reply.reasoning else [],
            )
        else:
            stream = reply
        assembler = StreamAssembler()
        deltas: list[TextDelta | ReasoningDelta | ToolCallDelta] = [
            ReasoningDelta(r) for r in stream.reasoning
        ]
        deltas.extend(TextDelta(c) for c in stream.chunks)
        finished = self._finish(AssistantMessage(tool_calls=stream.calls), request)
        for index, c in enumerate(finished.tool_calls):
            half = len(c.arguments) // 2
            deltas.append(
                ToolCallDelta(index=index, id=c.id, name=c.name, arguments=c.arguments[:half])
            )
            deltas.append(ToolCallDelta(index=index, arguments=c.arguments[half:]))
        for delta in deltas:
            assembler.add(delta)
            yield delta
            await asyncio.sleep(0)
        content = "".join(stream.chunks)
        message = assembler.finish(
            usage=Usage(
                input_tokens=_estimate(request.messages),
                output_tokens=len(content) // 4 + 10 * len(stream.calls) + 1,
            ),
            model=self._id,
            finish_reason=None,
        )
        yield ResponseDone(ModelResponse(message=message, provider="scripted"))


class ScriptedModel(_RecordingModel):
    """Replays a script of replies, one per request, and records every request.

    A reply is a string (text), an ``AssistantMessage`` (``text()``, ``tool_calls()``), a
    ``StreamReply`` (``chunks()``) or an error (``model_error()``). When the script runs out the
    model raises ``UsageError`` naming how many replies it had.
    """

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        id: str = "scripted",
        latency: float = 0.0,
        price: ModelPrice | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(id=id, latency=latency, price=price, context_window=context_window)
        self._script = list(replies)
        self._position = 0

    @property
    def remaining(self) -> int:
        return len(self._script) - self._position

    async def _reply(self, request: ModelRequest) -> Reply:
        if self._position >= len(self._script):
            raise UsageError(
                f"ScriptedModel ran out of replies: the script has {len(self._script)} and "
                f"request #{len(self.requests)} asked for another"
            )
        reply = self._script[self._position]
        self._position += 1
        return reply


ReplyFunction: TypeAlias = Callable[[list[Message], ModelRequest], Reply | Awaitable[Reply]]


class FunctionModel(_RecordingModel):
    """Replies with whatever ``fn(messages, request)`` returns (sync or async)."""

    def __init__(
        self,
        fn: ReplyFunction,
        *,
        id: str = "function",
        latency: float = 0.0,
        price: ModelPrice | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(id=id, latency=latency, price=price, context_window=context_window)
        self._fn = fn

    async def _reply(self, request: ModelRequest) -> Reply:
        value = self._fn(list(request.messages), request)
        return await value if inspect.isawaitable(value) else value


def example_value(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value that validates against a JSON schema (the simplest one: 'a', 0, false, ...)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return example_value(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return example_value(options[0], defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    example = _EXAMPLES.get(kind)
    return example(schema, defs, kind) if example is not None else None


def _example_object(schema: dict[str, Any], defs: dict[str, Any], kind: str) -> Any:
    props = schema.get("properties", {})
    required = schema.get("required", list(props))
    return {name: example_value(props[name], defs) for name in required if name in props}


def _example_array(schema: dict[str, Any], defs: dict[str, Any], kind: str) -> Any:
    items = schema.get("items")
    count = schema.get("minItems", 0)
    return [example_value(items, defs) for _ in range(count)] if items else []


def _example_number(schema: dict[str, Any], defs: dict[str, Any], kind: str) -> Any:
    if "minimum" in schema:
        return schema["minimum"]
    if "exclusiveMinimum" in schema:
        step = 1 if kind == "integer" else 0.5
        return schema["exclusiveMinimum"] + step
    maximum = schema.get("maximum", schema.get("exclusiveMaximum"))
    if maximum is not None and maximum <= 0:
        return maximum - (1 if "exclusiveMaximum" in schema else 0)
    return 0 if kind == "integer" else 0.0


_EXAMPLES: dict[str, Callable[[dict[str, Any], dict[str, Any], str], Any]] = {
    "object": _example_object,
    "array": _example_array,
    "integer": _example_number,
    "number": _example_number,
    "string": lambda schema, defs, kind: "a" * max(1, schema.get("minLength", 1)),
    "boolean": lambda schema, defs, kind: False,
}


class ToolCallingModel(_RecordingModel):
    """Calls every tool it is offered once (in parallel), then answers with their results as JSON.

    Arguments are generated from each tool's schema, so this exercises every tool with valid input.
    """

    def __init__(self, *, id: str = "tool-calling", final: str | None = None) -> None:
        super().__init__(id=id)
        self._final = final

    async def _reply(self, request: ModelRequest) -> Reply:
        if not any(isinstance(m, ToolMessage) for m in request.messages) and request.tools:
            return tool_calls(*(call(t.name, example_value(t.parameters)) for t in request.tools))
        if self._final is not None:
            return self._final
        results = {
            m.name or m.tool_call_id: m.content
            for m in request.messages
            if isinstance(m, ToolMessage)
        }
        return json.dumps(results)
