"""Event to reaction: ``uv run python benchmarks/team_reaction.py [--quick]``.

The team service (one process) with 500 students' executors connected (``agentica
connect`` clients in this process, without the sandbox) and 200 students each working in a
session whose agent runs on the student's executor (``--quick``: 100 executors, 50 agents).
Each student sends messages one after another with a pause (think time) between them; the
course's model is a scripted server in this process that answers at once. Measured: from
sending the message (``POST .../messages``) to the agent's reaction, its model request
reaching the model (the message is stored, the session's loop woken, its agent built on the
student's executor and its conversation loaded), p50 and p99; and the events handled per second.
On SQLite and (when installed) PostgreSQL, for both runtimes that react to a message with a
model call: ``serial`` (the agent's run) and ``lanes`` (the router's call). Prints a markdown
table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.testing import FakeOpenAIServer  # noqa: E402
from agentica_team.connect import Executor  # noqa: E402
from agentica_team.principal import Principal  # noqa: E402
from agentica_team.settings import TeamSettings  # noqa: E402
from tests.postgres import throwaway_cluster, why_no_postgres  # noqa: E402
from tests.team.server import serve_team, sqlite_settings  # noqa: E402


class Model:
    """The scripted model: answers at once and notes when each message first reached it."""

    def __init__(self) -> None:
        self.arrived: dict[str, asyncio.Future[float]] = {}

    def expect(self, text: str) -> asyncio.Future[float]:
        future = self.arrived[text] = asyncio.get_running_loop().create_future()
        return future

    def __call__(self, body: dict[str, Any]) -> Any:
        now = time.perf_counter()
        for message in body.get("messages", []):
            content = message.get("content")
            text = content if isinstance(content, str) else str(content)
            for key in [k for k in self.arrived if k in text]:
                future = self.arrived.pop(key)
                if not future.done():
                    future.set_result(now)
        system = str(body.get("messages", [{}])[0].get("content", ""))
        if "route a student's messages" in system:  # the lanes runtime's router answers itself
            return json.dumps({"to": "answer", "lane": "", "intent": "", "answer": "ok"})
        return "ok"


async def _class(team: Any, model_url: str, count: int) -> tuple[str, list[tuple[str, str]]]:
    accounts = team.accounts
    teacher = await accounts.create_user("t@school.edu", role="teacher")
    owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
    course = await accounts.create_course(owner, "bench")
    await accounts.update_course(
        course.id, actor=teacher.id, model="fake-tutor", model_base_url=model_url
    )
    roster = [(f"s{i}@school.edu", f"S{i}") for i in range(count)]
    added = await accounts.add_students(course, roster, actor=teacher.id)
    return course.id, [(a.user.id, a.token) for a in added]


async def measure(
    runtime: str, executors: int, agents: int, rounds: int, database: str = ""
) -> tuple[float, ...]:
    model = Model()
    with tempfile.TemporaryDirectory(prefix="team-reaction-") as tmp:
        home = Path(tmp)
        if database:
            settings = TeamSettings(database_url=database, data_dir=home, agent_runtime=runtime)
        else:
            settings = sqlite_settings(home / "server", agent_runtime=runtime)
        async with (
            FakeOpenAIServer(model, record=False) as upstream,
            serve_team(settings) as (url, team),
        ):
            course, students = await _class(team, upstream.base_url, executors)
            clients = []
            for i, (_, token) in enumerate(students):
                workspace = home / "ws" / str(i)
                workspace.mkdir(parents=True)
                clients.append(Executor(url, token, workspace, name=f"pc{i}", sandbox=False,
                                        on_status=lambda _: None))  # fmt: skip
            tasks = [asyncio.create_task(c.run()) for c in clients]
            while sum(len(team.executors.of(uid)) for uid, _ in students) < executors:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            latencies: list[float] = []
            async with aiohttp.ClientSession(base_url=url) as http:

                async def student(n: int, token: str) -> None:
                    headers = {"Authorization": f"Bearer {token}"}
                    async with http.post("/api/sessions", json={"course_id": course},
                                         headers=headers) as r:  # fmt: skip
                        session_id = (await r.json())["id"]
                    await asyncio.sleep(random.uniform(0, 2.0))
                    for k in range(rounds):
                        text = f"event {n}-{k} please"
                        arrived = model.expect(text)
                        started = time.perf_counter()
                        path = f"/api/sessions/{session_id}/messages"
                        async with http.post(path, json={"text": text}, headers=headers) as r:
                            assert r.status == 202, await r.text()
                        latencies.append(await asyncio.wait_for(arrived, 60) - started)
                        await asyncio.sleep(random.uniform(1.0, 3.0))  # thinking

                began = time.perf_counter()
                await asyncio.gather(
                    *(student(n, token) for n, (_, token) in enumerate(students[:agents]))
                )
                elapsed = time.perf_counter() - began
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (len(latencies) / elapsed, statistics.median(ordered) * 1000, p99 * 1000,
            len(latencies))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 executors, 50 agents")
    args = parser.parse_args()
    executors, agents, rounds = (100, 50, 3) if args.quick else (500, 200, 5)
    print(f"{executors} executors connected, {agents} students each sending {rounds} messages "
          "1-3 s apart (one process):\n")  # fmt: skip
    print("| database | runtime | events | events/s | reaction p50 ms | reaction p99 ms |")
    print("|---|---|---|---|---|---|")
    with contextlib.ExitStack() as stack:
        databases = [("SQLite", lambda: "")]
        if why_no_postgres() is None:
            pg = stack.enter_context(throwaway_cluster())
            names = (f"reaction_{n}" for n in itertools.count())
            databases.append(("PostgreSQL", lambda: pg.create_database(next(names))))
        for name, database in databases:
            for runtime in ("serial", "lanes"):
                rate, p50, p99, count = asyncio.run(
                    measure(runtime, executors, agents, rounds, database())
                )
                print(f"| {name} | {runtime} | {count} | {rate:.1f} | {p50:.1f} | {p99:.1f} |",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
