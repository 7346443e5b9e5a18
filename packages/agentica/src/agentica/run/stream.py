"""``RunStream``: the handle of one run, an async iterator of its events.

``agent.run_stream(...)`` returns it; iterate it for events, read ``.response`` when it is done,
and ``cancel()`` it from anywhere (another task, an event handler) to stop the run with
``RunCancelled``. Cancellation is per run: it never touches another run or another agent.
Use it as ``async with agent.run_stream(...) as stream:`` to be sure the run is closed if you
stop iterating early.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Generic

from agentica.errors import RunCancelled, UsageError
from agentica.run.events import RunCompleted, RunEvent
from agentica.run.result import OutT, RunResponse

__all__ = ["RunStream"]


class RunStream(Generic[OutT]):
    """An async iterator over a run's events, with ``cancel()`` and the final ``response``
    (a ``RunResponse[OutT]``: ``OutT`` is the agent's output type)."""

    __slots__ = ("_cancel_reason", "_events", "_in_next", "_response", "_task")

    def __init__(self, events: AsyncGenerator[RunEvent, None]) -> None:
        self._events = events
        self._task: asyncio.Task[object] | None = None
        self._in_next = False
        self._cancel_reason: str | None = None
        self._response: RunResponse[OutT] | None = None

    def __aiter__(self) -> RunStream[OutT]:
        return self

    async def __anext__(self) -> RunEvent:
        if self._cancel_reason is not None:
            await self._events.aclose()
            raise RunCancelled(f"the run was cancelled: {self._cancel_reason}")
        self._task = asyncio.current_task()
        self._in_next = True
        try:
            event = await self._events.__anext__()
        except asyncio.CancelledError:
            task = self._task
            if self._cancel_requested() and task is not None and task.uncancel() == 0:
                raise RunCancelled(f"the run was cancelled: {self._cancel_reason}") from None
            raise
        finally:
            self._in_next = False
        if isinstance(event, RunCompleted):
            self._response = event.response
        return event

    def _cancel_requested(self) -> bool:
        return self._cancel_reason is not None

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Stop the run: the next (or current) step raises ``RunCancelled``; tools are cancelled."""
        if self._cancel_reason is not None or self._response is not None:
            return
        self._cancel_reason = reason
        if self._in_next and self._task is not None:
            self._task.cancel(reason)

    @property
    def response(self) -> RunResponse[OutT]:
        """The run's response, once the stream is exhausted."""
        if self._response is None:
            raise UsageError("the run has not completed: iterate the stream to its end first")
        return self._response

    async def __aenter__(self) -> RunStream[OutT]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._events.aclose()
