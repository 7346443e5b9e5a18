"""Runs started by a tool of another run (the ``task`` tool's subagents, ``Agent.as_tool``).

``run_child`` is the one way to run an agent inside a tool call: the child's run charges the
tree's ``RunBudget`` as it goes, its usage is added to the calling run's, and its events can be
reported to the caller's stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentica.run.events import RunEvent
from agentica.run.loop import run_events
from agentica.run.result import OutT, RunResponse
from agentica.run.stream import RunStream
from agentica.tools.context import RunContext

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = ["run_child"]


async def run_child(
    agent: Agent[OutT],
    task: str,
    ctx: RunContext[Any],
    *,
    on_event: Callable[[RunEvent], None] | None = None,
) -> RunResponse[OutT]:
    """Run ``agent`` (a fresh conversation) on ``task`` for the tool call whose context is
    ``ctx`` and return its response.

    The run shares the calling run's tree budget (``ctx.budget``: the top-level run's limits
    bound the whole tree) and its ``deps``; its usage is added to ``ctx.usage`` whether it
    succeeds or fails; ``on_event`` is called with each of its events as they happen.
    """
    earlier = len(agent.memory.runs)  # only this run's usage is added, whatever came before
    stream: RunStream[OutT] = RunStream(
        run_events(agent, task, deps=ctx.deps, stream=False, budget=ctx.budget)
    )
    try:
        async with stream:
            async for event in stream:
                if on_event is not None:
                    on_event(event)
    finally:
        for record in agent.memory.runs[earlier:]:
            ctx.usage.merge(record.usage)
    return stream.response
