"""Failover: ``uv run python benchmarks/team_failover.py [--quick]``.

Three ``agentica serve`` workers (real processes) on one PostgreSQL database and one Redis, both
started here, with the course's model a scripted server in this process that streams each run's
answer slowly. Twelve students' sessions are mid-run when the worker running the most of them is
killed (``kill -9``). Measured, for each of its sessions: the time from the kill to the
``resumed`` event another worker writes when it takes the session over, and to that run's end;
for two lease lengths (``lease_seconds``, the setting; ``--quick``: the default only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from redis.asyncio import Redis  # noqa: E402

from agentica.testing import FakeOpenAIServer  # noqa: E402
from agentica_team.principal import Principal  # noqa: E402
from agentica_team.service import Team  # noqa: E402
from agentica_team.settings import TeamSettings  # noqa: E402
from tests.postgres import throwaway_cluster, why_no_postgres  # noqa: E402
from tests.redis import throwaway_redis, why_no_redis  # noqa: E402
from tests.team.test_durability import Server, Upstream, _clients, _log  # noqa: E402
from tests.team.test_sessions import new_session, read_events, send  # noqa: E402

SESSIONS = 12


async def _provision(settings: TeamSettings, model_url: str) -> tuple[str, str, list[str]]:
    team = await Team.open(settings)
    try:
        accounts = team.accounts
        teacher = await accounts.create_user("t@school.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        course = await accounts.create_course(owner, "failover")
        await accounts.update_course(
            course.id, actor=teacher.id, model="fake-tutor", model_base_url=model_url
        )
        roster = [(f"s{n}@school.edu", f"S{n}") for n in range(SESSIONS)]
        students = await accounts.add_students(course, roster, actor=teacher.id)
        token = (await accounts.issue_token(teacher.id)).token
        return course.id, token, [s.token for s in students]
    finally:
        await team.aclose()


class _Class:
    def __init__(self, course: str, teacher: str, students: list[str]) -> None:
        self.course, self.teacher, self.students = course, teacher, students


async def trial(pg: Any, redis_url: str, lease: float, number: int) -> list[tuple[float, float]]:
    """One kill: for each of the victim's sessions, seconds from the kill to ``resumed`` and
    to the resumed run's end."""
    database = await asyncio.to_thread(pg.create_database, f"failover_{os.getpid()}_{number}")
    upstream = Upstream(words=200, interval=0.04)
    with tempfile.TemporaryDirectory(prefix="team-failover-") as tmp:
        home = Path(tmp)
        settings = TeamSettings(database_url=database, data_dir=home / "data")
        async with FakeOpenAIServer(upstream, record=False) as model:
            course, teacher, tokens = await asyncio.to_thread(
                asyncio.run, _provision(settings, model.base_url)
            )
            c = _Class(course, teacher, tokens)
            prefix = f"bench{number}"
            workers = [Server(home, settings, "--redis-url", redis_url, name=f"w{n}")
                       for n in range(3)]  # fmt: skip
            for worker in workers:
                worker.env |= {"AGENTICA_TEAM_REDIS_PREFIX": prefix,
                               "AGENTICA_TEAM_LEASE_SECONDS": str(lease)}  # fmt: skip
            await asyncio.gather(*(w.start(c.teacher) for w in workers))
            try:
                return await _kill_one(workers, c, upstream, redis_url, prefix)
            finally:
                for worker in workers:
                    if worker.process is not None and worker.process.returncode is None:
                        await worker.kill()


async def _kill_one(
    workers: list[Server], c: _Class, upstream: Upstream, redis_url: str, prefix: str
) -> list[tuple[float, float]]:
    async with _clients(workers[0].url, c) as (_, *students):
        sessions = [await new_session(http, c.course) for http in students]
        for http, sid in zip(students, sessions, strict=True):
            await send(http, sid, "write the notes")
        for http, sid in zip(students, sessions, strict=True):
            await read_events(http, sid, until=lambda e: e["data"].get("kind") == "text_delta")
        async with Redis.from_url(redis_url, decode_responses=True) as redis:
            values = await redis.mget([f"{prefix}:lease:{s}" for s in sessions])
        pids = [int(v.split(":")[1]) for v in values]
        victim_pid = max(set(pids), key=pids.count)
        victim = next(w for w in workers if w.process is not None and w.process.pid == victim_pid)
        survivor = next(w for w in workers if w is not victim)
        moved = [(http, sid) for http, sid, pid in zip(students, sessions, pids, strict=True)
                 if pid == victim_pid]  # fmt: skip
        upstream.slow = False
        killed = time.perf_counter()
        await victim.kill()
    async with _clients(survivor.url, c) as (_, *students):
        by_session = dict(zip(sessions, students, strict=True))
        seen: dict[str, list[float]] = {}
        while len(seen) < len(moved) or any(len(v) < 2 for v in seen.values()):
            for _, sid in moved:
                log = await _log(by_session[sid], sid)
                marks = seen.setdefault(sid, [])
                if not marks and any(e["data"].get("event") == "resumed" for e in log):
                    marks.append(time.perf_counter() - killed)
                if len(marks) == 1 and any(
                    e["data"].get("event") == "run_ended" and e["data"].get("message_seq") == 1
                    for e in log
                ):
                    marks.append(time.perf_counter() - killed)
            if time.perf_counter() - killed > 120:
                raise AssertionError("the sessions were not taken over within 120 s")
            await asyncio.sleep(0.05)
    return [(v[0], v[1]) for v in seen.values()]


async def measure(leases: list[float]) -> None:
    print("3 workers (processes) on PostgreSQL + Redis, 12 sessions mid-run, the busiest "
          "worker killed with SIGKILL; seconds from the kill (polled every 50 ms):\n")  # fmt: skip
    print(
        "| lease_seconds | sessions moved | to `resumed` p50 / max | to the run's end p50 / max |"
    )
    print("|---|---|---|---|")
    with throwaway_cluster() as pg, throwaway_redis() as redis:
        for number, lease in enumerate(leases):
            marks = await trial(pg, redis.url(), lease, number)
            resumed = [m[0] for m in marks]
            finished = [m[1] for m in marks]
            print(f"| {lease:g} | {len(marks)} | {statistics.median(resumed):.2f} / "
                  f"{max(resumed):.2f} | {statistics.median(finished):.2f} / "
                  f"{max(finished):.2f} |", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the default lease only")
    args = parser.parse_args()
    missing = why_no_postgres() or why_no_redis()
    if missing:
        print(f"skipped: {missing}")
        return
    asyncio.run(measure([3.0] if args.quick else [3.0, 1.0]))


if __name__ == "__main__":
    main()
