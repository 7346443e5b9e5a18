"""The one place a run's outcome is built (``RunResponse`` and ``RunRecord``) and remembered (in
the agent's memory, through the capabilities' ``after_run`` hooks, and in storage)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from agentica.context import repair_tool_pairs
from agentica.errors import RunCancelled
from agentica.messages import Message
from agentica.run import timeline
from agentica.run.approval import PendingCall
from agentica.run.result import RunResponse
from agentica.run.state import ActiveRun
from agentica.storage.records import RunRecord, RunStatus, ToolCallRecord
from agentica.tools.call import FunctionCall

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = ["completed", "failed", "paused", "remember"]


def _tool_records(calls: Sequence[FunctionCall]) -> list[ToolCallRecord]:
    return [
        ToolCallRecord(
            id=c.id, name=c.name, arguments=c.call.arguments, status=c.status,
            content=c.content, duration=c.duration, ref=c.ref,
        )
        for c in calls
    ]  # fmt: skip


def _record(
    run: ActiveRun,
    status: RunStatus,
    duration: float,
    *,
    messages: list[Message] | None = None,
    output: str | None = None,
    error: str | None = None,
    approvals: list[str] | None = None,
) -> RunRecord:
    """The record of ``run`` ending with ``status`` (``messages``: what it added, by default)."""
    timeline.close_run(run.trace, run.usage, duration, error)
    return RunRecord(
        run_id=run.run_id, messages=run.new_messages if messages is None else messages,
        usage=run.usage, status=status, started_at=run.started_at, duration=duration,
        error=error, output=output, model=run.model_id, models=list(run.models),
        tool_calls=_tool_records(run.calls),
        approvals=approvals or [], trace=run.trace,
        agent=run.handoff_log[0].source if run.handoff_log else run.agent.name,
        handoffs=list(run.handoff_log),
    )  # fmt: skip


def _response(
    run: ActiveRun,
    duration: float,
    reason: Literal["completed", "stopped", "paused"],
    *,
    content: str | None = None,
    output: Any = None,
    calls: list[FunctionCall] | None = None,
    pending: list[PendingCall] | None = None,
) -> RunResponse[Any]:
    """The response of ``run`` (``calls``: all of the run's, by default)."""
    return RunResponse(
        run_id=run.run_id, content=content, output=output, messages=run.new_messages,
        tool_calls=run.calls if calls is None else calls, usage=run.usage, model=run.model_id,
        stop_reason=reason, duration=duration, pending=pending or [],
    )  # fmt: skip


def completed(
    run: ActiveRun, content: str | None, output: Any, reason: Literal["completed", "stopped"]
) -> tuple[RunResponse[Any], RunRecord]:
    """The outcome of a run that ended with an answer (or a tool's ``StopRun``)."""
    duration = time.monotonic() - run.started
    record = _record(run, "completed", duration, output=content)
    return _response(run, duration, reason, content=content, output=output), record


def paused(
    run: ActiveRun, calls: Sequence[FunctionCall], pending: Sequence[PendingCall]
) -> tuple[RunResponse[Any], RunRecord]:
    """The outcome of a run paused before ``calls`` (none ran); the record keeps what waits."""
    duration = time.monotonic() - run.started
    record = _record(run, "paused", duration, approvals=[p.call_id for p in pending])
    response = _response(run, duration, "paused", calls=list(calls), pending=list(pending))
    return response, record


def failed(run: ActiveRun, exc: BaseException) -> RunRecord:
    """The record of a run that failed or was cancelled with ``exc``."""
    cancelled = isinstance(exc, asyncio.CancelledError | GeneratorExit | RunCancelled)
    messages = repair_tool_pairs(
        run.new_messages, reason="cancelled" if cancelled else "interrupted"
    )
    return _record(
        run, "cancelled" if cancelled else "failed", time.monotonic() - run.started,
        messages=messages, error=f"{type(exc).__name__}: {exc}",
    )  # fmt: skip


async def remember(
    agent: Agent[Any], run: ActiveRun, record: RunRecord, *, hooks: bool = True
) -> None:
    """Remember the run in ``agent``'s memory (the run's owner), through the capabilities'
    hooks (of the agent active at the end: a handoff's receiver), and in storage."""
    agent.memory.runs.append(record)
    if hooks:  # a paused run is not over: its capabilities' after_run waits for the end
        for capability in run.agent.capabilities:
            await capability.after_run(run.ctx, record)
    await agent.save(record)
