"""Durability: ``kill -9`` of the server while agents stream and students post messages.

The service runs as a subprocess (``agentica serve``) on a SQLite file; the course's model is a
scripted server in the test process that streams its first answers slowly. Several students'
runs are mid-stream and more messages are being posted when the server is killed. After a
restart every message that got its 202 and every audit record the server had shown is there,
the audit chain verifies, the runs that were running are marked interrupted (not rerun), and
continuing them completes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentica.models.openai_wire import chunk_body
from agentica.testing import FakeOpenAIServer, call, tool_calls
from agentica.testing._server import RawStream, ServerReply
from agentica_team.principal import Principal
from agentica_team.service import Team
from agentica_team.settings import TeamSettings
from tests.team.test_sessions import ended, new_session, read_events, send

STUDENTS = 4


class Upstream:
    """The course's model: while ``slow``, an agent's first call gets a long answer trickled
    out (``words`` words, one every ``interval`` seconds: 20 s by default); otherwise it writes
    ``/notes.md`` and then answers at once."""

    def __init__(self, words: int = 400, interval: float = 0.05) -> None:
        self.slow = True
        self.words = words
        self.interval = interval
        self.ids = itertools.count()

    def __call__(self, body: dict[str, Any]) -> ServerReply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return "Done: /notes.md is written."
        if self.slow and body.get("stream"):
            return RawStream(self._trickle(str(body.get("model", "fake"))), interval=self.interval)
        return tool_calls(call("write_file", path="/notes.md", content="notes"))

    def _trickle(self, model: str) -> Iterator[bytes]:
        rid = f"chatcmpl-slow-{next(self.ids)}"
        yield chunk_body(response_id=rid, model=model, delta={"role": "assistant", "content": ""})
        for n in range(self.words):
            yield chunk_body(response_id=rid, model=model, delta={"content": f"word{n} "})
        yield chunk_body(response_id=rid, model=model, delta={}, finish_reason="stop")
        yield b"data: [DONE]\n\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Class:
    course: str
    teacher: str
    students: list[str]


async def _provision(settings: TeamSettings, model_url: str) -> Class:
    """A teacher, a course on ``model_url`` and the students, with tokens (run in a thread of
    its own: opening a new database migrates it, which takes a while)."""
    team = await Team.open(settings)
    try:
        accounts = team.accounts
        teacher = await accounts.create_user("t@school.edu", role="teacher")
        owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
        course = await accounts.create_course(owner, "web-2026")
        await accounts.update_course(
            course.id, actor=teacher.id, model="fake-tutor", model_base_url=model_url
        )
        roster = [(f"s{n}@school.edu", f"S{n}") for n in range(STUDENTS)]
        students = await accounts.add_students(course, roster, actor=teacher.id)
        token = (await accounts.issue_token(teacher.id)).token
        return Class(course.id, token, [s.token for s in students])
    finally:
        await team.aclose()


class Server:
    """``agentica serve`` as a subprocess on ``settings``' database."""

    def __init__(
        self, tmp_path: Path, settings: TeamSettings, *extra: str, name: str = "server"
    ) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.settings = settings
        self.extra = extra
        self.log = tmp_path / f"{name}.log"
        self.env = {**os.environ, "AGENTICA_HOME": str(tmp_path / "home"),
                    "AGENTICA_TEAM_DATA_DIR": str(settings.data_dir)}  # fmt: skip
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, token: str) -> None:
        command = [sys.executable, "-m", "agentica.cli.main", "serve", "--host", "127.0.0.1",
                   "--port", str(self.port), "--database-url", self.settings.database,
                   *self.extra]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                *command, stdout=log, stderr=log, env=self.env
            )
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
            while time.monotonic() < deadline:
                assert self.process.returncode is None, self.log.read_text()
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{self.url}/api/me") as r:
                        if r.status == 200:
                            return
                await asyncio.sleep(0.1)
        raise AssertionError(f"the server did not start: {self.log.read_text()}")

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await self.process.wait()
        return self.process.returncode or 0


@contextlib.asynccontextmanager
async def _clients(url: str, c: Class) -> AsyncIterator[tuple[aiohttp.ClientSession, ...]]:
    sessions = [
        aiohttp.ClientSession(base_url=url, headers={"Authorization": f"Bearer {token}"})
        for token in (c.teacher, *c.students)
    ]
    try:
        yield tuple(sessions)
    finally:
        for session in sessions:
            await session.close()


async def _keep_posting(
    http: aiohttp.ClientSession, session_id: str, accepted: list[tuple[str, int, str]]
) -> None:
    """Post messages one after another until the server goes away; keep the accepted ones."""
    for n in itertools.count():
        text = f"also take note {n}"
        try:
            async with http.post(f"/api/sessions/{session_id}/messages", json={"text": text}) as r:
                if r.status == 429:  # the session's queue is full
                    await asyncio.sleep(0.05)
                    continue
                if r.status == 202:
                    accepted.append((session_id, (await r.json())["seq"], text))
        except (aiohttp.ClientError, ConnectionError):
            return


async def _wait_all_done(http: aiohttp.ClientSession, session_id: str) -> list[dict[str, Any]]:
    async with asyncio.timeout(60):
        while True:
            async with http.get(f"/api/sessions/{session_id}/messages") as r:
                messages: list[dict[str, Any]] = await r.json()
            if all(m["state"] in ("done", "failed", "interrupted") for m in messages):
                return messages
            await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_kill_9_while_streaming_loses_no_accepted_message_or_audit_record(
    tmp_path: Path,
) -> None:
    upstream = Upstream()
    settings = TeamSettings(
        database_url=f"sqlite:///{tmp_path / 'team.db'}", data_dir=tmp_path / "data"
    )
    async with FakeOpenAIServer(upstream, record=False) as model:
        c = await asyncio.to_thread(asyncio.run, _provision(settings, model.base_url))
        server = Server(tmp_path, settings)
        await server.start(c.teacher)
        try:
            async with _clients(server.url, c) as (teacher, *students):
                accepted: list[tuple[str, int, str]] = []
                sessions = [await new_session(http, c.course) for http in students]
                for http, session_id in zip(students, sessions, strict=True):
                    message = await send(http, session_id, "write the notes")
                    accepted.append((session_id, message["seq"], "write the notes"))
                # every first run is streaming its slow answer
                for http, session_id in zip(students, sessions, strict=True):
                    events = await read_events(
                        http, session_id, until=lambda e: e["data"].get("kind") == "text_delta"
                    )
                    assert not any(ended(1)(e) for e in events)
                posters = [
                    asyncio.create_task(_keep_posting(http, session_id, accepted))
                    for http, session_id in zip(students, sessions, strict=True)
                ]
                await asyncio.sleep(0.5)
                async with teacher.get(
                    f"/api/courses/{c.course}/audit", params={"limit": 1000}
                ) as r:
                    assert r.status == 200, await r.text()
                    records = await r.json()
                audited = {(a["seq"], a["hash"]) for a in records}
                kinds = {a["kind"] for a in records}
                assert {"session_created", "instruction"} <= kinds
                await asyncio.sleep(0.2)
                await server.kill()
                await asyncio.gather(*posters)
        finally:
            if server.process is not None and server.process.returncode is None:
                await server.kill()

        upstream.slow = False
        restarted = Server(tmp_path, settings)
        await restarted.start(c.teacher)
        try:
            async with _clients(restarted.url, c) as (teacher, *students):
                async with teacher.get(
                    f"/api/courses/{c.course}/audit", params={"limit": 1000}
                ) as r:
                    after = {(a["seq"], a["hash"]) for a in await r.json()}
                assert audited <= after, "audit records written before the kill are missing"
                async with teacher.get(f"/api/courses/{c.course}/audit/verify") as r:
                    assert all(chain["ok"] for chain in await r.json())

                for http, session_id in zip(students, sessions, strict=True):
                    messages = await _wait_all_done(http, session_id)
                    stored = {(session_id, m["seq"], m["text"]) for m in messages}
                    mine = {a for a in accepted if a[0] == session_id}
                    assert mine <= stored, "an accepted message was lost"
                    first = messages[0]
                    assert first["seq"] == 1 and first["state"] == "interrupted"
                    assert all(m["state"] == "done" for m in messages[1:])  # resumed
                    log = await _log(http, session_id)
                    marks = [e for e in log if e["data"].get("event") == "run_interrupted"]
                    assert [m["data"]["message_seq"] for m in marks] == [1]

                    async with http.post(f"/api/sessions/{session_id}/continue", json={}) as r:
                        assert r.status == 202, await r.text()
                    messages = await _wait_all_done(http, session_id)
                    assert messages[0]["state"] == "done" and messages[0]["continued"] == 1
                    async with http.get(f"/api/sessions/{session_id}/files/notes.md") as r:
                        assert r.status == 200
            # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught
            assert await restarted.stop() in (0, -signal.SIGTERM)
            assert "Traceback" not in restarted.log.read_text()
        finally:
            if restarted.process is not None and restarted.process.returncode is None:
                await restarted.kill()
    assert len(accepted) > STUDENTS, "no message was posted while the runs streamed"


async def _log(http: aiohttp.ClientSession, session_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while True:
        params = {"after": events[-1]["seq"] if events else 0, "limit": 500}
        async with http.get(f"/api/sessions/{session_id}/events/log", params=params) as r:
            page = await r.json()
        events += page
        if len(page) < 500:
            return events
