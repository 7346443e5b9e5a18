"""The run's timeline: the ``SpanRecord`` tree the run loop records as it goes.

One span per run (``state.py`` opens it, under the tool call that started the run if a tool did),
per model call, per compaction and per tool call, with the OpenTelemetry GenAI attribute names.
It is stored with the run (``RunRecord.trace``): ``agentica trace`` prints it and
``agentica.tracing`` exports it, so both show the same thing. Recording costs a few small objects
per step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from agentica.messages import AssistantMessage, RunUsage
from agentica.run.events import ContextCompacted
from agentica.storage.records import SpanRecord
from agentica.tools.call import FunctionCall

__all__ = [
    "close_run",
    "compaction",
    "model_call",
    "model_failed",
    "model_replied",
    "tool_calls",
    "tools_done",
]


def model_call(
    trace: SpanRecord, model: str, provider: str, turn: int, tokens: int | None
) -> SpanRecord:
    """A model call starting now (``tokens``: the request's, when counted)."""
    span = SpanRecord(
        kind="model", name=model, start=time.time(),
        attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.provider.name": provider, "agentica.turn": turn,
            "agentica.context_tokens": tokens,
        },
    )  # fmt: skip
    trace.children.append(span)
    return span


def model_replied(span: SpanRecord, message: AssistantMessage, cost: float | None) -> None:
    """The call's reply arrived: its duration, tokens, cost (USD, ``None``: price unknown) and
    finish reason."""
    span.duration = time.time() - span.start
    attributes = span.attributes
    attributes["agentica.cost_usd"] = cost
    if message.model:
        attributes["gen_ai.response.model"] = message.model
    if message.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [message.finish_reason]
    usage = message.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        if usage.cache_read_tokens:
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    attributes["agentica.tool_calls"] = len(message.tool_calls)


def model_failed(span: SpanRecord, exc: BaseException) -> None:
    span.duration = time.time() - span.start
    span.error = f"{type(exc).__name__}: {exc}"
    span.attributes["error.type"] = type(exc).__name__


def compaction(trace: SpanRecord, event: ContextCompacted, started: float) -> None:
    """The conversation was compacted (``started``: when the request's preparation began)."""
    trace.children.append(
        SpanRecord(
            kind="compaction",
            name=event.trigger,
            start=started,
            duration=time.time() - started,
            error=event.summary_error,
            attributes={
                "agentica.turn": event.turn,
                "agentica.tokens_before": event.before,
                "agentica.tokens_after": event.after,
                "agentica.trimmed": event.trimmed,
                "agentica.summarized": event.summarized,
            },
        )
    )


def tool_calls(trace: SpanRecord, calls: Sequence[FunctionCall], turn: int) -> None:
    """Spans for the turn's calls, before they run (each sets its start when it starts)."""
    now = time.time()
    for call in calls:
        call.span = SpanRecord(
            kind="tool", name=call.name, start=now,
            attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id, "agentica.turn": turn,
                "agentica.arguments_chars": len(call.call.arguments),
            },
        )  # fmt: skip
        trace.children.append(call.span)


def tools_done(calls: Sequence[FunctionCall]) -> None:
    """The turn's calls finished: their durations, outcomes and result sizes."""
    for call in calls:
        span = call.span
        if span is None:
            continue
        span.duration = call.duration
        span.attributes["agentica.result_chars"] = len(call.content_without_notes)
        if call.status == "error":
            span.error = call.error
            span.attributes["error.type"] = (
                type(call.exception).__name__ if call.exception is not None else "tool_error"
            )


def close_run(trace: SpanRecord, usage: RunUsage, duration: float, error: str | None) -> None:
    """The run ended after ``duration`` seconds (``error``: why it failed, if it did)."""
    trace.duration = duration
    trace.error = error
    attributes = trace.attributes
    attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
    attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
    attributes["agentica.requests"] = usage.requests
    attributes["agentica.tool_calls"] = usage.tool_calls
    attributes["agentica.cost_usd"] = usage.cost
    if error is not None:
        attributes["error.type"] = error.split(":", 1)[0]
