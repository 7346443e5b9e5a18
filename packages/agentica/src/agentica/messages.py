"""The conversation model: messages, content parts, tool calls, token usage and stream deltas.

This module is the one owner of what a conversation is. Provider adapters translate these
objects to and from their wire formats; nothing else knows a wire format. ``Message`` is the
union of ``SystemMessage``, ``UserMessage``, ``AssistantMessage`` and ``ToolMessage``. All are
plain slotted dataclasses: cheap to build, easy to compare in tests, and serialisable with
``pydantic.TypeAdapter(Message)`` (the ``role`` field discriminates the union).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "AssistantMessage",
    "ContentPart",
    "ImagePart",
    "Message",
    "ModelUsage",
    "ReasoningDelta",
    "RunUsage",
    "StreamDelta",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolDefinition",
    "ToolMessage",
    "Usage",
    "UserMessage",
]


@dataclass(slots=True, kw_only=True)
class Usage:
    """Token counts of one model call, or the sum of several (``a + b``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(slots=True, kw_only=True)
class ModelUsage:
    """One model's share of a run's (or a session's) usage: its requests, tokens and cost in USD
    (``None`` when its price is unknown)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage | ModelUsage, cost: float | None, requests: int = 1) -> None:
        """Count ``requests`` requests with ``other``'s tokens and ``cost``."""
        self.requests += requests
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cost = None if cost is None or self.cost is None else self.cost + cost


@dataclass(slots=True, kw_only=True)
class RunUsage:
    """Totals of a run (or a session): model requests, tool calls, tokens and cost in USD.

    ``cost`` is ``None`` as soon as one request was made to a model whose price is unknown: an
    unknown price makes the total unknown, never zero. ``by_model`` splits the requests, tokens
    and cost by the id of the model that answered (a run whose model changed between calls has
    several; a subagent's models are merged in with its usage).
    """

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = 0.0
    by_model: dict[str, ModelUsage] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add_request(self, usage: Usage, cost: float | None, model: str | None = None) -> None:
        """Count one model request with its token usage and cost (``None``: price unknown);
        ``model``: the id of the model that answered, for ``by_model``."""
        self.requests += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        if model is not None:
            self.by_model.setdefault(model, ModelUsage()).add(usage, cost)

    def merge(self, other: RunUsage) -> None:
        """Add another run's totals to these (a sub-agent's usage to its parent's)."""
        self.requests += other.requests
        self.tool_calls += other.tool_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cost = None if other.cost is None or self.cost is None else self.cost + other.cost
        for model, share in other.by_model.items():
            self.by_model.setdefault(model, ModelUsage()).add(share, share.cost, share.requests)


@dataclass(slots=True, kw_only=True)
class TextPart:
    """A piece of text inside a multi-part user message."""

    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True, kw_only=True)
class ImagePart:
    """An image inside a user message: an ``https:`` or ``data:`` URL."""

    url: str
    media_type: str | None = None
    detail: Literal["auto", "low", "high"] | None = None
    type: Literal["image"] = "image"


ContentPart: TypeAlias = TextPart | ImagePart


@dataclass(slots=True, kw_only=True)
class ToolCall:
    """One tool call requested by the model.

    ``arguments`` is the JSON text exactly as the model produced it; it is parsed and validated
    against the tool's schema only when the call is executed, so a malformed argument string is
    reported back to the model instead of failing the reply.
    """

    id: str
    name: str
    arguments: str = "{}"


@dataclass(slots=True, kw_only=True, frozen=True)
class ToolDefinition:
    """What the model is told about a tool: its name, description and JSON schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@dataclass(slots=True, kw_only=True)
class SystemMessage:
    """Instructions for the model."""

    content: str
    role: Literal["system"] = "system"


@dataclass(slots=True, kw_only=True)
class UserMessage:
    """A message from the user: text, or a list of text and image parts."""

    content: str | list[ContentPart]
    name: str | None = None
    role: Literal["user"] = "user"

    @property
    def text(self) -> str:
        """The text of the message, with parts joined by newlines and images left out."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(slots=True, kw_only=True)
class AssistantMessage:
    """A reply from the model: text, tool calls, or both.

    Attributes:
        reasoning: reasoning text from servers that return it (``reasoning_content``).
        finish_reason: normalised stop reason: ``"stop"``, ``"tool_calls"``, ``"length"``,
            ``"content_filter"`` or the provider's own word.
        provider_data: provider-specific data that must be sent back unchanged on the next
            request (for example signed thinking blocks).
    """

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    usage: Usage | None = None
    model: str | None = None
    finish_reason: str | None = None
    provider_data: dict[str, Any] | None = None
    role: Literal["assistant"] = "assistant"


@dataclass(slots=True, kw_only=True)
class ToolMessage:
    """The result of one tool call, answering the ``ToolCall`` with the same id."""

    tool_call_id: str
    content: str
    name: str = ""
    is_error: bool = False
    role: Literal["tool"] = "tool"


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(slots=True)
class TextDelta:
    """A piece of the reply's text, as it streams."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of the reply's reasoning text, as it streams."""

    text: str
    kind: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of a tool call, as it streams: ``index`` says which call of the reply it belongs to.

    The first delta of a call usually carries ``id`` and ``name``; later ones carry more of the
    ``arguments`` text.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    kind: Literal["tool_call_delta"] = "tool_call_delta"


StreamDelta: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta
