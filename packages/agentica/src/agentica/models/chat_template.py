"""Prompt rendering for the embedded Qwen2.5 models (ChatML) with bare-JSON tool calls.

``render_chatml`` renders the whole prompt (its docstring says why agentica renders it itself);
``tool_instructions`` is the system section that offers the tools; ``prompted_messages`` does the
same conversion on message objects, for OpenAI-compatible servers whose models have no native
tool calling (``OpenAIChat(tool_mode="text")``). Replies are parsed by
``agentica.models.toolparse``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentica.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)

__all__ = ["CHATML_STOP", "prompted_messages", "render_chatml", "tool_instructions"]

CHATML_STOP = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
DEFAULT_SYSTEM = "You are a helpful assistant."
_EXAMPLES: dict[str, Any] = {
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "array": [],
    "object": {},
}


def _example_arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    props = parameters.get("properties") or {}
    required = parameters.get("required") or list(props)[:1]
    example: dict[str, Any] = {}
    for name in required[:3]:
        kind = (props.get(name) or {}).get("type", "string")
        example[name] = _EXAMPLES.get(kind, "...")
    return example


def tool_instructions(tools: Sequence[ToolDefinition], *, parallel: bool = True) -> str:
    """The system-prompt section that offers ``tools`` and says how to call them (``parallel``:
    whether several independent calls may share one reply)."""
    lines = ["# Tools", "", "You can call these tools (JSON schema of each tool's arguments):"]
    for t in tools:
        lines.append(
            json.dumps(
                {"name": t.name, "description": t.description, "parameters": t.parameters},
                ensure_ascii=False,
            )
        )
    first = tools[0]
    example = json.dumps({"name": first.name, "arguments": _example_arguments(first.parameters)})
    lines += [
        "",
        "To call a tool, reply with only a JSON object like this example, and nothing else:",
        example,
        "Use a tool's exact name and give every required argument. Multi-line text goes in a "
        "JSON string with \\n.",
        "To call several tools at once, write one JSON object per line."
        if parallel
        else "Call one tool per reply and wait for its result before the next call.",
        "After you receive the tool results, answer the user in plain text.",
    ]
    return "\n".join(lines)


def _call_json(message: AssistantMessage) -> str:
    """The calls in the form the model writes them; arguments that are not valid JSON (a
    malformed attempt) are shown verbatim, as the model wrote them, never as a JSON string."""
    rendered = []
    for call in message.tool_calls:
        name = json.dumps(call.name, ensure_ascii=False)
        try:
            arguments = json.dumps(json.loads(call.arguments or "{}"), ensure_ascii=False)
        except ValueError:
            arguments = call.arguments
        rendered.append(f'{{"name": {name}, "arguments": {arguments}}}')
    return "\n".join(rendered)


def prompted_messages(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] = (),
    *,
    parallel: bool = True,
    listed: Sequence[ToolDefinition] = (),
) -> list[Message]:
    """``messages`` for a model without native tool calling: one system message that offers the
    tools, earlier calls as JSON text, and results as ``<tool_response>`` blocks of a user turn.
    Only system, user and assistant text messages remain.

    The leading system messages become the system turn; a system message later in the
    conversation (a per-turn slot, a summary) stays a system turn where it is, so the prompt
    before it is unchanged and the server's prompt cache still covers it. For the same reason
    ``listed`` (every tool of the agent, when this turn offers only ``tools``) is described in
    the system turn, and a last system turn names the tools callable now."""
    lead = 0
    while lead < len(messages) and isinstance(messages[lead], SystemMessage):
        lead += 1
    system = "\n\n".join(m.content for m in messages[:lead] if isinstance(m, SystemMessage))
    system = system or DEFAULT_SYSTEM
    described = listed if tools and listed else tools
    if described:
        system = f"{system}\n\n{tool_instructions(described, parallel=parallel)}"
    out: list[Message] = [SystemMessage(content=system)]
    pending: list[str] = []

    def flush_results() -> None:
        if pending:
            body = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in pending)
            out.append(UserMessage(content=body))
            pending.clear()

    for message in messages[lead:]:
        if isinstance(message, ToolMessage):
            pending.append(message.content)
            continue
        flush_results()
        if isinstance(message, SystemMessage):
            out.append(message)
        elif isinstance(message, AssistantMessage):
            parts = [p for p in (message.content, _call_json(message)) if p]
            out.append(AssistantMessage(content="\n".join(parts)))
        elif isinstance(message, UserMessage):
            out.append(message)
    flush_results()
    if described is not tools and {t.name for t in tools} != {t.name for t in listed}:
        names = ", ".join(t.name for t in tools)
        out.append(SystemMessage(content=f"For this reply you can call only these tools: {names}."))
    return out


def render_chatml(
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition] = (),
    *,
    parallel: bool = True,
    listed: Sequence[ToolDefinition] = (),
) -> str:
    """The full ChatML prompt for ``messages``, ending with an open assistant turn.

    The embedded models do not reliably produce the ``<tool_call>`` tags of their own template,
    and llama.cpp's strict server-side parser then fails the whole request. So agentica renders
    the prompt itself: tools are described in the system turn with an instruction to answer a
    call with only a JSON object ``{"name": ..., "arguments": {...}}``; earlier tool calls are
    shown in that same form; tool results come back in ``<tool_response>`` blocks of a user turn
    (the form these models were trained on). The reply is parsed on the client by
    ``agentica.models.toolparse``.
    """
    out = []
    for message in prompted_messages(messages, tools, parallel=parallel, listed=listed):
        if isinstance(message, UserMessage) and not isinstance(message.content, str):
            text = "\n".join(
                "[image]" if isinstance(p, ImagePart) else p.text for p in message.content
            )
        else:
            text = getattr(message, "content", None) or ""
        out.append(f"<|im_start|>{message.role}\n{text}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)
