"""Retry policy for model calls: exponential backoff with jitter, honouring ``Retry-After``.

Only errors marked ``retryable`` (rate limits, 5xx, timeouts, dropped connections, truncated
streams) are retried; a 4xx that cannot succeed fails at once. Retrying is bounded both in
attempts and in total elapsed time, because on a slow local model each attempt can take minutes.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar

from agentica.errors import ModelError, ModelHTTPError

__all__ = ["RetryPolicy", "call_with_retries", "stream_with_retries"]

T = TypeVar("T")


@dataclass(slots=True, kw_only=True, frozen=True)
class RetryPolicy:
    """How a model adapter retries failed requests.

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        initial_delay: seconds before the first retry; doubled (``multiplier``) each time.
        max_delay: the longest single wait, also the cap on a provider's ``Retry-After``.
        jitter: a random fraction (0-1) added to or removed from each wait.
        max_elapsed: no retry starts after this many seconds since the first attempt.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 20.0
    multiplier: float = 2.0
    jitter: float = 0.25
    max_elapsed: float = 120.0

    def delay(self, attempt: int, error: ModelError, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based) after ``error``."""
        if isinstance(error, ModelHTTPError) and error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_delay)
        base = min(self.initial_delay * self.multiplier ** (attempt - 1), self.max_delay)
        spread = base * self.jitter
        return max(0.0, base + (rng or random).uniform(-spread, spread))


async def _wait_or_raise(
    policy: RetryPolicy, error: ModelError, retries: int, started: float
) -> None:
    """Re-raise ``error`` unless the policy allows retry number ``retries``; then wait for it."""
    if not error.retryable or retries > policy.max_retries:
        raise error
    wait = policy.delay(retries, error)
    if time.monotonic() - started + wait > policy.max_elapsed:
        raise error
    await asyncio.sleep(wait)


async def stream_with_retries(
    open_stream: Callable[[], AsyncGenerator[T, None]], policy: RetryPolicy
) -> AsyncGenerator[T, None]:
    """Yield the events of ``open_stream()``, opening it again after a retryable failure as long
    as nothing was yielded yet (text already shown cannot be taken back)."""
    started = time.monotonic()
    retries = 0
    while True:
        yielded = False
        try:
            async with aclosing(open_stream()) as events:
                async for event in events:
                    yielded = True
                    yield event
            return
        except ModelError as error:
            if yielded:
                raise
            retries += 1
            await _wait_or_raise(policy, error, retries, started)


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[int, ModelError, float], None] | None = None,
) -> T:
    """Await ``attempt()`` until it succeeds, fails for good, or the policy gives up."""
    started = time.monotonic()
    retries = 0
    while True:
        try:
            return await attempt()
        except ModelError as error:
            retries += 1
            if on_retry is not None and error.retryable and retries <= policy.max_retries:
                on_retry(retries, error, policy.delay(retries, error))
            await _wait_or_raise(policy, error, retries, started)
