"""Budget admission benchmark: ``uv run python benchmarks/team_admission.py [--quick]``.

Admissions per second on one budget: ``--tasks`` concurrent tasks (default 1, 10 and 50) each
loop ``reserve`` + ``settle`` (two transactions) for one of 100 students until ``--pairs`` pairs
are done. Every call holds on the same course budget row (the hot row) and on the student's
default budget, as in a class. Also measured: refusals per second once the course budget is
spent (a refused ``reserve`` rolls back). SQLite is a file with the service's settings (WAL,
synchronous=FULL); PostgreSQL a throw-away local cluster with fsync on (skipped when not
installed). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from agentica_team.budgets import Budgets  # noqa: E402
from agentica_team.db.engine import Database  # noqa: E402
from agentica_team.db.schema import courses, metadata, users  # noqa: E402
from agentica_team.errors import BudgetExceeded  # noqa: E402
from tests.postgres import Cluster, throwaway_cluster, why_no_postgres  # noqa: E402

COURSE = "c_bench"
STUDENTS = [f"s_{i:03d}" for i in range(100)]


@dataclass
class Row:
    backend: str
    tasks: int
    pairs: int
    seconds: float
    latencies: list[float]

    def markdown(self) -> str:
        ordered = sorted(self.latencies)
        p50 = statistics.median(ordered) * 1000
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
        return (
            f"| {self.backend} | {self.tasks} | {self.pairs / self.seconds:,.0f} | "
            f"{p50:.1f} | {p99:.1f} |"
        )


async def prepare(db: Database) -> Budgets:
    """An empty schema with one course, a course budget and a default student budget."""
    await db.upgrade()
    async with db.write() as conn:
        if db.dialect == "postgresql":
            names = ", ".join(table.name for table in metadata.sorted_tables)
            await conn.exec_driver_sql(f"TRUNCATE {names} CASCADE")
        else:
            for table in reversed(metadata.sorted_tables):
                await conn.execute(sa.delete(table))
        await conn.execute(
            sa.insert(users).values(
                id="t_bench", email="t@bench.test", name="t", role="teacher", created_at=0.0
            )
        )
        await conn.execute(
            sa.insert(courses).values(
                id=COURSE, name="bench", title="bench", owner_id="t_bench", created_at=0.0
            )
        )
    budgets = Budgets(db)
    await budgets.set_budget(COURSE, scope="course", period="course", max_tokens=10**15)
    await budgets.set_budget(COURSE, scope="student", period="day", max_tokens=10**12)
    return budgets


async def admissions(budgets: Budgets, backend: str, tasks: int, pairs: int) -> Row:
    latencies: list[float] = []
    todo = iter(range(pairs))

    async def worker() -> None:
        for i in todo:
            started = time.perf_counter()
            held = await budgets.reserve(
                course_id=COURSE, user_id=STUDENTS[i % len(STUDENTS)], tokens=1_200, cost_micros=90
            )
            await budgets.settle(held, input_tokens=900, output_tokens=200, cost_micros=80)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return Row(backend, tasks, pairs, time.perf_counter() - started, latencies)


async def refusals(budgets: Budgets, tasks: int, calls: int) -> float:
    """Refused reserves per second against a spent course budget."""
    await budgets.set_budget(COURSE, scope="course", period="course", max_tokens=0)
    todo = iter(range(calls))

    async def worker() -> None:
        for i in todo:
            with contextlib.suppress(BudgetExceeded):
                await budgets.reserve(
                    course_id=COURSE, user_id=STUDENTS[i % 100], tokens=1, cost_micros=0
                )
                raise AssertionError("a spent budget admitted a call")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return calls / (time.perf_counter() - started)


async def measure(backend: str, url: str, levels: list[int], pairs: int) -> tuple[list[Row], float]:
    db = Database(url)
    try:
        rows = []
        for tasks in levels:
            budgets = await prepare(db)
            await admissions(budgets, backend, tasks, min(pairs, 50))  # warm-up
            rows.append(await admissions(budgets, backend, tasks, pairs))
            left = await budgets.remaining(COURSE, STUDENTS[0])
            assert all(r.reserved_tokens == 0 for r in left), "a hold was left behind"
        refused = await refusals(budgets, max(levels), pairs)
        return rows, refused
    finally:
        await db.aclose()


@contextlib.contextmanager
def postgres() -> Iterator[Cluster | None]:
    if why_no_postgres():
        yield None
        return
    with throwaway_cluster(durable=True) as cluster:
        cluster.create_database("bench")
        yield cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pairs and levels")
    parser.add_argument("--pairs", type=int, default=None, help="reserve+settle pairs per level")
    parser.add_argument("--tasks", type=int, nargs="*", default=None, help="concurrency levels")
    args = parser.parse_args()
    pairs = args.pairs or (200 if args.quick else 2_000)
    levels = args.tasks or ([1, 10] if args.quick else [1, 10, 50])
    reason = why_no_postgres()
    results: list[tuple[list[Row], float]] = []
    with tempfile.TemporaryDirectory(prefix="agentica-bench-") as tmp, postgres() as cluster:
        sqlite = f"sqlite+aiosqlite:///{Path(tmp) / 'team.db'}"
        results.append(
            asyncio.run(measure("SQLite (WAL, synchronous=FULL)", sqlite, levels, pairs))
        )
        if cluster is not None:
            url = cluster.url("bench")
            results.append(asyncio.run(measure("PostgreSQL (local, fsync on)", url, levels, pairs)))
    print(
        f"{pairs} reserve+settle pairs per row on one course budget (+ the student's default "
        f"budget); {os.cpu_count()} cores, Python {sys.version.split()[0]}\n"
    )
    print("| backend | tasks | admissions/s | pair p50 (ms) | pair p99 (ms) |")
    print("|---|---|---|---|---|")
    for rows, _ in results:
        for row in rows:
            print(row.markdown())
    print()
    for rows, refused in results:
        print(f"- {rows[0].backend}: {refused:,.0f} refusals/s ({max(levels)} tasks, spent budget)")
    if reason:
        print(f"- PostgreSQL skipped: {reason}")


if __name__ == "__main__":
    main()
