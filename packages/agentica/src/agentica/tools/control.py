"""Control signals a tool returns to steer the run: values, not exceptions.

- ``StopRun(content)``: finish the run after this turn; ``content`` becomes the run's answer.
- ``Retry(message)``: the call failed in a way the model can fix; ``message`` tells it how.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Retry", "StopRun"]


@dataclass(slots=True, frozen=True)
class StopRun:
    """Returned by a tool to end the run after the current turn with ``content`` as the answer."""

    content: Any = None


@dataclass(slots=True, frozen=True)
class Retry:
    """Returned by a tool to send ``message`` to the model as an error it should correct."""

    message: str
