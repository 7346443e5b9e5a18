"""Realistic ``RunRecord`` values for the storage tests and benchmark.

``realistic_run(i)``: a user message, an assistant message asking for two tool calls, the two tool
results (``result_size`` characters each, one an error), a final answer; usage with an unknown
cost. ``every_kind_run(i)`` adds the rarer shapes: a system message, multi-part user content with
an image, reasoning, provider data, and a non-completed status.
"""

from __future__ import annotations

from agentica.messages import (
    AssistantMessage,
    ImagePart,
    RunUsage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentica.storage import RunRecord, ToolCallRecord

__all__ = ["every_kind_run", "realistic_run"]


def _result(i: int, tag: str, size: int) -> str:
    line = f"result {tag} of run {i}: lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    return (line * (size // len(line) + 1))[:size]


def realistic_run(i: int, *, result_size: int = 2000) -> RunRecord:
    """Run ``i``: question, two tool calls with ``result_size``-character results, answer."""
    calls = [
        ToolCall(id=f"call-{i}-a", name="search", arguments=f'{{"query": "topic {i}"}}'),
        ToolCall(id=f"call-{i}-b", name="fetch", arguments='{"url": "https://example.org/x"}'),
    ]
    results = [_result(i, "a", result_size), _result(i, "b", result_size)]
    messages = [
        UserMessage(content=f"Question {i}: what do the sources say about topic {i}?"),
        AssistantMessage(
            content=None,
            tool_calls=calls,
            model="test-model",
            finish_reason="tool_calls",
            usage=Usage(input_tokens=900 + i, output_tokens=40),
        ),
        ToolMessage(tool_call_id=calls[0].id, content=results[0], name="search"),
        ToolMessage(tool_call_id=calls[1].id, content=results[1], name="fetch", is_error=True),
        AssistantMessage(
            content=f"Answer {i}: the sources agree. ✓",
            model="test-model",
            finish_reason="stop",
            usage=Usage(input_tokens=2000 + i, output_tokens=120, cache_read_tokens=800),
        ),
    ]
    return RunRecord(
        run_id=f"run-{i}",
        messages=messages,
        usage=RunUsage(
            requests=2,
            tool_calls=2,
            input_tokens=2900 + 2 * i,
            output_tokens=160,
            cache_read_tokens=800,
            cost=None,
        ),
        status="completed",
        started_at=1_790_000_000.0 + i,
        duration=2.5,
        output=f"Answer {i}: the sources agree. ✓",
        model="test-model",
        tool_calls=[
            ToolCallRecord(
                id=calls[0].id,
                name="search",
                arguments=calls[0].arguments,
                status="success",
                content=results[0],
                duration=0.25,
                ref=f"ev-{i}",
            ),
            ToolCallRecord(
                id=calls[1].id,
                name="fetch",
                arguments=calls[1].arguments,
                status="error",
                content=results[1],
                duration=0.5,
            ),
        ],
    )


def every_kind_run(i: int) -> RunRecord:
    """A run with every message kind and content shape, and a status other than completed."""
    run = realistic_run(i, result_size=300)
    run.messages[0] = UserMessage(
        content=[
            TextPart(text=f'Look at this, {i}: ünïcødé 🚀 "quotes" \\ \x01'),
            ImagePart(
                url="data:image/png;base64,iVBORw0KGgo=", media_type="image/png", detail="low"
            ),
        ],
        name="alice",
    )
    run.messages.insert(1, SystemMessage(content="Use the tools; answer briefly."))
    first_reply = run.messages[2]
    assert isinstance(first_reply, AssistantMessage)
    first_reply.reasoning = "I should search first, then fetch."
    first_reply.provider_data = {"response_id": f"resp-{i}", "nested": [1, 2.5, None, {"a": True}]}
    statuses = ("failed", "cancelled", "paused", "completed")
    run.status = statuses[i % len(statuses)]
    run.error = "the model gave up" if run.status == "failed" else None
    run.usage = RunUsage(requests=1, cost=0.0125)
    return run
