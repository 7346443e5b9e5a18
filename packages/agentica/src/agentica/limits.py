"""Run limits (turns, tool calls, tokens, cost and wall time) and the budget of a run tree.

Each limit that stops a run raises ``LimitExceeded`` naming the limit and how to raise it. The
defaults let a normal long task (50 tool-using steps and more) finish; only the time and cost
limits are off by default.

The limits of a top-level run bound its whole tree: the run and every subagent run started under
it (the ``task`` tool) share one ``RunBudget``, charged as the usage happens, so a tree never
gets a fresh allowance per subagent. A subagent run is also held to its own agent's limits,
counted over that run alone (a tighter bound for one subtask); reaching those stops only the
subagent, while reaching the tree's stops every run of the tree.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, fields

from agentica.errors import LimitExceeded, UsageError
from agentica.messages import RunUsage, Usage

__all__ = ["RunBudget", "RunLimits"]


@dataclass(slots=True, frozen=True, kw_only=True)
class RunLimits:
    """Upper bounds for one run. ``None`` switches a limit off.

    The limits a top-level run is given bound its whole tree of subagent runs (``RunBudget``);
    a subagent run is also held to its own agent's limits.

    Attributes:
        max_turns: model calls in the run, its subagents' included.
        max_tool_calls: tool calls in the run, its subagents' included (a call counts when it is
            about to start; a turn asking for more calls than remain runs none of them).
        max_tokens: input plus output tokens over all model calls of the run and its subagents
            (checked before each call: the call whose reply crosses the limit is the last).
        max_cost: USD spent by the run and its subagents (counted for the calls to models whose
            price is known).
        max_wall_time: seconds from the start of the top-level run.
        max_output_retries: how often the model may retry a final answer that did not match the
            requested output type.
        max_handoffs: handoffs from one agent to another within the run (a guard against two
            agents handing the conversation back and forth).
    """

    max_turns: int | None = 100
    max_tool_calls: int | None = 1000
    max_tokens: int | None = None
    max_cost: float | None = None
    max_wall_time: float | None = None
    max_output_retries: int = 2
    max_handoffs: int | None = 10

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value < 0:
                raise UsageError(f"RunLimits.{f.name} must not be negative (got {value})")


class RunBudget:
    """The usage of one run tree (a top-level run and its subagent runs) against its limits.

    The top-level run creates it from its limits and hands it to each subagent run (through its
    ``RunContext.budget``). Every run of the tree charges it as the usage happens, with no await
    between the check and the charge, so concurrent subagents cannot overspend between them:

    - ``start_turn()`` before each model call (refused when turns, tokens, cost or time are spent);
    - ``charge_response()`` when a reply arrives (its tokens and cost);
    - ``charge_tool_calls()`` before a turn's tool calls start (all or none of them);
    - ``check()`` before a turn's tool calls start and after they ended.

    Once a limit is reached it stays reached: every run of the tree raises the same
    ``LimitExceeded`` at its next step, so a parent stops when its subagent spent the budget.

    Attributes:
        limits: the top-level run's limits.
        usage: the tree's model requests, tool calls, tokens and cost so far (``cost`` counts
            only the calls to models whose price is known).
        turns: model calls started in the tree.
        deadline: the event-loop time at which the tree's wall time runs out, or ``None``.
    """

    __slots__ = ("_exceeded", "deadline", "limits", "started", "turns", "unpriced", "usage")

    def __init__(self, limits: RunLimits) -> None:
        self.limits = limits
        self.usage = RunUsage()
        self.turns = 0
        self.unpriced = 0  # replies of models whose price is unknown (not in usage.cost)
        self.started = asyncio.get_running_loop().time()
        self.deadline = (
            None if limits.max_wall_time is None else self.started + limits.max_wall_time
        )
        self._exceeded: tuple[str, float, str] | None = None

    @property
    def exceeded(self) -> bool:
        """True once a limit of the tree was reached."""
        return self._exceeded is not None

    def _stop(self, limit: str, value: float, detail: str) -> LimitExceeded:
        if self._exceeded is None:
            self._exceeded = (limit, value, f"{detail} in the run and its subagents")
        return LimitExceeded(*self._exceeded)

    def check(self) -> None:
        """Raise ``LimitExceeded`` if the tree's tokens, cost or time are spent (or any limit
        was reached before)."""
        if self._exceeded is not None:
            raise LimitExceeded(*self._exceeded)
        limits, usage = self.limits, self.usage
        if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
            raise self._stop("max_tokens", limits.max_tokens, f"{usage.total_tokens} tokens used")
        cost = usage.cost or 0.0
        if limits.max_cost is not None and cost >= limits.max_cost:
            raise self._stop("max_cost", limits.max_cost, f"${cost:.4f} spent")
        if self.deadline is not None and asyncio.get_running_loop().time() >= self.deadline:
            raise self.timed_out()

    def timed_out(self) -> LimitExceeded:
        """The error of the tree's wall time running out (marks the tree as stopped)."""
        assert self.limits.max_wall_time is not None
        return self._stop("max_wall_time", self.limits.max_wall_time, "the time ran out")

    def start_turn(self) -> None:
        """Charge one model call, or raise ``LimitExceeded`` if it must not start."""
        self.check()
        limit = self.limits.max_turns
        if limit is not None and self.turns >= limit:
            raise self._stop("max_turns", limit, f"the model was called {self.turns} times")
        self.turns += 1

    def charge_response(self, usage: Usage, cost: float | None) -> None:
        """Charge the tokens and cost of one reply (``cost`` ``None``: the price is unknown)."""
        if cost is None:
            self.unpriced += 1
        self.usage.add_request(usage, 0.0 if cost is None else cost)

    def charge_tool_calls(self, count: int) -> None:
        """Charge ``count`` tool calls about to start, or raise ``LimitExceeded`` if they would
        pass the limit (then none of them starts)."""
        self.check()
        limit, made = self.limits.max_tool_calls, self.usage.tool_calls
        if limit is not None and made + count > limit:
            raise self._stop(
                "max_tool_calls", limit, f"{made} calls made and {count} more requested"
            )
        self.usage.tool_calls += count
