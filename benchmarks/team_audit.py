"""Audit benchmark: ``uv run python benchmarks/team_audit.py [--quick] [--no-postgres]``.

Audit writes per second on a SQLite file (WAL, synchronous=FULL) and on PostgreSQL (a throw-away
cluster with its default durability, fsync on), each write durable when it returns:
- sequential: one caller awaiting ``record`` after ``record``;
- 50 concurrent writers through ``record`` (the writer task commits what is queued together);
- 50 concurrent writers each in its own transaction (``db.write()`` + ``record_in``: what the
  group commit saves);
and ``verify`` over one long chain (records per second). Each record carries ~150 bytes of data
like a model call's (model, tokens, cost, latency).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica_team.audit import Audit  # noqa: E402
from agentica_team.db.engine import Database  # noqa: E402
from tests.postgres import Cluster, throwaway_cluster, why_no_postgres  # noqa: E402

WRITERS = 50
COURSE = "c_bench"


def data(i: int) -> dict[str, object]:
    return {
        "model": "gpt-4.1-mini",
        "input_tokens": 1200 + i % 500,
        "output_tokens": 300 + i % 200,
        "cached_tokens": 1024,
        "cost_micros": 950 + i % 77,
        "latency_ms": 812.5 + i % 100,
        "session_id": f"s_{i % 40:04d}",
    }


@dataclass
class Row:
    backend: str
    sequential: float
    grouped: float
    per_transaction: float
    verify: float
    verified: int
    growth_mb: float  # how much verify raised the process's peak memory

    def markdown(self) -> str:
        return (
            f"| {self.backend} | {self.sequential:,.0f} | {self.grouped:,.0f} | "
            f"{self.per_transaction:,.0f} | {self.verify:,.0f} ({self.verified:,} records, "
            f"peak memory +{self.growth_mb:.0f} MB) |"
        )


async def timed(n: int, body: Callable[[], Awaitable[object]]) -> float:
    """``n / seconds`` that ``body`` took."""
    start = time.perf_counter()
    await body()
    return n / (time.perf_counter() - start)


async def sequential(audit: Audit, n: int) -> None:
    for i in range(n):
        await audit.record("model.call", actor_id="u_seq", course_id=COURSE, data=data(i))


async def grouped(audit: Audit, n: int, writers: int = WRITERS) -> None:
    async def writer(w: int) -> None:
        for i in range(w, n, writers):
            await audit.record("model.call", actor_id=f"u_{w}", course_id=COURSE, data=data(i))

    await asyncio.gather(*(writer(w) for w in range(writers)))


async def per_transaction(db: Database, audit: Audit, n: int) -> None:
    async def writer(w: int) -> None:
        for i in range(w, n, WRITERS):
            async with db.write() as conn:
                await audit.record_in(
                    conn, "model.call", actor_id=f"u_{w}", course_id=COURSE, data=data(i)
                )

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))


async def measure(backend: str, url: str, writes: int, chain: int) -> Row:
    db = Database(url)
    await db.upgrade()
    audit = Audit(db)
    try:
        await audit.record("bench.start", course_id=COURSE)  # connections, statements cached
        seq = await timed(writes, lambda: sequential(audit, writes))
        group = await timed(writes, lambda: grouped(audit, writes))
        single = await timed(writes, lambda: per_transaction(db, audit, writes))
        done = 1 + 3 * writes
        if chain > done:
            await grouped(audit, chain - done, writers=200)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        (report,) = await audit.verify(COURSE)
        verify = report.records / (time.perf_counter() - start)
        growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
        if not report.ok or report.records < chain:
            raise SystemExit(f"{backend}: the chain does not verify: {report}")
        return Row(backend, seq, group, single, verify, report.records, growth)
    finally:
        await audit.aclose()
        await db.aclose()


@contextlib.contextmanager
def postgres(wanted: bool) -> Iterator[Cluster | None]:
    if not wanted or why_no_postgres():
        yield None
        return
    with throwaway_cluster(durable=True) as cluster:
        cluster.create_database("bench")
        yield cluster


async def run_all(writes: int, chain: int, tmp: Path, cluster: Cluster | None) -> list[Row]:
    rows = [
        await measure(
            "SQLite (WAL, synchronous=FULL)", f"sqlite+aiosqlite:///{tmp / 'a.db'}", writes, chain
        )
    ]
    if cluster is not None:
        rows.append(
            await measure("PostgreSQL (local, fsync on)", cluster.url("bench"), writes, chain)
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer records (a smoke run)")
    parser.add_argument("--writes", type=int, help="records per write scenario (default 2000)")
    parser.add_argument("--chain", type=int, help="records in the verified chain (default 100k)")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    writes = args.writes or (300 if args.quick else 2000)
    chain = args.chain or (5_000 if args.quick else 100_000)
    reason = why_no_postgres() if not args.no_postgres else "--no-postgres"
    with (
        tempfile.TemporaryDirectory(prefix="agentica-bench-") as tmp,
        postgres(not args.no_postgres) as cluster,
    ):
        rows = asyncio.run(run_all(writes, chain, Path(tmp), cluster))
    print(f"Audit writes per second ({writes} records per scenario, {WRITERS} writers), verify")
    print()
    print(
        "| backend | sequential `record` | 50 writers, `record` (group commit) | "
        "50 writers, own transaction each | verify (records/s) |"
    )
    print("|---|---|---|---|---|")
    for row in rows:
        print(row.markdown())
    if reason:
        print(f"\nPostgreSQL skipped: {reason}.")


if __name__ == "__main__":
    main()
