"""Agent sessions on the server, over real HTTP: a student's message runs the agent in the
background, its events stream as SSE, files land in the session's workspace, sessions survive a
restart of the service, and each role sees exactly the sessions it should.

The course's model is a scripted OpenAI-compatible server on loopback (``FakeOpenAIServer``).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agentica.errors import StorageError
from agentica.messages import AssistantMessage
from agentica.testing import FakeOpenAIServer, HTTPFault, call, tool_calls
from agentica_team.principal import Principal
from agentica_team.service import Team
from agentica_team.sessions import AuditNote, NewEvent
from agentica_team.settings import TeamSettings
from agentica_team.supervisor import CancelRequested, OperationCancelRequested
from tests.postgres import Cluster
from tests.team.server import client, serve_team, sqlite_settings
from tests.team.server import message_text as _text

HELLO = "print('hello')\n"


def tutor(body: dict[str, Any]) -> AssistantMessage | str:
    """The scripted course model: writes /hello.py when asked to, then answers; says whether
    it sees the earlier conversation when asked to remember."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return "I wrote /hello.py: it prints hello."
    asked = _text(last)
    if "remember" in asked:
        earlier = " ".join(_text(m) for m in messages[:-1])
        return "remembered: " + ("yes" if "/hello.py" in earlier else "no")
    if "hello" in asked:
        return tool_calls(call("write_file", path="/hello.py", content=HELLO))
    return "ok"


@dataclass
class Class:
    course: str
    ann: str
    ann_id: str
    bob: str
    teacher: str
    other_teacher: str


async def _principal(team: Team, user_id: str) -> Principal:
    user = await team.accounts.get_user(user_id)
    return Principal(user.id, user.email, user.name, user.role, "token")


async def make_class(team: Team, model_url: str) -> Class:
    """A teacher with a course on the scripted model, two students, and a teacher of another
    course; personal tokens for each."""
    accounts = team.accounts
    teacher = await accounts.create_user("t@school.edu", role="teacher")
    other = await accounts.create_user("o@school.edu", role="teacher")
    course = await accounts.create_course(await _principal(team, teacher.id), "web-2026")
    await accounts.update_course(
        course.id, actor=teacher.id, model="fake-tutor", model_base_url=model_url
    )
    await accounts.create_course(await _principal(team, other.id), "art-2026")
    ann, bob = await accounts.add_students(
        course, [("ann@school.edu", "Ann"), ("bob@school.edu", "Bob")], actor=teacher.id
    )
    return Class(
        course=course.id,
        ann=ann.token,
        ann_id=ann.user.id,
        bob=bob.token,
        teacher=(await accounts.issue_token(teacher.id)).token,
        other_teacher=(await accounts.issue_token(other.id)).token,
    )


async def read_events(
    http: aiohttp.ClientSession,
    session_id: str,
    *,
    until: Any = None,
    after: int = 0,
    timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """SSE events of the session (parsed ``data`` with ``id`` checked) until ``until(event)``."""
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        async with http.get(f"/api/sessions/{session_id}/events", params={"after": after}) as r:
            assert r.status == 200, await r.text()
            assert r.headers["content-type"].startswith("text/event-stream")
            async for event in sse(r.content):
                events.append(event)
                if until is not None and until(event):
                    break
    return events


async def sse(stream: aiohttp.StreamReader) -> AsyncIterator[dict[str, Any]]:
    """Parse a text/event-stream: each event's JSON data, with its ``id`` field as ``_id``."""
    fields: dict[str, str] = {}
    async for raw in stream:
        line = raw.decode().rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
            continue
        if "data" in fields:
            event = json.loads(fields["data"])
            event["_id"] = fields.get("id")
            yield event
        fields = {}


def ended(seq: int) -> Any:
    def check(event: dict[str, Any]) -> bool:
        data = event["data"]
        return (
            event["kind"] == "status"
            and data.get("message_seq") == seq
            and (data["event"] in ("run_ended", "run_interrupted"))
        )

    return check


async def send(http: aiohttp.ClientSession, session_id: str, text: str) -> dict[str, Any]:
    async with http.post(f"/api/sessions/{session_id}/messages", json={"text": text}) as r:
        assert r.status == 202, await r.text()
        body: dict[str, Any] = await r.json()
    return body


async def new_session(http: aiohttp.ClientSession, course: str, title: str = "") -> str:
    async with http.post("/api/sessions", json={"course_id": course, "title": title}) as r:
        assert r.status == 201, await r.text()
        return str((await r.json())["id"])


@pytest.fixture(scope="module", autouse=True)
def _warm_up(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Pay the process's one-time costs (imports, the first migration, FastAPI building its
    routes on the first request: ~0.5 s on the event loop) before the tests' loops are
    watched for blocking calls."""

    async def warm_up() -> None:
        scratch = tmp_path_factory.mktemp("warm-up")
        async with FakeOpenAIServer(tutor) as model, serve_team(_settings(scratch)) as (url, team):
            c = await make_class(team, model.base_url)
            async with client(url, c.ann) as ann:
                session_id = await new_session(ann, c.course)
                message = await send(ann, session_id, "write a hello program")
                await read_events(ann, session_id, until=ended(message["seq"]))

    asyncio.run(warm_up())


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(tutor) as server:
        yield server


def _settings(tmp_path: Path) -> TeamSettings:
    return sqlite_settings(tmp_path)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> TeamSettings:
    """Settings on a new SQLite file, or on a new database of the throw-away PostgreSQL
    cluster (skipped when PostgreSQL is not installed)."""
    if request.param == "sqlite":
        return _settings(tmp_path)
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    url = cluster.create_database(f"sessions_{os.getpid()}_{random.randrange(10**9)}")
    return TeamSettings(database_url=url, data_dir=tmp_path)


async def test_a_student_runs_the_agent_streams_its_events_and_keeps_the_session(
    database: TeamSettings, model: FakeOpenAIServer
) -> None:
    settings = database
    async with serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "write a hello program")
            assert message["state"] == "pending" and message["seq"] == 1
            events = await read_events(ann, session_id, until=ended(message["seq"]))

            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert all(e["_id"] == str(e["seq"]) for e in events)
            kinds = [e["data"].get("kind") or e["data"].get("event") for e in events]
            assert kinds[0] is None and events[0]["kind"] == "message"
            assert "run_started" in kinds and "run_completed" in kinds
            started = next(
                e["data"] for e in events if e["data"].get("kind") == "tool_call_started"
            )
            assert started["name"] == "write_file" and "/hello.py" in started["arguments"]
            done = next(e["data"] for e in events if e["data"].get("kind") == "tool_call_completed")
            assert done["status"] == "success"
            text = "".join(
                e["data"]["text"] for e in events if e["data"].get("kind") == "text_delta"
            )
            assert text == "I wrote /hello.py: it prints hello."
            assert events[-1]["data"]["state"] == "done"

            async with ann.get(f"/api/sessions/{session_id}/files") as r:
                assert [f["path"] for f in await r.json()] == ["/hello.py"]
            async with ann.get(f"/api/sessions/{session_id}/files/hello.py") as r:
                assert (await r.json())["content"] == HELLO
            async with ann.get(f"/api/sessions/{session_id}/files/nothing.py") as r:
                assert r.status == 404
            async with ann.get(f"/api/sessions/{session_id}/messages") as r:
                assert [(m["seq"], m["state"]) for m in await r.json()] == [(1, "done")]
            async with ann.get(f"/api/sessions/{session_id}") as r:
                body = await r.json()
                assert body["title"] == "write a hello program" and not body["active"]
            last = events[-1]["seq"]

        kinds = [r.kind for r in await team.audit.search(course_id=c.course, limit=1000)]
        for kind in ("session_created", "instruction", "tool_call", "tool_result", "model_call"):
            assert kind in kinds, kinds

    # a new service on the same database: the history, the files and the conversation are there
    async with serve_team(settings) as (url, team), client(url, c.ann) as ann:
        async with ann.get(f"/api/sessions/{session_id}/events/log", params={"limit": 500}) as r:
            assert [e["seq"] for e in await r.json()] == list(range(1, last + 1))
        async with ann.get(f"/api/sessions/{session_id}/files/hello.py") as r:
            assert (await r.json())["content"] == HELLO
        second = await send(ann, session_id, "do you remember what you wrote?")
        assert second["seq"] == last + 1
        events = await read_events(ann, session_id, after=last, until=ended(second["seq"]))
        completed = next(e["data"] for e in events if e["data"].get("kind") == "run_completed")
        assert completed["content"] == "remembered: yes"


async def test_only_the_owner_writes_a_teacher_of_the_course_reads_others_see_nothing(
    tmp_path: Path, model: FakeOpenAIServer
) -> None:
    async with serve_team(_settings(tmp_path)) as (url, team):
        c = await make_class(team, model.base_url)
        async with (
            client(url, c.ann) as ann,
            client(url, c.bob) as bob,
            client(url, c.teacher) as teacher,
            client(url, c.other_teacher) as other,
        ):
            session_id = await new_session(ann, c.course, "ann's work")
            message = await send(ann, session_id, "write a hello program")
            await read_events(ann, session_id, until=ended(message["seq"]))
            base = f"/api/sessions/{session_id}"
            reads = [base, f"{base}/messages", f"{base}/events/log", f"{base}/files",
                     f"{base}/files/hello.py"]  # fmt: skip

            for outsider in (bob, other):
                for path in reads:
                    async with outsider.get(path) as r:
                        assert r.status == 404, (path, r.status)
                async with outsider.get(f"{base}/events") as r:
                    assert r.status == 404
                async with outsider.post(f"{base}/messages", json={"text": "hi"}) as r:
                    assert r.status == 404
                async with outsider.post(f"{base}/continue", json={}) as r:
                    assert r.status == 404
                async with outsider.get("/api/sessions") as r:
                    assert await r.json() == []

            for path in reads:
                async with teacher.get(path) as r:
                    assert r.status == 200, (path, r.status)
            events = await read_events(teacher, session_id, until=ended(message["seq"]))
            assert events[0]["data"]["text"] == "write a hello program"
            async with teacher.post(f"{base}/messages", json={"text": "hi"}) as r:
                assert r.status == 403
                assert "owner" in (await r.json())["error"]["message"]
            async with teacher.get("/api/sessions", params={"course_id": c.course}) as r:
                assert [s["id"] for s in await r.json()] == [session_id]
            async with teacher.get(
                "/api/sessions", params={"course_id": c.course, "user_id": c.ann_id}
            ) as r:
                assert [s["id"] for s in await r.json()] == [session_id]
            async with other.get("/api/sessions", params={"course_id": c.course}) as r:
                assert r.status == 404
            async with bob.get("/api/sessions", params={"course_id": c.course}) as r:
                assert await r.json() == []
            async with bob.get(
                "/api/sessions", params={"course_id": c.course, "user_id": c.ann_id}
            ) as r:
                assert r.status == 403
            async with bob.post("/api/sessions", json={"course_id": "c_nope"}) as r:
                assert r.status == 404
            async with ann.get("/api/sessions") as r:
                assert [s["title"] for s in await r.json()] == ["ann's work"]


async def test_bad_requests_get_clear_4xx(tmp_path: Path, model: FakeOpenAIServer) -> None:
    async with serve_team(_settings(tmp_path)) as (url, team):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            base = f"/api/sessions/{session_id}"
            async with ann.post(f"{base}/messages", json={"text": ""}) as r:
                assert r.status == 422 and "text" in (await r.json())["error"]["message"]
            async with ann.post(f"{base}/messages", json={"txt": "hi"}) as r:
                assert r.status == 422
            lone = b'{"text": "half a pair: \\ud800"}'
            headers = {"Content-Type": "application/json"}
            async with ann.post(f"{base}/messages", data=lone, headers=headers) as r:
                assert r.status in (400, 422), await r.text()  # refused, never stored
            async with ann.get("/api/sessions", params={"user_id": "u_someone"}) as r:
                assert r.status == 403
            async with ann.post(f"{base}/continue", json={}) as r:
                assert r.status == 404
                assert "interrupted" in (await r.json())["error"]["message"]
            async with ann.post(f"{base}/cancel") as r:
                assert r.status == 409
            async with ann.get(f"{base}/events", headers={"Last-Event-ID": "x"}) as r:
                assert r.status == 422
            async with ann.get(f"{base}/files/..%2F..%2Fetc") as r:
                assert 400 <= r.status < 500
            async with ann.get(f"{base}/events", params={"follow": "false"}) as r:
                assert r.status == 200 and await r.text() == ""


async def test_a_cancelled_run_is_interrupted_and_can_be_continued(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def waits(body: dict[str, Any]) -> AssistantMessage | str:
        if body["messages"][-1]["role"] == "user" and not release.is_set():
            await release.wait()
        return tutor(body)

    async with (
        FakeOpenAIServer(waits) as model,
        serve_team(_settings(tmp_path)) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "write a hello program")
            base = f"/api/sessions/{session_id}"
            events = await read_events(
                ann, session_id, until=lambda e: e["data"].get("kind") == "model_request_started"
            )
            async with ann.post(f"{base}/cancel") as r:
                assert r.status == 202, await r.text()
            events = await read_events(ann, session_id, until=ended(message["seq"]))
            assert events[-1]["data"]["state"] == "interrupted"
            async with ann.get(f"{base}/messages") as r:
                assert [m["state"] for m in await r.json()] == ["interrupted"]

            release.set()
            async with ann.post(f"{base}/continue", json={"seq": message["seq"]}) as r:
                assert r.status == 202
                assert (await r.json())["continued"] == 1
            async with ann.post(f"{base}/continue", json={"seq": message["seq"]}) as r:
                assert r.status == 409  # pending or running now: not interrupted
            after = events[-1]["seq"]
            events = await read_events(ann, session_id, after=after, until=ended(message["seq"]))
            assert events[0]["data"]["event"] == "continued"
            assert events[-1]["data"]["state"] == "done"
            async with ann.get(f"{base}/files/hello.py") as r:
                assert r.status == 200
        assert not team.supervisor.deliver(
            await team.supervisor.sessions.get(session_id), CancelRequested("nothing runs")
        )


async def test_messages_run_one_at_a_time_in_order(tmp_path: Path) -> None:
    asked: list[str] = []
    running = 0
    most = 0

    async def counting(body: dict[str, Any]) -> AssistantMessage | str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await asyncio.sleep(0.05)
            asked.append(_text(body["messages"][-1]))
            return "done: " + asked[-1]
        finally:
            running -= 1

    async with (
        FakeOpenAIServer(counting) as model,
        serve_team(_settings(tmp_path)) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            seqs = [(await send(ann, session_id, f"task {n}"))["seq"] for n in range(4)]
            events = await read_events(ann, session_id, until=ended(seqs[-1]))
            assert team.supervisor.loops <= 1
        assert asked == [f"task {n}" for n in range(4)]
        assert most == 1, "two runs of one session overlapped"
        starts = [
            e["data"]["message_seq"] for e in events if e["data"].get("event") == "run_started"
        ]
        assert starts == seqs
        ends = [e["data"] for e in events if e["data"].get("event") == "run_ended"]
        assert [(d["message_seq"], d["state"]) for d in ends] == [(s, "done") for s in seqs]


async def test_a_refused_model_call_ends_the_run_with_a_budget_event(
    tmp_path: Path, model: FakeOpenAIServer
) -> None:
    async with serve_team(_settings(tmp_path)) as (url, team):
        c = await make_class(team, model.base_url)
        await team.budgets.set_budget(
            c.course, scope="student", user_id=c.ann_id, period="day", max_tokens=10
        )
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "write a hello program")
            events = await read_events(ann, session_id, until=ended(message["seq"]))
            refused = [e["data"] for e in events if e["data"].get("kind") == "budget_exceeded"]
            assert len(refused) == 1 and "budget" in refused[0]["message"]
            assert refused[0]["limit"] == 10 and refused[0]["remaining_tokens"] == 10
            assert events[-1]["data"]["state"] == "failed"
            assert events[-1]["data"]["error"] == "budget_exceeded"
            budget = [e["data"] for e in events if e["data"].get("kind") == "budget"]
            assert budget and budget[0]["budgets"][0]["remaining_tokens"] == 10
            async with ann.get(f"/api/sessions/{session_id}/files") as r:
                assert await r.json() == []  # no tool ran: the model was never called
        assert model.requests == []


async def test_a_stopping_server_interrupts_the_run_and_a_new_one_continues_it(
    tmp_path: Path,
) -> None:
    release = asyncio.Event()

    async def waits(body: dict[str, Any]) -> AssistantMessage | str:
        if body["messages"][-1]["role"] == "user" and not release.is_set():
            await release.wait()
        return tutor(body)

    settings = _settings(tmp_path)
    async with FakeOpenAIServer(waits) as model:
        async with serve_team(settings) as (url, team):
            c = await make_class(team, model.base_url)
            async with client(url, c.ann) as ann:
                session_id = await new_session(ann, c.course)
                message = await send(ann, session_id, "write a hello program")
                await read_events(
                    ann,
                    session_id,
                    until=lambda e: e["data"].get("kind") == "model_request_started",
                )
        release.set()
        async with serve_team(settings) as (url, team), client(url, c.ann) as ann:
            base = f"/api/sessions/{session_id}"
            async with ann.get(f"{base}/messages") as r:
                assert [m["state"] for m in await r.json()] == ["interrupted"]
            async with ann.get(f"{base}/events/log", params={"limit": 500}) as r:
                log = await r.json()
            marks = [e["data"] for e in log if e["data"].get("event") == "run_interrupted"]
            assert len(marks) == 1 and "stopped" in marks[0]["reason"]
            async with ann.post(f"{base}/continue", json={}) as r:
                assert r.status == 202
            events = await read_events(ann, session_id, after=log[-1]["seq"],
                                       until=ended(message["seq"]))  # fmt: skip
            assert events[-1]["data"]["state"] == "done"


async def test_a_subscriber_that_falls_behind_catches_up_from_the_log(
    tmp_path: Path, model: FakeOpenAIServer
) -> None:
    async with serve_team(_settings(tmp_path)) as (url, team):
        team.supervisor.hub.limit = 1  # every batch of two or more events drops the subscriber
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            first = await send(ann, session_id, "write a hello program")
            second = await send(ann, session_id, "write a hello program again")
            events = await read_events(ann, session_id, until=ended(second["seq"]))
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
            assert first["seq"] < second["seq"] <= events[-1]["seq"]
            async with ann.get(
                f"/api/sessions/{session_id}/events/log", params={"limit": 500}
            ) as r:
                assert [e["seq"] for e in await r.json()] == [e["seq"] for e in events]


OVERFLOW = HTTPFault(
    400,
    {
        "error": {
            "message": "This model's maximum context length is 4000 tokens. However, your "
            "messages resulted in 5012 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)


async def test_compaction_is_streamed_and_its_savings_are_counted(tmp_path: Path) -> None:
    """A model with a small window rejects the growing conversation; the agent compacts it,
    the stream shows it and the course's usage counts the tokens it saved."""
    reads = 0

    def small_window(body: dict[str, Any]) -> AssistantMessage | str | HTTPFault:
        nonlocal reads
        if len(json.dumps(body["messages"])) > 14_000:
            return OVERFLOW
        if not body.get("tools"):
            return "Summary: the student's report was read several times."
        if reads == 0:
            reads = 1
            report = "".join(f"line {n}: " + "lorem ipsum " * 5 + "\n" for n in range(60))
            return tool_calls(call("write_file", path="/report.txt", content=report))
        if reads > 8:
            return "I read the report eight times."
        reads += 1
        return tool_calls(call("read_file", path="/report.txt", offset=reads - 2))

    async with (
        FakeOpenAIServer(small_window) as model,
        serve_team(_settings(tmp_path)) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "read the report again and again")
            events = await read_events(ann, session_id, until=ended(message["seq"]))
        compacted = [e["data"] for e in events if e["data"].get("kind") == "context_compacted"]
        assert compacted and compacted[0]["trigger"] == "overflow"
        assert events[-1]["data"]["state"] == "done"
        saved = sum(e["before"] - e["after"] for e in compacted)
        usage = await team.budgets.usage(c.course, user_id=c.ann_id)
        assert sum(row.compaction_saved_tokens for row in usage) == saved > 0


async def test_an_event_that_cannot_be_written_fails_alone(tmp_path: Path) -> None:
    """A batch that fails because of one event's data is written event by event: the others
    are committed, only that event's writer gets the error."""
    async with serve_team(_settings(tmp_path)) as (_, team):
        c = await make_class(team, "http://127.0.0.1:9/v1")
        sessions = team.supervisor.sessions
        session = await sessions.create(c.ann_id, c.course)
        poison = AuditNote("tool_call", c.ann_id, c.course, session.id, {"bad": object()})
        items = [
            NewEvent(session.id, "run", {"kind": "note", "n": 1}),
            NewEvent(session.id, "run", {"kind": "note", "n": 2}, audit=(poison,)),
            NewEvent(session.id, "run", {"kind": "note", "n": 3}),
        ]
        outcomes = await asyncio.gather(
            *(sessions.writer.commit(item) for item in items), return_exceptions=True
        )
        assert isinstance(outcomes[1], StorageError)
        stored = await sessions.events(session.id)
        assert [e.data["n"] for e in stored] == [1, 3] and [e.seq for e in stored] == [1, 2]


async def _user_id(team: Team, token: str) -> str:
    return (await team.accounts.principal_for_token(token)).user_id


async def test_the_owner_renames_and_deletes_a_session_and_nobody_else_can(
    database: TeamSettings, model: FakeOpenAIServer
) -> None:
    """PATCH renames (audited), DELETE removes the session, its log, its conversation and its
    workspace files (audited) and ends its live streams; a teacher of the course gets 403,
    other students and teachers 404."""
    async with serve_team(database) as (url, team):
        c = await make_class(team, model.base_url)
        async with (
            client(url, c.ann) as ann,
            client(url, c.bob) as bob,
            client(url, c.teacher) as teacher,
            client(url, c.other_teacher) as other,
        ):
            session_id = await new_session(ann, c.course, "first try")
            kept = await new_session(ann, c.course, "kept")
            message = await send(ann, session_id, "write a hello program")
            await read_events(ann, session_id, until=ended(message["seq"]))
            base = f"/api/sessions/{session_id}"

            for who, status in ((teacher, 403), (bob, 404), (other, 404)):
                async with who.patch(base, json={"title": "mine now"}) as r:
                    assert r.status == status, await r.text()
                async with who.delete(base) as r:
                    assert r.status == status, await r.text()
            async with ann.patch(base, json={"title": ""}) as r:
                assert r.status == 422 and "title" in (await r.json())["error"]["message"]
            async with ann.patch(base, json={"title": "hello, world"}) as r:
                assert r.status == 200, await r.text()
                renamed = await r.json()
            assert (renamed["id"], renamed["title"]) == (session_id, "hello, world")
            async with teacher.get(base) as r:
                assert (await r.json())["title"] == "hello, world"

            following = asyncio.create_task(read_events(teacher, session_id))  # until it ends
            async with ann.get(f"{base}/files") as r:
                assert [f["path"] for f in await r.json()] == ["/hello.py"]
            async with ann.delete(base) as r:
                assert r.status == 204, await r.text()
            streamed = await following  # the live stream ended with the session
            assert streamed[0]["data"]["text"] == "write a hello program"

            for path in (base, f"{base}/messages", f"{base}/events/log", f"{base}/files"):
                async with ann.get(path) as r:
                    assert r.status == 404, (path, r.status)
            async with ann.delete(base) as r:
                assert r.status == 404
            async with ann.get("/api/sessions") as r:
                assert [s["id"] for s in await r.json()] == [kept]
            async with teacher.get("/api/sessions", params={"course_id": c.course}) as r:
                assert [s["id"] for s in await r.json()] == [kept]

        storage = team.supervisor.storage
        assert await storage.load_session(c.ann_id, session_id) is None  # the conversation
        assert await storage.list_variables(c.ann_id, "~files~" + session_id) == []
        assert await team.supervisor.sessions.events(session_id) == []
        renames = await team.audit.search(course_id=c.course, kind="session_renamed")
        deletions = await team.audit.search(course_id=c.course, kind="session_deleted")
    assert [(r.actor_id, r.data["title"], r.data["previous"]) for r in renames] == [
        (c.ann_id, "hello, world", "first try")
    ]
    (deletion,) = deletions
    assert (deletion.actor_id, deletion.subject) == (c.ann_id, session_id)
    assert deletion.data["title"] == "hello, world" and deletion.data["events"] > 3


async def test_deleting_a_session_stops_its_agent_first(tmp_path: Path) -> None:
    """The agent is waiting for its model when the session is deleted: the answer comes once
    the agent's loop has ended, and the session's folder on the server is gone with it."""
    release = asyncio.Event()

    async def waits(body: dict[str, Any]) -> AssistantMessage | str:
        if not release.is_set():
            await release.wait()
        return tutor(body)

    settings = sqlite_settings(tmp_path, server_commands=True)
    async with FakeOpenAIServer(waits) as model, serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            await send(ann, session_id, "write a hello program")
            await read_events(
                ann, session_id, until=lambda e: e["data"].get("kind") == "model_request_started"
            )
            folder = tmp_path / "workspaces" / session_id
            assert team.supervisor.active(session_id) and folder.is_dir()
            async with ann.delete(f"/api/sessions/{session_id}") as r:
                assert r.status == 204, await r.text()
            assert not team.supervisor.active(session_id)
            assert team.supervisor.loops == 0
            assert not folder.exists()
            async with ann.get("/api/sessions") as r:
                assert await r.json() == []
        release.set()
        assert await team.supervisor.sessions.events(session_id) == []


async def test_a_teacher_of_the_course_cancels_a_run(tmp_path: Path) -> None:
    """The course's teacher stops a student's run (audited with the teacher as the actor, the
    message interrupted "by the teacher"); another student, another course's teacher and an
    admin who does not teach the course cannot. An operation cancel delivered to a serial
    session is ignored (the run goes on until the teacher's cancel)."""
    release = asyncio.Event()

    async def waits(body: dict[str, Any]) -> AssistantMessage | str:
        if not release.is_set():
            await release.wait()
        return tutor(body)

    async with (
        FakeOpenAIServer(waits) as model,
        serve_team(_settings(tmp_path)) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        admin = team.first_admin
        assert admin is not None
        admin_token = (await team.accounts.issue_token(admin.user.id)).token
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "write a hello program")
            await read_events(
                ann, session_id, until=lambda e: e["data"].get("kind") == "model_request_started"
            )
        path = f"/api/sessions/{session_id}/cancel"
        for who, status in ((c.bob, 404), (c.other_teacher, 404), (admin_token, 403)):
            async with client(url, who) as caller, caller.post(path) as r:
                assert r.status == status, await r.text()
        session = await team.supervisor.sessions.get(session_id)
        assert team.supervisor.deliver(session, OperationCancelRequested("op1", "no such op"))
        async with client(url, c.teacher) as teacher:
            async with teacher.post(path) as r:
                assert r.status == 202, await r.text()
                assert await r.json() == {"session_id": session_id, "cancelled": True}
            events = await read_events(teacher, session_id, until=ended(message["seq"]))
            async with teacher.post(path) as r:
                assert r.status == 409  # nothing runs any more
        release.set()
        records = await team.audit.search(course_id=c.course, kind="run_cancel_requested")
        teacher_id = await _user_id(team, c.teacher)
    assert events[-1]["data"]["state"] == "interrupted"
    assert "cancelled by the teacher" in events[-1]["data"]["reason"]
    assert [(r.actor_id, r.data["reason"]) for r in records] == [
        (teacher_id, "cancelled by the teacher")
    ]
