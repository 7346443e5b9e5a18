"""Framework-core benchmarks: ``make bench`` (or ``uv run python benchmarks/run.py``).

Measures agentica against the floor (a hand-written aiohttp loop, ``benchmarks/floor.py``) on a
scripted OpenAI-compatible server running in its own process (``benchmarks/server.py``), all in
one run so that ratios are comparable on a noisy machine:

- fanout-N: one reply with N parallel ``fetch(i)`` calls (each tool sleeps 200 ms), then an answer;
  model latency 100 ms; N = 1, 2, 4, 8, 16; async and blocking (``time.sleep``) tools. Ideal 0.40 s.
- chain-20: 20 sequential single tool calls, zero latency: wall and CPU ms per step.
- 200 concurrent runs of fanout-4 in one event loop: runs per second.
- import + first agent (fresh process), and memory per agent over 1000 agents.

Results go to ``.bench-out/core.json``, a plot to ``docs/img/fanout.png``, and with
``--write-docs`` the table in ``docs/benchmarks.md`` is replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

from agentica import Agent, OpenAILike, tool  # noqa: E402
from benchmarks.floor import run_floor  # noqa: E402

FANOUT_NS = (1, 2, 4, 8, 16)
TOOL_SLEEP = 0.2
LATENCY = 0.1
console = Console()


@contextmanager
def scripted_server(latency: float, responder: str = "benchmarks.server:respond") -> Iterator[str]:
    """Start a scripted server (``responder``: ``module:function``) in its own process; yields
    its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentica.testing",
         "--responder", responder, "--latency", str(latency)],
        stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        match = re.match(r"PORT (\d+)", line)
        if not match:
            raise RuntimeError(f"benchmark server did not start: {line!r}")
        yield f"http://127.0.0.1:{match.group(1)}/v1"
    finally:
        process.terminate()
        process.wait(10)


@tool
async def fetch(i: int) -> str:
    """Fetch item i."""
    await asyncio.sleep(TOOL_SLEEP)
    return f"item {i}"


@tool(name="fetch")
def fetch_blocking(i: int) -> str:
    """Fetch item i."""
    time.sleep(TOOL_SLEEP)
    return f"item {i}"


async def fetch_floor(i: int) -> str:
    await asyncio.sleep(TOOL_SLEEP)
    return f"item {i}"


def fetch_floor_blocking(i: int) -> str:
    time.sleep(TOOL_SLEEP)
    return f"item {i}"


@tool
async def fetch_instant(i: int) -> str:
    """Fetch item i."""
    return f"item {i}"


async def instant_floor(i: int) -> str:
    return f"item {i}"


async def timed(make: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        await make()
        out.append(time.perf_counter() - start)
    return out


async def bench_fanout(url: str, repeat: int, progress: Progress) -> dict[str, Any]:
    import aiohttp

    task = progress.add_task("fanout", total=len(FANOUT_NS) * 4)
    results: dict[str, Any] = {}
    pool = ThreadPoolExecutor(64)
    async with aiohttp.ClientSession() as session:
        for n in FANOUT_NS:
            model = OpenAILike(id=f"fanout-{n}", base_url=url)
            for blocking in (False, True):
                kind = "blocking" if blocking else "async"
                agent_tool = fetch_blocking if blocking else fetch
                agent = Agent(model=model, tools=[agent_tool])
                await agent.clone().run("warm up")
                times = await timed(lambda a=agent: a.clone().run("fetch"), repeat)  # type: ignore[misc]
                results[f"agentica/{kind}/{n}"] = statistics.median(times)
                progress.advance(task)
                floor_tool = fetch_floor_blocking if blocking else fetch_floor
                times = await timed(
                    lambda n=n, b=blocking, t=floor_tool: run_floor(  # type: ignore[misc]
                        session, f"{url}/chat/completions", f"fanout-{n}", "fetch", t,
                        blocking=b, pool=pool,
                    ),
                    repeat,
                )  # fmt: skip
                results[f"floor/{kind}/{n}"] = statistics.median(times)
                progress.advance(task)
            await model.aclose()
    pool.shutdown()
    return results


async def bench_chain(url: str, repeat: int, progress: Progress) -> dict[str, Any]:
    import aiohttp

    task = progress.add_task("chain-20", total=2 * repeat)
    model = OpenAILike(id="chain-20", base_url=url)
    agent = Agent(model=model, tools=[fetch_instant])
    await agent.clone().run("warm up")
    walls, cpus = [], []
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        await agent.clone().run("chain")
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        progress.advance(task)
    await model.aclose()
    floor_walls, floor_cpus = [], []
    async with aiohttp.ClientSession() as session:
        for _ in range(repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            await run_floor(session, f"{url}/chat/completions", "chain-20", "chain", instant_floor)
            floor_walls.append(time.perf_counter() - wall)
            floor_cpus.append(time.process_time() - cpu)
            progress.advance(task)
    steps = 20
    return {
        "agentica/wall_ms_per_step": statistics.median(walls) * 1000 / steps,
        "agentica/cpu_ms_per_step": statistics.median(cpus) * 1000 / steps,
        "floor/wall_ms_per_step": statistics.median(floor_walls) * 1000 / steps,
        "floor/cpu_ms_per_step": statistics.median(floor_cpus) * 1000 / steps,
    }


async def bench_concurrent(
    url: str, repeat: int, progress: Progress, runs: int = 200
) -> dict[str, Any]:
    import aiohttp

    task = progress.add_task(f"{runs} concurrent runs", total=2 * repeat)
    model = OpenAILike(id="fanout-4", base_url=url)
    agent = Agent(model=model, tools=[fetch])
    await agent.clone().run("warm up")
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        await asyncio.gather(*(agent.clone().run("fetch") for _ in range(runs)))
        rates.append(runs / (time.perf_counter() - start))
        progress.advance(task)
    await model.aclose()
    floor_rates = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(repeat):
            start = time.perf_counter()
            await asyncio.gather(*(
                run_floor(session, f"{url}/chat/completions", "fanout-4", "fetch", fetch_floor)
                for _ in range(runs)
            ))  # fmt: skip
            floor_rates.append(runs / (time.perf_counter() - start))
            progress.advance(task)
    return {
        "agentica/runs_per_s": statistics.median(rates),
        "floor/runs_per_s": statistics.median(floor_rates),
    }


IMPORT_AGENTICA = """
import time; t0 = time.perf_counter()
from agentica import Agent, OpenAILike, tool
@tool
async def fetch(i: int) -> str:
    "Fetch item i."
    return str(i)
agent = Agent(model=OpenAILike(id="m", base_url="http://127.0.0.1:9/v1"), tools=[fetch])
agent.functions  # the tool schema is built
print((time.perf_counter() - t0) * 1000)
"""

IMPORT_FLOOR = """
import time; t0 = time.perf_counter()
import json, asyncio, aiohttp
tools = [{"type": "function", "function": {"name": "fetch", "parameters": {
    "type": "object", "properties": {"i": {"type": "integer"}}}}}]
agent = {"model": "m", "messages": [], "tools": tools}
print((time.perf_counter() - t0) * 1000)
"""

MEMORY_AGENTICA = """
import gc, tracemalloc
from agentica import Agent, OpenAILike, tool
@tool
async def fetch(i: int) -> str:
    "Fetch item i."
    return str(i)
model = OpenAILike(id="m", base_url="http://127.0.0.1:9/v1")
Agent(model=model, tools=[fetch]).functions
gc.collect(); tracemalloc.start(); before = tracemalloc.get_traced_memory()[0]
agents = [Agent(model=model, tools=[fetch]) for _ in range(1000)]
print((tracemalloc.get_traced_memory()[0] - before) / 1000 / 1024)
"""

MEMORY_FLOOR = """
import gc, tracemalloc
tools = [{"type": "function", "function": {"name": "fetch"}}]
gc.collect(); tracemalloc.start(); before = tracemalloc.get_traced_memory()[0]
agents = [{"model": "m", "messages": [], "tools": tools} for _ in range(1000)]
print((tracemalloc.get_traced_memory()[0] - before) / 1000 / 1024)
"""


def run_script(code: str, repeat: int) -> float:
    """Median of the number printed by ``code`` in fresh processes (after one warm-up run, with
    bytecode caching on, as on a user's machine)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    values = []
    for _ in range(repeat + 1):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
            env=env,
        )  # fmt: skip
        values.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(values[1:])


def bench_startup(repeat: int, progress: Progress) -> dict[str, Any]:
    task = progress.add_task("import + first agent, memory", total=4)
    results = {}
    for key, code, n in (
        ("agentica/import_first_agent_ms", IMPORT_AGENTICA, repeat),
        ("floor/import_first_agent_ms", IMPORT_FLOOR, repeat),
        ("agentica/kb_per_agent", MEMORY_AGENTICA, 1),
        ("floor/kb_per_agent", MEMORY_FLOOR, 1),
    ):
        results[key] = run_script(code, n)
        progress.advance(task)
    return results


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for who, style in (("agentica", "-o"), ("floor", "--s")):
        for kind in ("async", "blocking"):
            ax.plot(FANOUT_NS, [results[f"{who}/{kind}/{n}"] for n in FANOUT_NS], style,
                    label=f"{who}, {kind} tool")  # fmt: skip
    ax.axhline(2 * LATENCY + TOOL_SLEEP, color="grey", linewidth=1, linestyle=":",
               label="ideal (0.40 s)")  # fmt: skip
    ax.plot(FANOUT_NS, [2 * LATENCY + TOOL_SLEEP * n for n in FANOUT_NS], ":", color="black",
            label="tools one at a time (0.2 + 0.2 N s)")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xticks(FANOUT_NS, [str(n) for n in FANOUT_NS])
    ax.set_xlabel("parallel tool calls in one turn (N)")
    ax.set_ylabel("run wall time (s)")
    ax.set_yscale("log")
    ax.set_ylim(0.3, 4.0)
    ax.set_title("fanout-N: 100 ms model latency, 200 ms tools")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def table(r: dict[str, Any]) -> str:
    def row(who: str) -> str:
        return (
            f"| {who} | {r[f'{who}/async/16']:.2f} / {r[f'{who}/blocking/16']:.2f} "
            f"| {r[f'{who}/wall_ms_per_step']:.2f} ({r[f'{who}/cpu_ms_per_step']:.2f} CPU) "
            f"| {r[f'{who}/runs_per_s']:.0f} | {r[f'{who}/import_first_agent_ms']:.0f} "
            f"| {r[f'{who}/kb_per_agent']:.2f} |"
        )

    fan = " | ".join(
        f"{r[f'agentica/async/{n}']:.2f} / {r[f'agentica/blocking/{n}']:.2f}" for n in FANOUT_NS
    )
    fan_floor = " | ".join(
        f"{r[f'floor/async/{n}']:.2f} / {r[f'floor/blocking/{n}']:.2f}" for n in FANOUT_NS
    )
    return "\n".join([
        "| | fanout-16 async / blocking (s) | chain-20 wall ms/step (CPU) | 200 x fanout-4 runs/s "
        "| import+first agent ms | KB/agent |",
        "|---|---|---|---|---|---|",
        row("agentica"),
        row("floor"),
        "",
        "fanout-N wall time, async / blocking tool (s); ideal 0.40 s for every N:",
        "",
        "| | " + " | ".join(f"N={n}" for n in FANOUT_NS) + " |",
        "|---|" + "---|" * len(FANOUT_NS),
        f"| agentica | {fan} |",
        f"| floor | {fan_floor} |",
    ])  # fmt: skip


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with Progress(console=console, transient=True) as progress:
        with scripted_server(LATENCY) as url:
            results |= await bench_fanout(url, args.repeat, progress)
            results |= await bench_concurrent(url, max(1, args.repeat), progress)
        with scripted_server(0.0) as url:
            results |= await bench_chain(url, args.repeat + 2, progress)
        results |= bench_startup(args.repeat + 2, progress)
    return results


def write_docs(markdown: str, command: str) -> None:
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else ""
    block = (
        "<!-- core:start -->\n"
        f"Command: `{command}` · measured {time.strftime('%Y-%m-%d')} on "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}\n\n"
        f"{markdown}\n\n![fanout-N](img/fanout.png)\n<!-- core:end -->"
    )
    if "<!-- core:start -->" in text:
        text = re.sub(r"<!-- core:start -->.*?<!-- core:end -->", block, text, flags=re.S)
    else:
        text += "\n" + block + "\n"
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per measurement")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    out = ROOT / ".bench-out"
    out.mkdir(exist_ok=True)
    (out / "core.json").write_text(json.dumps(results, indent=2))
    plot(results, ROOT / "docs" / "img" / "fanout.png")
    markdown = table(results)
    print(markdown)
    if args.write_docs:
        write_docs(markdown, 'make bench ARGS="--write-docs"')


if __name__ == "__main__":
    main()
