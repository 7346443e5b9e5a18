"""What both conformance suites share: the skip signal, assertions with short reprs, and the
wrapper turning a backend's unexpected exception into a failure naming the check."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

CaseT = TypeVar("CaseT")


class NotApplicable(Exception):
    """The check needs something the case does not offer (``put_bytes``, ``symlinks``); a test
    runner reports it as skipped."""


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + f"... ({len(text)} characters)"


def require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def equal(what: str, got: object, want: object) -> None:
    if got != want:
        raise AssertionError(f"{what}: expected {shown(want)}, got {shown(got)}")


def check(
    function: Callable[[CaseT], Awaitable[None]],
) -> Callable[[CaseT], Awaitable[None]]:
    """A check whose unexpected exceptions (a backend error where a call should succeed)
    become ``AssertionError`` naming the check."""

    @functools.wraps(function)
    async def run(case: CaseT) -> None:
        try:
            await function(case)
        except (AssertionError, NotApplicable):
            raise
        except Exception as exc:
            raise AssertionError(
                f"{function.__name__}: the backend raised {type(exc).__name__}: {exc}"
            ) from exc

    return run
