"""Several agents: what a handoff costs, and a ``coordinate`` team against its members' time:
``uv run python benchmarks/multi_agent.py [--write-docs]``.

Both parts talk to scripted OpenAI-compatible servers (``FakeOpenAIServer``) in their own
processes on 127.0.0.1, chosen by the system prompt of each request (``respond``):

- handoff overhead: with no server latency, the wall time of a run in which one agent answers
  directly (one model call), one in which it calls a no-op tool and answers (two calls), and one
  in which a triage agent hands over to the agent that answers (two calls). The handoff's own
  cost is the last minus the second.
- a ``coordinate`` team of 4 members whose model calls each take 200 ms (the server's latency;
  the coordinator's server answers at once) against one member alone and the 4 in a row.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, OpenAILike, Team  # noqa: E402
from agentica.messages import AssistantMessage, ToolCall  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402
from benchmarks.run import scripted_server  # noqa: E402

COMMAND = "uv run python benchmarks/multi_agent.py --write-docs"
MEMBERS = 4
MEMBER_LATENCY = 0.2


def respond(body: dict[str, Any]) -> Any:
    """The scripted server's reply, by the agent's instructions (its system prompt)."""
    messages = body.get("messages", [])
    system = str(messages[0].get("content", "")) if messages else ""
    answered = any(m.get("role") == "tool" for m in messages)
    if "role:triage" in system and not answered:
        return AssistantMessage(
            tool_calls=[ToolCall(id="", name="transfer_to_billing", arguments='{"reason": "x"}')]
        )
    if "role:tooluser" in system and not answered:
        return AssistantMessage(tool_calls=[ToolCall(id="", name="noop", arguments="{}")])
    if "role:lead" in system and not answered:
        calls = [
            ToolCall(id="", name=f"m{i}", arguments='{"task": "part"}') for i in range(MEMBERS)
        ]
        return AssistantMessage(tool_calls=calls)
    return "done"


def server(latency: float) -> AbstractContextManager[str]:
    """A scripted server (``respond``) in its own process; yields its base URL."""
    return scripted_server(latency, "benchmarks.multi_agent:respond")


async def noop() -> str:
    """Do nothing."""
    return "ok"


async def timed(
    run: Callable[[], Awaitable[Any]], times: int, cpu: list[float] | None = None
) -> list[float]:
    """Milliseconds of wall time of each of ``times`` calls of ``run`` (and of this process's
    CPU time, appended to ``cpu``: the servers run in other processes)."""
    out = []
    for _ in range(times):
        started, used = time.perf_counter(), time.process_time()
        await run()
        out.append((time.perf_counter() - started) * 1000)
        if cpu is not None:
            cpu.append((time.process_time() - used) * 1000)
    return out


async def handoff_overhead(
    url: str, runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    model = OpenAILike(id="bench", base_url=url, api_key="k")
    billing = Agent(name="billing", model=model, instructions="role:billing")
    triage = Agent(name="triage", model=model, instructions="role:triage", handoffs=[billing])
    tooluser = Agent(name="tooluser", model=model, instructions="role:tooluser", tools=[noop])
    scenarios: dict[str, Agent] = {"direct": billing, "tool turn": tooluser, "handoff": triage}
    figures: dict[str, list[float]] = {name: [] for name in scenarios}
    cpu: dict[str, list[float]] = {name: [] for name in scenarios}
    try:
        for agent in scenarios.values():  # warm up: connections, schemas
            await timed(lambda agent=agent: agent.clone().run("hi"), 20)
        for _ in range(runs // 20):  # alternating rounds, so drift hits every scenario alike
            for name, agent in scenarios.items():
                run = agent.clone
                figures[name] += await timed(lambda run=run: run().run("hi"), 20, cpu[name])
    finally:
        await model.aclose()
    return figures, cpu


async def coordinate_team(fast: str, slow: str, runs: int) -> dict[str, list[float]]:
    lead_model = OpenAILike(id="bench", base_url=fast, api_key="k")
    member_model = OpenAILike(id="bench", base_url=slow, api_key="k")
    members = [
        Agent(name=f"m{i}", model=member_model, instructions="role:member") for i in range(MEMBERS)
    ]
    lead = Agent(name="lead", model=lead_model, instructions="role:lead")

    async def in_a_row() -> None:
        for member in members:
            await member.clone().run("part")

    # a fresh team (a fresh conversation) per run, built before the clock starts
    teams = [Team(name="team", coordinator=lead.clone(), members=members) for _ in range(runs + 5)]

    async def team() -> None:
        await teams.pop().run("all parts")

    figures: dict[str, list[float]] = {}
    try:
        await timed(team, 5)  # warm up: a connection per concurrent member
        figures["one member"] = await timed(lambda: members[0].clone().run("part"), runs)
        figures[f"{MEMBERS} members in a row"] = await timed(in_a_row, runs)
        figures[f"coordinate team of {MEMBERS}"] = await timed(team, runs)
    finally:
        await lead_model.aclose()
        await member_model.aclose()
    return figures


def table(
    figures: dict[str, list[float]], header: str, cpu: dict[str, list[float]] | None = None
) -> list[str]:
    extra = " CPU ms (median) |" if cpu else ""
    rows = [f"| {header} | median ms | p90 ms |{extra}", "|---|---|---|" + ("---|" if cpu else "")]
    for name, values in figures.items():
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
        used = f" {statistics.median(cpu[name]):.2f} |" if cpu else ""
        rows.append(f"| {name} | {statistics.median(values):.1f} | {p90:.1f} |{used}")
    return rows


async def main(runs: int, team_runs: int) -> str:
    with server(0.0) as fast, server(MEMBER_LATENCY) as slow:
        handoffs, cpu = await handoff_overhead(fast, runs)
        teams = await coordinate_team(fast, slow, team_runs)
    median = {name: statistics.median(v) for name, v in handoffs.items()}
    used = {name: statistics.median(v) for name, v in cpu.items()}
    team_ms = statistics.median(teams[f"coordinate team of {MEMBERS}"])
    one = statistics.median(teams["one member"])
    in_a_row = statistics.median(teams[f"{MEMBERS} members in a row"])
    lines = [
        *table(handoffs, f"run ({runs} each, server latency 0)", cpu),
        "",
        f"A handoff costs {median['handoff'] - median['direct']:.1f} ms of wall time over a "
        "direct answer: one more model round trip on loopback, and the receiver's turn. Against "
        "a turn with a no-op tool call instead (also two model calls), the handoff itself costs "
        f"{used['handoff'] - used['tool turn']:+.2f} ms of CPU (median per run; wall time: "
        f"{median['handoff'] - median['tool turn']:+.1f} ms, within the noise of this machine).",
        "",
        *table(teams, f"{MEMBERS} members, {MEMBER_LATENCY * 1000:.0f} ms per member call"),
        "",
        f"The team takes {team_ms:.0f} ms: the slowest member ({one:.0f} ms) plus "
        f"{team_ms - one:.0f} ms for the coordinator's two calls and the delegation, not the "
        f"sum of its members ({in_a_row:.0f} ms in a row).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per handoff scenario")
    parser.add_argument("--team-runs", type=int, default=10, help="runs per team scenario")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    markdown = asyncio.run(main(args.runs, args.team_runs))
    print(markdown)
    if args.write_docs:
        write_section("multi-agent", COMMAND, markdown, heading="Several agents")
