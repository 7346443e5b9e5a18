"""Hostile probe: run limits across subagent trees. ``uv run python benchmarks/hostile_limits.py``

Trees of agents that never stop calling tools (every reply asks for a ``work`` call and, while
the agent may delegate, ``fan_out`` subagents through the ``task`` tool), on the real run loop
with scripted models (``agentica.testing.FunctionModel``), for each limit kind (turns, tool
calls, tokens, cost, wall time) and each tree shape (subagent depth 1..3, fan-out 1 and 3). The
limit is set on the top-level run only; what the whole tree then did is counted where it really
happens (model calls in the model, tool calls in the tool).

A tree fails when it went past its limit by more than one in-flight step, when the top-level run
did not stop with ``LimitExceeded`` naming that limit, or when a tool was still running after
the run ended:

- turns and tool calls: a model call or tool call is charged before it starts, so none may run
  past the limit;
- tokens and cost: a reply is charged when it arrives and no call starts once the budget is
  spent, so the tree may pass the limit only by the replies in flight at that moment (at most
  one per agent running concurrently);
- wall time: the tree must end, and no model call or tool call may start, later than the limit
  plus ``TIME_SLACK`` after the top-level start as this probe sees it (the run's deadline is
  set a moment after the probe's clock starts and a call is checked a moment before it lands;
  a call already sent is cut at the deadline).
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, LimitExceeded, RunLimits, tool  # noqa: E402
from agentica.deep.subagents import SubAgent, SubAgents  # noqa: E402
from agentica.messages import AssistantMessage, Message, Usage  # noqa: E402
from agentica.models.base import ModelRequest  # noqa: E402
from agentica.models.pricing import ModelPrice  # noqa: E402
from agentica.testing import FunctionModel, call  # noqa: E402

SHAPES = [(depth, fan_out) for fan_out in (1, 3) for depth in (1, 2, 3)]
TOKENS = 500  # per reply
PRICE = ModelPrice(input=1.0, output=1.0)  # USD per million tokens: a reply costs $0.0005
LATENCY = 0.005  # seconds per model call
WORK = 0.02  # seconds per work call
UNLIMITED = RunLimits(max_turns=None, max_tool_calls=None)

# kind -> (the limit, its value): the top-level run gets only this limit
KINDS: dict[str, tuple[str, float]] = {
    "turns": ("max_turns", 7),
    "tool calls": ("max_tool_calls", 9),
    "tokens": ("max_tokens", 3000),
    "cost": ("max_cost", 0.003),
    "time": ("max_wall_time", 0.4),
}


@dataclass
class Outcome:
    kind: str
    depth: int
    fan_out: int
    allowed: float
    executed: float  # what the tree did in the limit's unit
    slack: float  # the overshoot one in-flight step per concurrent agent may cause
    stopped: str  # how the top-level run ended
    late: int  # calls started after the wall-time limit
    orphans: int  # tool calls still running after the run ended

    @property
    def failed(self) -> bool:
        name = KINDS[self.kind][0]
        return (
            self.stopped != name
            or self.executed > self.allowed + self.slack
            or self.late > 0
            or self.orphans > 0
        )


class Tree:
    """Counts what a tree of tool-calling agents really did."""

    def __init__(self, fan_out: int) -> None:
        self.fan_out = fan_out
        self.model_calls = 0
        self.tool_calls = 0  # work calls and subagents started
        self.tokens = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.running_tools = 0
        self.starts: list[float] = []

    async def reply(self, messages: list[Message], request: ModelRequest) -> AssistantMessage:
        loop = asyncio.get_running_loop()
        self.starts.append(loop.time())
        if len(messages) <= 2 and self.model_calls:  # a subagent's first call: its task ran
            self.tool_calls += 1
        self.model_calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(LATENCY)
        finally:
            self.in_flight -= 1
        self.tokens += TOKENS
        calls = [call("work")]
        if any(t.name == "task" for t in request.tools):
            calls += [
                call("task", description=f"part {i}", agent="worker") for i in range(self.fan_out)
            ]
        usage = Usage(input_tokens=TOKENS - 20, output_tokens=20)
        return AssistantMessage(tool_calls=calls, usage=usage)

    def agent(self, depth: int) -> Agent:
        tree = self

        @tool
        async def work() -> str:
            """Do a piece of work."""
            tree.tool_calls += 1
            tree.starts.append(asyncio.get_running_loop().time())
            tree.running_tools += 1
            try:
                await asyncio.sleep(WORK)
            finally:
                tree.running_tools -= 1
            return "worked"

        worker = SubAgent("worker", "does a part", model=FunctionModel(self.reply, price=PRICE))
        return Agent(
            model=FunctionModel(self.reply, price=PRICE),
            tools=[work],
            capabilities=[SubAgents([worker], general=False, max_depth=depth)],
            limits=UNLIMITED,  # each run's own limits off: only the tree's budget holds
        )


async def trial(kind: str, depth: int, fan_out: int) -> Outcome:
    name, value = KINDS[kind]
    limits = replace(UNLIMITED, **{name: value})
    tree = Tree(fan_out)
    agent = tree.agent(depth)
    started = asyncio.get_running_loop().time()
    try:
        await agent.run("go", limits=limits)
        stopped = "completed"
    except LimitExceeded as exc:
        stopped = exc.limit
    except Exception as exc:  # an untyped or unexpected error is a failure, reported by name
        stopped = type(exc).__name__
    await asyncio.sleep(0)
    orphans = tree.running_tools
    late = sum(1 for t in tree.starts if t > started + value + TIME_SLACK) if kind == "time" else 0
    step = tree.most_in_flight  # model calls in flight at once, at most
    reply_cost = PRICE.cost(Usage(input_tokens=TOKENS))
    executed, slack = {
        "turns": (tree.model_calls, 0.0),
        "tool calls": (tree.tool_calls, 0.0),
        "tokens": (tree.tokens, step * TOKENS),
        "cost": (tree.tokens / TOKENS * reply_cost, step * reply_cost),
        "time": (asyncio.get_running_loop().time() - started, TIME_SLACK),
    }[kind]
    return Outcome(kind, depth, fan_out, value, executed, slack, stopped, late, orphans)


TIME_SLACK = 0.05  # seconds: scheduling between the probe's clock, the run's and a call's


def outcomes() -> list[Outcome]:
    return [asyncio.run(trial(kind, d, f)) for kind in KINDS for d, f in SHAPES]


def _fmt(value: float) -> str:
    return f"{value:.4f}" if value < 1 and value != int(value) else f"{value:g}"


def run() -> list[dict[str, Any]]:
    return rows_of(outcomes())


def rows_of(results: list[Outcome]) -> list[dict[str, Any]]:
    rows = []
    for kind, (name, value) in KINDS.items():
        mine = [o for o in results if o.kind == kind]
        most = max(o.executed for o in mine)
        unit = "s" if kind == "time" else ""
        rows.append(
            {
                "family": f"limits: {kind} ({name}={_fmt(value)})",
                "attempts": len(mine),
                "failures": sum(o.failed for o in mine),
                "what": (
                    f"{len(mine)} subagent trees (depth 1-3, fan-out 1 and 3) that never stop "
                    f"calling tools, the limit set on the top-level run: at most "
                    f"{_fmt(most)}{unit} used in a tree; failure = the tree went past the limit by "
                    "more than one in-flight step per concurrent agent (time: a call started "
                    "after it), did not stop with LimitExceeded naming it, or left a tool running"
                ),
            }
        )
    return rows


def main() -> None:
    results = outcomes()
    print(f"{'kind':11} {'depth':>5} {'fan':>3} {'allowed':>8} {'executed':>9} {'slack':>8}  stop")
    for o in results:
        slack = "-" if o.slack == float("inf") else _fmt(o.slack)
        flag = "  FAILED" if o.failed else ""
        print(
            f"{o.kind:11} {o.depth:>5} {o.fan_out:>3} {_fmt(o.allowed):>8} "
            f"{_fmt(o.executed):>9} {slack:>8}  {o.stopped}{flag}"
        )
    for row in rows_of(results):
        print(row)


if __name__ == "__main__":
    main()
