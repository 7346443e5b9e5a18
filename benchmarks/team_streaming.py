"""Students streaming at once: ``uv run python benchmarks/team_streaming.py [--quick]``.

``--students`` (default 200; ``--quick``: 20) students each create an agent session, open its
event stream (SSE), post one message and read the stream until the run has ended. The agent
calls ``write_file`` and then streams a ~60-word answer; the course's model is the scripted
OpenAI-compatible server (``python -m agentica.testing``, ``--latency`` seconds per request).
The service is ``agentica serve`` on a SQLite file, a process of its own; clients and the
scripted model share the other core. Reported: time from posting a message to the first event
of its run (``run_started``), to the first streamed text and to the run's end (p50/p99), the
wall time for all of them, and the server's CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agentica.messages import AssistantMessage, ToolCall  # noqa: E402
from benchmarks.team_server import cpu_seconds, serve_process  # noqa: E402

ANSWER = " ".join(f"word{n}" for n in range(60))


def respond(body: dict[str, Any]) -> Any:
    """The scripted model: write ``/answer.md``, then answer with ``ANSWER`` (streamed by the
    scripted server one word per chunk)."""
    if body["messages"][-1].get("role") == "tool":
        return ANSWER
    arguments = json.dumps({"path": "/answer.md", "content": "the answer\n"})
    return AssistantMessage(tool_calls=[ToolCall(id="", name="write_file", arguments=arguments)])


@dataclass
class Student:
    token: str
    session_id: str = ""
    posted: float = 0.0
    accepted: float | None = None
    first_event: float | None = None
    first_text: float | None = None
    ended: float | None = None
    events: int = 0
    state: str = ""


@dataclass
class Result:
    students: list[Student] = field(default_factory=list)
    wall: float = 0.0
    server_cpu: float = 0.0


async def _start_upstream(latency: float) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.testing", "--responder",
        "benchmarks.team_streaming:respond", "--latency", str(latency),
        stdout=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
    assert line.startswith("PORT "), line
    return process, f"http://127.0.0.1:{int(line.split()[1])}/v1"


async def _provision(database: str, data_dir: Path, model_url: str, count: int) -> list[str]:
    """A teacher, a course on the scripted model and ``count`` students; their tokens."""
    from agentica_team.principal import Principal
    from agentica_team.service import Team
    from agentica_team.settings import TeamSettings

    team = await Team.open(TeamSettings(database_url=database, data_dir=data_dir))
    try:
        accounts = team.accounts
        teacher = await accounts.create_user("t@school.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        course = await accounts.create_course(owner, "bench")
        await accounts.update_course(
            course.id, actor=teacher.id, model="scripted", model_base_url=model_url
        )
        roster = [(f"s{n:03d}@school.edu", f"S{n}") for n in range(count)]
        students = await accounts.add_students(course, roster, actor=teacher.id)
        return [course.id, *(s.token for s in students)]
    finally:
        await team.aclose()


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    data = ""
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data = line[5:].strip()
        elif not line and data:
            yield json.loads(data)
            data = ""


async def _one(http: aiohttp.ClientSession, student: Student, start: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {student.token}"}
    path = f"/api/sessions/{student.session_id}"
    async with http.get(f"{path}/events", headers=headers) as stream:
        assert stream.status == 200, await stream.text()
        await start.wait()
        student.posted = time.perf_counter()
        async with http.post(f"{path}/messages", json={"text": "go"}, headers=headers) as r:
            assert r.status == 202, await r.text()
        student.accepted = time.perf_counter()
        async for event in _events(stream):
            student.events += 1
            now, data = time.perf_counter(), event["data"]
            if event["kind"] == "status" and data["event"] == "run_started":
                student.first_event = now
            elif data.get("kind") == "text_delta" and student.first_text is None:
                student.first_text = now
            elif event["kind"] == "status" and data["event"] in ("run_ended", "run_interrupted"):
                student.ended, student.state = now, data["state"]
                return


async def run(count: int, latency: float) -> Result:
    result = Result()
    with tempfile.TemporaryDirectory(prefix="team-streaming-") as tmp:
        home = Path(tmp)
        database = f"sqlite:///{home / 'team.db'}"
        upstream, model_url = await _start_upstream(latency)
        try:
            course, *tokens = await asyncio.to_thread(
                asyncio.run, _provision(database, home, model_url, count)
            )
            result.students = [Student(token) for token in tokens]
            async with serve_process(database, home, tokens[0], "/api/me") as (url, pid):
                connector = aiohttp.TCPConnector(limit=0)
                timeout = aiohttp.ClientTimeout(total=600)
                async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as http:
                    for student in result.students:
                        async with http.post(
                            "/api/sessions",
                            json={"course_id": course},
                            headers={"Authorization": f"Bearer {student.token}"},
                        ) as r:
                            student.session_id = (await r.json())["id"]
                    cpu = cpu_seconds(pid)
                    start = asyncio.Event()
                    tasks = [
                        asyncio.create_task(_one(http, student, start))
                        for student in result.students
                    ]
                    await asyncio.sleep(1.0)  # every stream is open
                    began = time.perf_counter()
                    start.set()
                    await asyncio.gather(*tasks)
                    result.wall = time.perf_counter() - began
                    result.server_cpu = cpu_seconds(pid) - cpu
        finally:
            upstream.send_signal(signal.SIGTERM)
            await upstream.wait()
    return result


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(result: Result, latency: float) -> str:
    students = result.students
    rows = []
    for name, attr in (
        ("202 Accepted", "accepted"),
        ("first event of the run (run_started)", "first_event"),
        ("first streamed text", "first_text"),
        ("run ended", "ended"),
    ):
        values = [(getattr(s, attr) - s.posted) * 1000 for s in students if getattr(s, attr)]
        rows.append(
            f"| {name} | {statistics.median(values):.0f} | {_pct(values, 0.99):.0f} | "
            f"{max(values):.0f} |"
        )
    done = sum(1 for s in students if s.state == "done")
    events = sum(s.events for s in students)
    return "\n".join(
        [
            f"{len(students)} students at once, scripted model latency {latency * 1000:.0f} ms "
            "per request (2 model calls and 1 tool call per run)",
            "",
            "| after posting the message | p50 ms | p99 ms | max ms |",
            "|---|---|---|---|",
            *rows,
            "",
            f"runs done: {done}/{len(students)}; wall time {result.wall:.2f} s; "
            f"{events} SSE events ({events / len(students):.0f} per student, text deltas "
            f"coalesced under load); server CPU {result.server_cpu:.2f} s",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="20 students")
    parser.add_argument("--students", type=int, default=None)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    args = parser.parse_args()
    count = args.students or (20 if args.quick else 200)
    result = asyncio.run(run(count, args.latency))
    print(report(result, args.latency))


if __name__ == "__main__":
    main()
