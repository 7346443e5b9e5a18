"""Run limits: turns, tool calls, tokens, cost and wall time.

Each limit that stops a run raises ``LimitExceeded`` naming the limit and how to raise it. The
defaults let a normal long task (50 tool-using steps and more) finish; only the time and cost
limits are off by default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from agentica.errors import UsageError

__all__ = ["RunLimits"]


@dataclass(slots=True, frozen=True, kw_only=True)
class RunLimits:
    """Upper bounds for one run. ``None`` switches a limit off.

    Attributes:
        max_turns: model calls in one run.
        max_tool_calls: tool calls in one run.
        max_tokens: input plus output tokens over all model calls of the run.
        max_cost: USD spent by the run (enforced only when the model's price is known).
        max_wall_time: seconds from the start of the run.
        max_output_retries: how often the model may retry a final answer that did not match the
            requested output type.
    """

    max_turns: int | None = 100
    max_tool_calls: int | None = 1000
    max_tokens: int | None = None
    max_cost: float | None = None
    max_wall_time: float | None = None
    max_output_retries: int = 2

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value < 0:
                raise UsageError(f"RunLimits.{f.name} must not be negative (got {value})")
