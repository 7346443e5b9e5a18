"""The model protocol: what the run loop needs from any LLM provider.

A model turns a ``ModelRequest`` (messages, tool definitions, settings, an optional output schema)
into a ``ModelResponse``, either at once (``response``) or as a stream of deltas ending with a
``ResponseDone`` (``response_stream``). Adapters for real providers, the embedded local model and
the scripted models of ``agentica.testing`` all implement this protocol and nothing more;
``StreamAssembler`` builds the final message of a stream.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from agentica.errors import ModelResponseError
from agentica.messages import (
    AssistantMessage,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

__all__ = [
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamEvent",
    "OutputSchema",
    "ResponseDone",
    "StreamAssembler",
    "ToolChoice",
    "ToolDefinition",
    "collect_stream",
    "new_tool_call_id",
]

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str


@dataclass(slots=True, kw_only=True, frozen=True)
class OutputSchema:
    """A JSON schema the final answer must follow (structured output)."""

    name: str
    schema: dict[str, Any]
    strict: bool = True


@dataclass(slots=True, kw_only=True, frozen=True)
class ModelSettings:
    """Sampling and request settings. ``None`` means "leave it to the provider's default".

    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or the name of one tool.
    ``timeout`` is the seconds allowed for one request (for a stream: between two chunks).
    ``request_timeout`` is the overall deadline of one model call, in seconds, retries included
    (HTTP adapters; by default 600 s, or ``timeout`` when that is longer): a stream that keeps
    the connection alive without finishing the reply ends there with ``ModelTimeoutError``.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    timeout: float | None = None
    request_timeout: float | None = None
    extra_body: dict[str, Any] | None = None
    extra_headers: dict[str, str] | None = None

    def merged(self, override: ModelSettings | None) -> ModelSettings:
        """These settings with every value that ``override`` sets replacing ours."""
        if override is None:
            return self
        changes = {
            f.name: value
            for f in fields(override)
            if (value := getattr(override, f.name)) is not None
        }
        return replace(self, **changes) if changes else self


@dataclass(slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call needs.

    ``tools`` are what the model may call now; ``listed_tools``, when set, every tool of the
    agent (a turn may offer fewer). A model that describes tools in its prompt lists all of
    them on every turn and names the ones callable now at the end, so the prompt's start does
    not change with the offer and a server's prompt cache keeps covering it.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    listed_tools: Sequence[ToolDefinition] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output_schema: OutputSchema | None = None


@dataclass(slots=True, kw_only=True)
class ModelResponse:
    """A complete model reply. ``message.usage`` and ``message.finish_reason`` are always set."""

    message: AssistantMessage
    provider: str = ""
    response_id: str | None = None

    @property
    def usage(self) -> Usage:
        return self.message.usage or Usage()


@dataclass(slots=True)
class ResponseDone:
    """The last event of a model stream: the assembled reply."""

    response: ModelResponse
    kind: Literal["response_done"] = "response_done"


ModelStreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | ResponseDone


@runtime_checkable
class Model(Protocol):
    """An LLM the run loop can call. See ``agentica.models.OpenAIChat`` for the reference adapter.

    Implementations hold configuration and pooled connections only; they keep no conversation
    state, so one model object can serve many agents and many concurrent runs.
    """

    @property
    def id(self) -> str:
        """The model's name as the provider knows it."""
        ...

    @property
    def provider(self) -> str:
        """A short provider name (``"openai"``, ``"anthropic"``, ``"local"``, ``"scripted"``)."""
        ...

    async def response(self, request: ModelRequest) -> ModelResponse:
        """Send the request and return the whole reply."""
        ...

    def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Send the request and yield deltas as they arrive, then one ``ResponseDone``."""
        ...

    async def aclose(self) -> None:
        """Release pooled connections. The model stays usable; it reconnects when next called."""
        ...


def new_tool_call_id() -> str:
    """A fresh tool-call id, for replies whose provider left the id out."""
    return "call_" + uuid.uuid4().hex[:24]


class StreamAssembler:
    """Accumulates stream deltas into one ``AssistantMessage``.

    Every adapter that streams uses it, so a streamed reply and a non-streamed one are built the
    same way.

    Tool-call deltas are grouped by ``index``; a call whose id never arrived gets a fresh one.
    """

    __slots__ = ("_calls", "_reasoning", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, list[Any]] = {}

    def add(self, delta: TextDelta | ReasoningDelta | ToolCallDelta) -> None:
        if isinstance(delta, TextDelta):
            self._text.append(delta.text)
        elif isinstance(delta, ReasoningDelta):
            self._reasoning.append(delta.text)
        else:
            slot = self._calls.get(delta.index)
            if slot is None:
                slot = self._calls[delta.index] = [None, "", []]
            if delta.id:
                slot[0] = delta.id
            if delta.name:
                slot[1] += delta.name if slot[1] != delta.name else ""
            if delta.arguments:
                slot[2].append(delta.arguments)

    @property
    def has_content(self) -> bool:
        return bool(self._text or self._reasoning or self._calls)

    def finish(
        self,
        *,
        usage: Usage | None,
        model: str,
        finish_reason: str | None,
        provider_data: dict[str, Any] | None = None,
    ) -> AssistantMessage:
        calls = []
        for index in sorted(self._calls):
            call_id, name, args = self._calls[index]
            if not name:
                raise ModelResponseError(
                    f"the model streamed tool call #{index} without a name", model=model
                )
            calls.append(
                ToolCall(
                    id=call_id or new_tool_call_id(), name=name, arguments="".join(args) or "{}"
                )
            )
        if finish_reason is None:
            finish_reason = "tool_calls" if calls else "stop"
        return AssistantMessage(
            content="".join(self._text) or None,
            tool_calls=calls,
            reasoning="".join(self._reasoning) or None,
            usage=usage or Usage(),
            model=model,
            finish_reason=finish_reason,
            provider_data=provider_data,
        )


async def collect_stream(stream: AsyncIterator[ModelStreamEvent]) -> ModelResponse:
    """Consume a model stream and return its final response."""
    async for event in stream:
        if isinstance(event, ResponseDone):
            return event.response
    raise ModelResponseError("the model stream ended without a final response")
