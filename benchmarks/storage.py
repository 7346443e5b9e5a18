"""Storage benchmark: ``uv run python benchmarks/storage.py [--runs 200] [--write-docs]``.

For each backend (in-memory, SQLite file, JSON files, PostgreSQL in a throw-away cluster with its
default durability) one session receives ``--runs`` runs, each a user message, an assistant
message with two tool calls, the two ~2 KB tool results and a final answer
(``tests.records.realistic_run``). Measured: the first use (engine, schema check or creation),
the latency of each ``append_run`` (median and p95), loading the whole session (median of 5),
and the bytes per run the backend keeps (on disk; for memory, the encoded records).
``--write-docs`` replaces the ``storage`` block of docs/benchmarks.md (appended if absent).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402

from agentica.storage import (  # noqa: E402
    InMemoryStorage,
    JSONFileStorage,
    SQLiteStorage,
    SQLStorage,
    Storage,
    encode_run,
)
from tests.postgres import Cluster, throwaway_cluster, why_no_postgres  # noqa: E402
from tests.records import realistic_run  # noqa: E402

DOCS = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- storage:start -->", "<!-- storage:end -->"


@dataclass
class Result:
    backend: str
    open_ms: float
    append_ms: list[float]
    load_ms: list[float]
    bytes_per_run: float

    def row(self) -> str:
        appends = sorted(self.append_ms)
        p95 = appends[min(len(appends) - 1, int(len(appends) * 0.95))]
        return (
            f"| {self.backend} | {self.open_ms:.0f} | {statistics.median(appends):.2f} | "
            f"{p95:.2f} | {statistics.median(self.load_ms):.1f} | {self.bytes_per_run:,.0f} |"
        )


def directory_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (whole blocks, as ``du`` counts them)."""
    seen: set[int] = set()
    total = 0
    for file in path.rglob("*"):
        stat = file.lstat()
        if file.is_file() and stat.st_ino not in seen:
            seen.add(stat.st_ino)
            total += stat.st_blocks * 512
    return total


async def sql_scalar(url: str, statement: str) -> int:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            return int((await conn.execute(sa.text(statement))).scalar_one())
    finally:
        await engine.dispose()


async def kept_bytes(storage: Storage, runs: int) -> float:
    """What the backend keeps per run (called after ``aclose``)."""
    if isinstance(storage, SQLiteStorage):  # closed: the WAL is checkpointed into the file
        wal = storage.path.with_name(storage.path.name + "-wal")
        return (storage.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)) / runs
    if isinstance(storage, SQLStorage):
        size = "SELECT pg_total_relation_size('runs') + pg_total_relation_size('sessions')"
        return await sql_scalar(storage.url, size) / runs
    if isinstance(storage, JSONFileStorage):
        return await asyncio.to_thread(directory_bytes, storage.directory) / runs
    assert isinstance(storage, InMemoryStorage)
    session = next(iter(storage._sessions.values()))
    return sum(len(text.encode()) for text in session.runs) / runs


async def measure(name: str, storage: Storage, runs: int) -> Result:
    records = [realistic_run(i) for i in range(runs)]
    start = time.perf_counter()
    await storage.list_sessions("bench")  # first use: engine, schema
    open_ms = (time.perf_counter() - start) * 1000
    appends = []
    for number, record in enumerate(records):
        start = time.perf_counter()
        await storage.append_run("bench", "session", record, summary=f"after {number}")
        appends.append((time.perf_counter() - start) * 1000)
    loads = []
    for _ in range(5):
        start = time.perf_counter()
        data = await storage.load_session("bench", "session")
        loads.append((time.perf_counter() - start) * 1000)
        if data is None or len(data.runs) != runs:
            raise SystemExit(f"{name}: the session did not load back whole")
    await storage.aclose()
    size = await kept_bytes(storage, runs)
    return Result(name, open_ms, appends, loads, size)


@contextlib.contextmanager
def postgres() -> Iterator[Cluster | None]:
    if why_no_postgres():
        yield None
        return
    with throwaway_cluster(durable=True) as cluster:
        cluster.create_database("bench")
        yield cluster


async def run_all(runs: int, tmp: Path, cluster: Cluster | None) -> list[Result]:
    makers: list[tuple[str, Callable[[], Storage]]] = [
        ("memory", InMemoryStorage),
        ("SQLite (WAL, synchronous=FULL)", lambda: SQLiteStorage(tmp / "bench.db")),
        ("JSON files", lambda: JSONFileStorage(tmp / "files")),
    ]
    if cluster is not None:
        makers.append(("PostgreSQL 15 (local, fsync on)", lambda: SQLStorage(cluster.url("bench"))))
    return [await measure(name, make(), runs) for name, make in makers]


def markdown(results: list[Result], runs: int, note: str) -> str:
    record = len(encode_run(realistic_run(0)).encode())
    lines = [
        textwrap.fill(
            f"One session, {runs} runs of ~{record / 1024:.1f} KB each as JSON (a user message, "
            "an assistant message with 2 tool calls, 2 tool results of ~2 KB, a final answer).",
            width=100,
        ),
        "",
        "| backend | first use (ms) | append median (ms) | append p95 (ms) | "
        f"load {runs} runs (ms) | bytes/run kept |",
        "|---|---|---|---|---|---|",
        *(result.row() for result in results),
    ]
    notes = [
        "First use: importing SQLAlchemy and alembic (in a worker thread), the engine, and the "
        "schema check. PostgreSQL keeps far fewer bytes because it compresses large text "
        "(TOAST) and the benchmark's tool results are repetitive; real tool output compresses "
        "less. Every tool result appears twice in a record (the tool message and the tool-call "
        "record), so a run of ~4 KB of results takes ~9 KB as JSON.",
    ]
    if note:
        notes.append(note)
    return "\n".join(lines + [""] + [textwrap.fill(n, width=100) for n in notes])


def write_docs(block_body: str) -> None:
    """Replace this benchmark's block of docs/benchmarks.md, reading the file right before."""
    block = f"{START}\n{block_body}\n{END}"
    text = DOCS.read_text()
    if START in text and END in text:
        text = re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: block, text,
                      count=1, flags=re.S)  # fmt: skip
    else:
        what = (
            "What is measured (see `benchmarks/storage.py`): a session of realistic runs "
            "appended one by one (`append_run`: one transaction per run), loaded whole "
            "(`load_session`, all runs decoded), and the space each backend keeps per run. "
            "SQLite and the JSON files fsync every write; PostgreSQL runs with its defaults on "
            "the same machine (loopback TCP)."
        )
        intro = f"## Storage\n\n{textwrap.fill(what, width=100)}\n\n"
        text = text.rstrip("\n") + "\n\n" + intro + block + "\n"
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    reason = why_no_postgres()
    note = f"PostgreSQL skipped: {reason}." if reason else ""
    with tempfile.TemporaryDirectory(prefix="agentica-bench-") as tmp, postgres() as cluster:
        results = asyncio.run(run_all(args.runs, Path(tmp), cluster))
    table = markdown(results, args.runs, note)
    print(table)
    if args.write_docs:
        command = "`uv run python benchmarks/storage.py --write-docs`"
        header = (
            f"Command: {command} · measured {time.strftime('%Y-%m-%d')} on "
            f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
        )
        write_docs(f"{header}\n\n{table}")


if __name__ == "__main__":
    main()
