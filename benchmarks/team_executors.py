"""Executors: ``uv run python benchmarks/team_executors.py [--quick]``.

The team service (SQLite) and ``--executors`` students' executors (default 500; ``--quick``:
100), each an ``agentica connect`` client with a workspace of its own, all in this process on
one event loop (the machine has 2 cores; a class's executors would be on their own computers).
Measured: the time to connect them all; then operations sent from the server through them,
50 at a time, spread over all executors: ``command.start`` of ``echo`` until its ``Exited``
(commands without the sandbox, to measure the path rather than bubblewrap's start-up), and
``files.read`` of a small file. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.testing import FakeOpenAIServer  # noqa: E402
from agentica_team.connect import Executor  # noqa: E402
from agentica_team.executors import Connection, RemoteCommands, RemoteFiles  # noqa: E402
from agentica_team.principal import Principal  # noqa: E402
from tests.team.server import serve_team, sqlite_settings  # noqa: E402


async def _students(team: object, count: int) -> list[tuple[str, str]]:
    """A course with ``count`` students: their (user id, token)."""
    accounts = team.accounts  # type: ignore[attr-defined]
    teacher = await accounts.create_user("t@school.edu", role="teacher")
    owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
    course = await accounts.create_course(owner, "bench")
    roster = [(f"s{i}@school.edu", f"S{i}") for i in range(count)]
    added = await accounts.add_students(course, roster, actor=teacher.id)
    return [(a.user.id, a.token) for a in added]


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if q == 0.5:
        return statistics.median(ordered) * 1000
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def _load(
    operations: int, work: Callable[[int], Awaitable[None]], concurrency: int = 50
) -> tuple[float, list[float]]:
    """Run ``work(i)`` for each i, ``concurrency`` at a time: operations/s and latencies."""
    latencies: list[float] = []
    queue = iter(range(operations))

    async def worker() -> None:
        for i in queue:
            started = time.perf_counter()
            await work(i)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return operations / (time.perf_counter() - started), latencies


async def measure(count: int, operations: int) -> None:
    with tempfile.TemporaryDirectory(prefix="team-executors-") as tmp:
        home = Path(tmp)
        async with (
            FakeOpenAIServer(lambda body: "ok") as _model,
            serve_team(sqlite_settings(home / "server")) as (url, team),
        ):
            students = await _students(team, count)
            executors = []
            for i, (_, token) in enumerate(students):
                workspace = home / "ws" / str(i)
                workspace.mkdir(parents=True)
                (workspace / "notes.txt").write_text("a small file\n" * 20)
                executors.append(Executor(url, token, workspace, name=f"pc{i}", sandbox=False,
                                          on_status=lambda _: None))  # fmt: skip
            started = time.perf_counter()
            tasks = [asyncio.create_task(e.run()) for e in executors]
            while sum(len(team.executors.of(uid)) for uid, _ in students) < count:  # noqa: ASYNC110 (the registry has no event)
                await asyncio.sleep(0.05)
            connect_s = time.perf_counter() - started
            connections: list[Connection] = [
                c for uid, _ in students if (c := team.executors.pick(uid)) is not None
            ]

            async def command(i: int) -> None:
                handle = await RemoteCommands(connections[i % count]).start("echo hi")
                result = await handle.wait(60)
                assert result is not None, "no end within 60 s"
                assert result.exit_code == 0, result

            async def read(i: int) -> None:
                text = await RemoteFiles(connections[i % count]).read("/notes.txt")
                assert text.startswith("a small file")

            rows = []
            for name, work in (("command (echo, start to exit)", command),
                               ("files.read (240 bytes)", read)):  # fmt: skip
                await _load(100, work)  # warm up
                rate, latencies = await _load(operations, work)
                rows.append((name, rate, _ms(latencies, 0.5), _ms(latencies, 0.99)))
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    print(f"{count} executors connected in {connect_s:.1f} s "
          f"({count / connect_s:.0f}/s, one process, one event loop)\n")  # fmt: skip
    print(f"Operations through the executors, {operations} of each, 50 at a time:\n")
    print("| operation | per second | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    for name, rate, p50, p99 in rows:
        print(f"| {name} | {rate:,.0f} | {p50:.1f} | {p99:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 executors, 500 operations")
    parser.add_argument("--executors", type=int, default=0)
    args = parser.parse_args()
    count = args.executors or (100 if args.quick else 500)
    asyncio.run(measure(count, 500 if args.quick else 2000))


if __name__ == "__main__":
    main()
