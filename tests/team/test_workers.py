"""Several workers: real ``agentica serve`` processes on one PostgreSQL database and one Redis.

Students talk to any worker; each session's agent runs on exactly one (the holder of its lease),
live events reach subscribers on the other workers, a cancel sent to one worker stops a run on
another, and when a worker is killed (``kill -9``) mid-run the others take its sessions over:
every accepted message ends ``done`` exactly once, the ones the dead worker was running are
resumed once, the others never, and the audit chain verifies.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from agentica.testing import FakeOpenAIServer
from agentica_team.errors import BadRequest, ServiceUnavailable
from agentica_team.service import Team
from agentica_team.settings import TeamSettings
from tests.postgres import Cluster
from tests.redis import RedisServer
from tests.team.test_durability import (
    Server,
    Upstream,
    _clients,
    _log,
    _provision,
    _wait_all_done,
)
from tests.team.test_sessions import ended, new_session, read_events, send

WORKERS = 3


async def _owners(redis_url: str, prefix: str, sessions: list[str]) -> dict[str, int]:
    """The pid of the worker holding each session's lease (sessions nobody holds left out)."""
    async with Redis.from_url(redis_url, decode_responses=True) as redis:
        values = await redis.mget([f"{prefix}:lease:{s}" for s in sessions])
    return {s: int(v.split(":")[1]) for s, v in zip(sessions, values, strict=True) if v}


def _statuses(log: list[dict[str, Any]], event: str) -> list[int]:
    return [e["data"]["message_seq"] for e in log if e["data"].get("event") == event]


@pytest.mark.slow
async def test_workers_share_sessions_and_take_over_a_killed_ones_with_nothing_lost_or_run_twice(
    tmp_path: Path, pg_cluster: Cluster, redis_server: RedisServer
) -> None:
    name = f"workers_{os.getpid()}_{secrets.token_hex(4)}"
    database = await asyncio.to_thread(pg_cluster.create_database, name)
    settings = TeamSettings(database_url=database, data_dir=tmp_path / "data")
    prefix = f"t{secrets.token_hex(4)}"
    redis_url = redis_server.url()
    upstream = Upstream(words=100, interval=0.04)
    async with FakeOpenAIServer(upstream, record=False) as model:
        c = await asyncio.to_thread(asyncio.run, _provision(settings, model.base_url))
        env_prefix = ("--redis-url", redis_url)
        workers = [
            Server(tmp_path, settings, *env_prefix, name=f"worker{n}") for n in range(WORKERS)
        ]
        for worker in workers:
            worker.env["AGENTICA_TEAM_REDIS_PREFIX"] = prefix
        await asyncio.gather(*(worker.start(c.teacher) for worker in workers))
        try:
            await _share_and_fail_over(workers, c, upstream, redis_url, prefix)
        finally:
            for worker in workers:
                if worker.process is not None and worker.process.returncode is None:
                    await worker.kill()
    for worker in workers:
        text = await asyncio.to_thread(worker.log.read_text)
        assert "Traceback" not in text, text


async def _share_and_fail_over(
    workers: list[Server], c: Any, upstream: Upstream, redis_url: str, prefix: str
) -> None:
    clients = [_clients(worker.url, c) for worker in workers]
    opened = [await client.__aenter__() for client in clients]
    try:
        # opened[w][1 + s]: student s's HTTP session with worker w
        def student(s: int, w: int) -> aiohttp.ClientSession:
            return opened[w % WORKERS][1 + s]

        students = len(opened[0]) - 1
        sessions = [
            (s, await new_session(student(s, n), c.course)) for s in range(students) for n in (0, 1)
        ]
        # a live subscriber on worker 2 for each session, before anything is posted
        watchers = [
            asyncio.create_task(read_events(student(s, 2), sid, until=ended(1), timeout=60))
            for s, sid in sessions
        ]
        await asyncio.sleep(0.3)
        accepted: list[tuple[str, int]] = []
        for n, (s, sid) in enumerate(sessions):
            accepted.append((sid, (await send(student(s, n), sid, "write the notes"))["seq"]))
        # every first run is streaming; each session runs on exactly one worker
        for s, sid in sessions:
            await read_events(
                student(s, 1), sid, until=lambda e: e["data"].get("kind") == "text_delta"
            )
        owners = await _owners(redis_url, prefix, [sid for _, sid in sessions])
        assert set(owners) == {sid for _, sid in sessions}
        pids = {w.process.pid: w for w in workers if w.process is not None}
        assert set(owners.values()) <= set(pids)
        counts = {pid: list(owners.values()).count(pid) for pid in pids}
        victim = pids[max(counts, key=lambda pid: counts[pid])]
        survivors = [w for w in workers if w is not victim]
        on_victim = {sid for sid, pid in owners.items() if pid == victim.process.pid}  # type: ignore[union-attr]
        assert on_victim

        # a cancel sent to one survivor stops a run on the other
        survivors.sort(key=lambda w: counts[w.process.pid])  # type: ignore[union-attr]
        owner = survivors[1].process.pid  # type: ignore[union-attr]
        assert counts[owner], "the sessions were not spread over the workers"
        cancelled = next((s, sid) for s, sid in sessions if owners[sid] == owner)
        async with student(cancelled[0], workers.index(survivors[0])).post(
            f"/api/sessions/{cancelled[1]}/cancel", json={}
        ) as r:
            assert r.status == 202, await r.text()

        # more messages through the survivors while the victim dies
        for n, (s, sid) in enumerate(sessions):
            through = student(s, workers.index(survivors[n % 2]))
            accepted.append((sid, (await send(through, sid, f"also note {n}"))["seq"]))
        await victim.kill()
        upstream.slow = False
        for watcher in watchers:  # the live subscribers on worker 2 saw each first run end
            if workers[2] is victim:
                watcher.cancel()
            else:
                events = await watcher
                assert ended(1)(events[-1])

        for s, sid in sessions:
            http = student(s, workers.index(survivors[0]))
            messages = await _wait_all_done(http, sid)
            assert {(sid, m["seq"]) for m in messages} >= {a for a in accepted if a[0] == sid}
            log = await _log(http, sid)
            runs = _statuses(log, "run_ended")
            assert sorted(runs) == sorted(set(runs)), f"a message ran twice: {runs}"
            resumed = _statuses(log, "resumed")
            if sid == cancelled[1]:
                assert messages[0]["state"] == "interrupted"
                assert all(m["state"] == "done" for m in messages[1:])
                continue
            assert all(m["state"] == "done" for m in messages), messages
            assert resumed == ([1] if sid in on_victim else []), (sid, resumed)
            assert runs == [m["seq"] for m in messages]

        teacher = opened[workers.index(survivors[1])][0]
        async with teacher.get(f"/api/courses/{c.course}/audit/verify") as r:
            assert all(chain["ok"] for chain in await r.json())
        async with teacher.get(
            f"/api/courses/{c.course}/audit", params={"kind": "run_resumed", "limit": 100}
        ) as r:
            assert {a["data"]["session_id"] for a in await r.json()} == on_victim - {cancelled[1]}
    finally:
        for client in clients:
            await client.__aexit__(None, None, None)
        for survivor in workers:
            if survivor.process is not None and survivor.process.returncode is None:
                await survivor.stop()


async def test_several_workers_need_postgresql_and_a_reachable_redis(tmp_path: Path) -> None:
    on_sqlite = TeamSettings(
        database_url=f"sqlite:///{tmp_path / 'team.db'}",
        data_dir=tmp_path,
        redis_url="redis://127.0.0.1:1/0",
    )
    with pytest.raises(BadRequest, match="PostgreSQL"):
        await Team.open(on_sqlite)


async def test_an_unreachable_redis_is_a_clear_error(tmp_path: Path, pg_cluster: Cluster) -> None:
    name = f"noredis_{os.getpid()}_{secrets.token_hex(4)}"
    database = await asyncio.to_thread(pg_cluster.create_database, name)
    settings = TeamSettings(
        database_url=database, data_dir=tmp_path, redis_url="redis://:hunter2@127.0.0.1:1/0"
    )
    with pytest.raises(ServiceUnavailable, match="cannot reach Redis") as caught:
        await Team.open(settings)
    assert "hunter2" not in str(caught.value)
