"""The OpenAI Chat Completions wire format, both ways: client requests and server answers.

The ``OpenAIChat`` adapter uses ``message_to_wire``; the servers agentica runs itself (the
loopback server of ``agentica models serve``, the scripted ``FakeOpenAIServer`` of
``agentica.testing``, the team service's gateway) use ``message_from_wire``,
``request_from_wire``, ``completion_body``, ``chunk_body`` and ``delta_to_wire`` to speak the
same format from the other side.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agentica.errors import UsageError
from agentica.messages import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Message,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentica.models.base import ModelRequest, ModelSettings, OutputSchema

__all__ = [
    "chunk_body",
    "completion_body",
    "delta_to_wire",
    "message_from_wire",
    "message_to_wire",
    "request_from_wire",
    "usage_to_wire",
]


def message_to_wire(message: Message, *, send_reasoning: bool = False) -> dict[str, Any]:
    """One message as a Chat Completions request message."""
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ]
        if send_reasoning and message.reasoning:
            out["reasoning_content"] = message.reasoning
        return out
    if isinstance(message, UserMessage):
        content: Any = message.content
        if not isinstance(content, str):
            content = [
                {"type": "image_url", "image_url": {"url": part.url}
                 | ({"detail": part.detail} if part.detail else {})}
                if isinstance(part, ImagePart)
                else {"type": "text", "text": part.text}
                for part in content
            ]  # fmt: skip
        user: dict[str, Any] = {"role": "user", "content": content}
        if message.name:
            user["name"] = message.name
        return user
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    raise UsageError(f"cannot send {type(message).__name__} in the OpenAI format")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def message_from_wire(raw: dict[str, Any]) -> Message:
    """One Chat Completions request message as an agentica message (raises ``ValueError``)."""
    role = raw.get("role")
    if role in ("system", "developer"):
        return SystemMessage(content=_text(raw.get("content")))
    if role == "user":
        content = raw.get("content")
        if isinstance(content, list):
            parts: list[ContentPart] = []
            for part in content:
                if part.get("type") == "image_url":
                    image = part.get("image_url") or {}
                    parts.append(ImagePart(url=image.get("url", ""), detail=image.get("detail")))
                else:
                    parts.append(TextPart(text=part.get("text", "")))
            return UserMessage(content=parts, name=raw.get("name"))
        return UserMessage(content=_text(content), name=raw.get("name"))
    if role == "assistant":
        calls = [
            ToolCall(
                id=c.get("id") or "",
                name=(c.get("function") or {}).get("name", ""),
                arguments=(c.get("function") or {}).get("arguments") or "{}",
            )
            for c in raw.get("tool_calls") or []
        ]
        return AssistantMessage(
            content=_text(raw.get("content")) or None,
            tool_calls=calls,
            reasoning=raw.get("reasoning_content"),
        )
    if role == "tool":
        return ToolMessage(
            tool_call_id=str(raw.get("tool_call_id", "")), content=_text(raw.get("content"))
        )
    raise ValueError(f"unknown message role {role!r}")


def request_from_wire(body: dict[str, Any]) -> ModelRequest:
    """A Chat Completions request body as a ``ModelRequest`` (raises ``ValueError``)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    tools = [
        ToolDefinition(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            parameters=t["function"].get("parameters") or {"type": "object", "properties": {}},
        )
        for t in body.get("tools") or []
        if t.get("type", "function") == "function"
    ]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name")
    stop = body.get("stop")
    output_schema = None
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema") or {}
        output_schema = OutputSchema(name=spec.get("name", "output"), schema=spec.get("schema", {}))
    return ModelRequest(
        messages=[message_from_wire(m) for m in messages],
        tools=tools,
        settings=ModelSettings(
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
            stop=(stop,) if isinstance(stop, str) else tuple(stop) if stop else None,
            seed=body.get("seed"),
            tool_choice=choice,
        ),
        output_schema=output_schema,
    )


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
    }


def completion_body(
    message: AssistantMessage, *, model: str, response_id: str, usage: Usage | None = None
) -> dict[str, Any]:
    """A non-streamed Chat Completions answer carrying ``message``."""
    wire: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.reasoning:
        wire["reasoning_content"] = message.reasoning
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": wire,
            "finish_reason": message.finish_reason
            or ("tool_calls" if message.tool_calls else "stop"),
        }],
        "usage": usage_to_wire(usage or message.usage or Usage()),
    }  # fmt: skip


def chunk_body(
    *,
    response_id: str,
    model: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> bytes:
    """One server-sent event of a streamed answer (``data: {...}`` and the blank line)."""
    body: dict[str, Any] = {
        "id": response_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [] if delta is None else [
            {"index": 0, "delta": delta, "finish_reason": finish_reason}
        ],
    }  # fmt: skip
    if usage is not None:
        body["usage"] = usage_to_wire(usage)
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


def delta_to_wire(event: TextDelta | ReasoningDelta | ToolCallDelta) -> dict[str, Any]:
    """A streamed piece of a reply as the ``delta`` of a Chat Completions chunk."""
    if isinstance(event, TextDelta):
        return {"content": event.text}
    if isinstance(event, ReasoningDelta):
        return {"reasoning_content": event.text}
    call: dict[str, Any] = {"index": event.index, "function": {}}
    if event.id:
        call |= {"id": event.id, "type": "function"}
    if event.name:
        call["function"]["name"] = event.name
    call["function"]["arguments"] = event.arguments
    return {"tool_calls": [call]}
