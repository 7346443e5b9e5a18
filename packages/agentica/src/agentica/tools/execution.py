"""The tool execution engine: phase 2 of the three-phase protocol.

The run loop (1) emits ``started`` events in call order, (2) calls ``execute_calls``, which runs
every call of the turn concurrently, and (3) processes the results in call order. This module owns
phase 2: ``execute_calls`` (its docstring has the rules), ``ToolSettings`` (concurrency, timeout,
threads) and ``tool_thread_pool``, the thread pool blocking tools run on.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agentica.errors import UsageError
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.guardrails import ToolGuardrails

__all__ = ["ToolSettings", "execute_calls", "tool_thread_pool"]


@dataclass(slots=True, frozen=True, kw_only=True)
class ToolSettings:
    """How the calls of one model turn are executed.

    Attributes:
        max_concurrency: the most calls of one turn that run at the same time.
        timeout: default seconds per call (a tool's own ``timeout`` wins); ``None``: no limit.
        thread_pool_size: threads for blocking tools, per event loop.
    """

    max_concurrency: int = 32
    timeout: float | None = 600.0
    thread_pool_size: int = 64

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise UsageError("ToolSettings.max_concurrency must be at least 1")
        if self.thread_pool_size < 1:
            raise UsageError("ToolSettings.thread_pool_size must be at least 1")
        if self.timeout is not None and self.timeout <= 0:
            raise UsageError("ToolSettings.timeout must be positive (or None for no limit)")


# One pool per event loop, created on first use; it holds idle threads only and no data of any
# run, and it is dropped (its threads exit) when the loop is garbage-collected.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ThreadPoolExecutor] = (
    weakref.WeakKeyDictionary()
)


def tool_thread_pool(size: int = 64) -> ThreadPoolExecutor:
    """The running loop's thread pool for blocking tools (grown to ``size`` if it is smaller)."""
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None or pool._max_workers < size:
        pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="agentica-tool")
        _POOLS[loop] = pool
    return pool


def _batches(calls: Sequence[FunctionCall]) -> list[list[FunctionCall]]:
    batches: list[list[FunctionCall]] = []
    current: list[FunctionCall] = []
    for call in calls:
        if call.function is not None and call.function.exclusive:
            if current:
                batches.append(current)
                current = []
            batches.append([call])
        else:
            current.append(call)
    if current:
        batches.append(current)
    return batches


async def execute_calls(
    calls: Sequence[FunctionCall],
    ctx: RunContext[Any],
    settings: ToolSettings,
    *,
    known_tools: tuple[str, ...] = (),
    guardrails: ToolGuardrails | None = None,
) -> None:
    """Run ``calls`` (phase 2); each ``FunctionCall`` records its own result or error.

    - The calls run concurrently in an ``asyncio.TaskGroup``; each task catches its own
      exceptions (``FunctionCall.execute`` turns them into error results), so one failure never
      cancels a sibling or loses its result.
    - At most ``settings.max_concurrency`` calls run at once (a semaphore), however many the
      model asked for.
    - A call whose tool is ``exclusive`` runs alone: the turn is split into batches at exclusive
      calls and the batches run one after another, in call order.
    - Blocking (``def``) tools run on ``tool_thread_pool``, sized for I/O, one per event loop,
      rather than asyncio's default executor (6 threads on a 2-core machine).
    - Cancelling the run cancels every running call and marks the ``RunContext`` cancelled, which
      is the signal blocking tools can poll to stop their thread early.
    """
    if not calls:
        return
    needs_threads = any(c.function is not None and not c.function.is_async for c in calls)
    executor = tool_thread_pool(settings.thread_pool_size) if needs_threads else None
    limiter = asyncio.Semaphore(settings.max_concurrency)

    async def run_one(call: FunctionCall) -> None:
        async with limiter:
            await call.execute(
                ctx,
                executor=executor,
                default_timeout=settings.timeout,
                known_tools=known_tools,
                guardrails=guardrails,
            )

    try:
        for batch in _batches(calls):
            if len(batch) == 1:
                await run_one(batch[0])
                continue
            async with asyncio.TaskGroup() as group:
                for call in batch:
                    group.create_task(run_one(call))
    except asyncio.CancelledError:
        ctx.request_cancel()
        for call in calls:
            if call.status == "pending":
                call.fail("The call was cancelled before it finished.")
        raise
