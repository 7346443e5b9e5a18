"""What durability costs a workflow: ``uv run python benchmarks/workflows.py [--write-docs]``.

1. Step overhead: a chain of trivial async steps run as a workflow, against calling the same
   function directly, per step: in memory, SQLite (WAL, synchronous=FULL: an fsync per step) and
   PostgreSQL (a throw-away cluster with fsync on, if PostgreSQL is installed).
2. Resume after a crash: a 20-step run is killed with SIGKILL inside step 10, then resumed; the
   time from ``resume`` to its first step starting, in this process with the store open (warm)
   and in a new process (cold: opening the store included, importing Python modules not), and
   the whole resume of the 11 remaining steps.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.workflows import StepContext, StepStarted, Workflow  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402
from tests.postgres import throwaway_cluster, why_no_postgres  # noqa: E402

COMMAND = "uv run python benchmarks/workflows.py --write-docs"
STEPS = 20
CRASH_AT = 10


@dataclass
class Counter:
    n: int = 0


async def bump(state: Counter) -> dict[str, Any]:
    return {"n": state.n + 1}


def chain(store: str, steps: int, crash: Path | None = None) -> Workflow[Counter]:
    """``steps`` steps in a row; with ``crash``, step ``CRASH_AT`` hangs while that file exists
    (after writing ``<crash>.ready``)."""

    async def hang(state: Counter, ctx: StepContext) -> dict[str, Any]:
        if crash is not None and ctx.attempt == 1 and await asyncio.to_thread(crash.exists):
            await asyncio.to_thread(crash.with_suffix(".ready").touch)
            await asyncio.sleep(3600)
        return {"n": state.n + 1}

    flow = Workflow("bench", Counter, store=store)
    for i in range(1, steps + 1):
        flow.step(f"s{i}", hang if i == CRASH_AT else bump)
        if i > 1:
            flow.edge(f"s{i - 1}", f"s{i}")
    return flow


async def per_step_direct(steps: int, repeats: int) -> float:
    """Median µs per direct call of the step function."""
    timings = []
    for _ in range(repeats):
        state = Counter()
        started = time.perf_counter()
        for _ in range(steps):
            state = Counter(**{**vars(state), **await bump(state)})
        timings.append((time.perf_counter() - started) / steps * 1e6)
    return statistics.median(timings)


async def per_step_workflow(store: str, steps: int, repeats: int) -> float:
    """Median µs per step of a ``steps``-step workflow run (the first run warms the store)."""
    flow = chain(store, steps)
    await flow.run(Counter())
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = await flow.run(Counter())
        timings.append((time.perf_counter() - started) / steps * 1e6)
        assert result.state.n == steps
    await flow.store.aclose()
    return statistics.median(timings)


def crash_run(store: str, folder: Path, run_id: str) -> None:
    """Start the 20-step run in a child process and SIGKILL it inside step ``CRASH_AT``."""
    flag = folder / f"{run_id}.crash"
    flag.touch()
    child = subprocess.Popen([sys.executable, __file__, "--child-run", store, str(flag), run_id])
    try:
        deadline = time.monotonic() + 120
        while not flag.with_suffix(".ready").exists():
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the child workflow did not reach the crash step")
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    flag.unlink()
    flag.with_suffix(".ready").unlink()


async def resume_warm(flow: Workflow[Counter], run_id: str) -> tuple[float, float]:
    """ms to the first resumed step starting, and to the end of the run."""
    started = time.perf_counter()
    first = 0.0
    async for event in flow.resume_stream(run_id):
        if isinstance(event, StepStarted) and not first:
            first = time.perf_counter() - started
    return first * 1e3, (time.perf_counter() - started) * 1e3


def resume_cold(store: str, run_id: str) -> float:
    """ms from a new process's first call to its first resumed step starting."""
    code = (
        "import asyncio, sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks.workflows import chain, resume_warm\n"
        "async def main():\n"
        f"    flow = chain({store!r}, {STEPS})\n"
        f"    print((await resume_warm(flow, {run_id!r}))[0])\n"
        "    await flow.store.aclose()\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    return float(out.strip().splitlines()[-1])


async def resume_figures(store: str, folder: Path, crashes: int) -> dict[str, float]:
    warm_first, warm_total, cold_first = [], [], []
    for i in range(crashes):
        for target, cold in ((warm_first, False), (cold_first, True)):
            run_id = f"crash-{i}-{'cold' if cold else 'warm'}"
            await asyncio.to_thread(crash_run, store, folder, run_id)
            if cold:
                target.append(await asyncio.to_thread(resume_cold, store, run_id))
                continue
            flow = chain(store, STEPS)
            await flow.inspect(run_id)  # the store is open: warm
            first, total = await resume_warm(flow, run_id)
            result = await flow.inspect(run_id)
            assert (result.status, result.state.n) == ("completed", STEPS)
            await flow.store.aclose()
            warm_first.append(first)
            warm_total.append(total)
    return {
        "warm": statistics.median(warm_first),
        "cold": statistics.median(cold_first),
        "total": statistics.median(warm_total),
    }


async def measure(args: argparse.Namespace, folder: Path, pg_url: str | None) -> str:
    direct = await per_step_direct(STEPS, args.repeats * 10)
    stores: list[tuple[str, str]] = [
        ("memory", "memory"),
        ("SQLite (WAL, synchronous=FULL)", f"sqlite+aiosqlite:///{folder / 'bench.db'}"),
    ]
    if pg_url:
        stores.append(("PostgreSQL (local, fsync on)", pg_url))
    rows = [
        "| store | µs per step | overhead over a direct call (µs) | resume: first step, warm "
        "(ms) | first step, new process (ms) | resume of 11 steps (ms) |",
        "|---|---|---|---|---|---|",
        f"| direct call (no workflow) | {direct:.1f} | | | | |",
    ]
    for label, store in stores:
        step = await per_step_workflow(store, STEPS, args.repeats)
        resume = {"warm": float("nan"), "cold": float("nan"), "total": float("nan")}
        if store != "memory":  # an in-memory run does not survive its process
            resume = await resume_figures(store, folder, args.crashes)
        cells = [
            f"{resume[k]:.1f}" if store != "memory" else "–" for k in ("warm", "cold", "total")
        ]
        rows.append(f"| {label} | {step:,.0f} | {step - direct:,.0f} | {' | '.join(cells)} |")
    return "\n".join(rows) + (
        f"\n\nA chain of {STEPS} trivial async steps (`return {{'n': state.n + 1}}`); medians "
        f"of {args.repeats} runs. Resume: {args.crashes} runs per store killed with SIGKILL "
        f"inside step {CRASH_AT}; each resume re-runs step {CRASH_AT} (attempt 2) and the "
        f"{STEPS - CRASH_AT} after it; in a new process the first resume opens the store "
        "(SQLAlchemy and alembic imported on a worker thread, the schema checked), the "
        "interpreter's start and `import agentica` not included. The durable stores' cost is "
        "mostly the commit's fsync. Measured on "
        f"{os.cpu_count()} cores (shared with other jobs), Python {sys.version.split()[0]}."
    )


async def child_run(store: str, flag: str, run_id: str) -> None:
    flow = chain(store, STEPS, crash=Path(flag))
    await flow.run(Counter(), run_id=run_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="workflow runs per store")
    parser.add_argument("--crashes", type=int, default=3, help="killed runs per store")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--child-run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_run:
        asyncio.run(child_run(*args.child_run))
        return
    with tempfile.TemporaryDirectory() as folder:
        run: Callable[[str | None], str] = lambda url: asyncio.run(  # noqa: E731
            measure(args, Path(folder), url)
        )
        if args.no_postgres or why_no_postgres():
            markdown = run(None)
        else:
            with throwaway_cluster(durable=True) as cluster:
                markdown = run(cluster.create_database("bench"))
    print(markdown)
    if args.write_docs:
        write_section("workflows", COMMAND, markdown, heading="Several agents")


if __name__ == "__main__":
    main()
