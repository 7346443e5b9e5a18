"""Fixtures shared by the team service's tests.

- ``pg_cluster``: one throw-away PostgreSQL cluster for the whole session (skips with the reason
  when PostgreSQL is not installed); tests create their own databases in it.
- ``redis_server``: one throw-away Redis server for the whole session (skips with the reason
  when it is not installed); tests use a database number or key prefix of their own.
- ``live_team``: the service on a thread of its own with a provisioned classroom, for the
  security tests (see the section at the end).
"""

from __future__ import annotations

import asyncio
import itertools
import json as _json
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import pytest

from agentica.messages import AssistantMessage, ToolCall
from agentica.testing import FakeOpenAIServer
from agentica.testing._server import Responder, ServerReply
from tests.postgres import Cluster, throwaway_cluster, why_no_postgres
from tests.redis import RedisServer, throwaway_redis, why_no_redis

if TYPE_CHECKING:
    from agentica_team.service import Team


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    reason = why_no_postgres()
    if reason:
        pytest.skip(reason)
    with throwaway_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    reason = why_no_redis()
    if reason:
        pytest.skip(reason)
    with throwaway_redis() as server:
        yield server


# -- the security tests' service (test_access_matrix, test_fuzz, test_no_secrets) ---------------
#
# - ``live_team``: a factory, ``with live_team(tmp_path, responder, **settings) as live: ...``:
#   the service under real uvicorn on 127.0.0.1, run in an event loop on its own thread (so a
#   module shares one server and synchronous clients such as schemathesis can call it), with a
#   ``CapturingUpstream`` as the server-wide model and a provisioned ``Classroom``. The loop runs
#   in debug mode: a callback that blocks it is reported to the test's ``_no_blocking_calls``.
# - ``Api``: an HTTP client that records every exchange (status, headers, whole body).


_T = TypeVar("_T")
_SLOW_CALLBACK = 0.3  # as tests/conftest.py's SLOW_CALLBACK


class LoopThread:
    """An event loop running on a daemon thread; ``run(coro)`` runs a coroutine there. With
    ``watch`` the loop runs in debug mode, so a callback that blocks it is logged (and fails
    the test that runs meanwhile)."""

    def __init__(self, *, watch: bool = True) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_debug(watch)
        self.loop.slow_callback_duration = _SLOW_CALLBACK
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float = 120.0) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


class CapturingUpstream(FakeOpenAIServer):
    """A ``FakeOpenAIServer`` that also keeps each request's headers (which key reached it)."""

    def __init__(self, responder: Responder, **kwargs: Any) -> None:
        super().__init__(responder, **kwargs)
        self.headers: list[dict[str, str]] = []

    def _record(self, request: Any, body: dict[str, Any]) -> None:
        super()._record(request, body)
        self.headers.append(dict(request.headers))

    def keys_seen(self) -> set[str]:
        """The bearer keys the upstream was called with."""
        return {
            h.get("Authorization", "").removeprefix("Bearer ").strip() for h in self.headers
        } - {""}


@dataclass
class Exchange:
    """One request and its response, as the client saw them."""

    who: str
    method: str
    path: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    request_body: bytes = b""

    def json(self) -> Any:
        return _json.loads(self.body)

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def everything(self) -> str:
        """The response's headers and body as one text (for grepping)."""
        head = "\n".join(f"{k}: {v}" for k, v in self.headers)
        return f"{self.status}\n{head}\n\n{self.text()}"


_UNSET: Any = object()


class Api:
    """An HTTP client for ``url`` that records every exchange in ``exchanges``; each call says
    who makes it (a token, or a browser cookie and its CSRF value). Use it in one event loop."""

    def __init__(self, url: str, exchanges: list[Exchange] | None = None) -> None:
        self.url = url
        self.exchanges: list[Exchange] = [] if exchanges is None else exchanges
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            base_url=self.url,
            cookie_jar=aiohttp.DummyCookieJar(),
            # a connection per request: after a failure the server may close a kept-alive one
            connector=aiohttp.TCPConnector(force_close=True),
            timeout=aiohttp.ClientTimeout(total=60),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(
        self,
        method: str,
        path: str,
        *,
        who: str = "",
        token: str | None = None,
        cookie: str | None = None,
        csrf: str | None = None,
        json: Any = _UNSET,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        read_for: float | None = None,
    ) -> Exchange:
        """Send the request and read the whole response (at most ``read_for`` seconds of a
        stream that does not end)."""
        assert self._session is not None, "use `async with Api(url) as api`"
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if cookie is not None:
            sent["Cookie"] = f"agentica_session={cookie}"
        if csrf is not None:
            sent["X-CSRF-Token"] = csrf
        if json is not _UNSET:
            data = _json.dumps(json).encode()
            sent.setdefault("Content-Type", "application/json")
        async with self._session.request(method, path, data=data, headers=sent) as r:
            body = await _read(r, read_for)
            exchange = Exchange(
                who, method, path, r.status, list(r.headers.items()), body, data or b""
            )
        self.exchanges.append(exchange)
        return exchange


async def _read(response: aiohttp.ClientResponse, read_for: float | None) -> bytes:
    if read_for is None:
        return await response.read()
    parts: list[bytes] = []
    try:
        async with asyncio.timeout(read_for):
            async for chunk in response.content.iter_any():
                parts.append(chunk)
    except TimeoutError:
        pass
    return b"".join(parts)


@dataclass
class Person:
    """An account of the classroom: its id, e-mail and personal token."""

    id: str
    email: str
    token: str
    password: str = ""


@dataclass
class Classroom:
    """Two courses: A (teacher ``ta``, students ``s1``, ``s2``) and B (teacher ``tb``,
    student ``s3``), and the admin. ``s1`` owns things in A: an extra token, a budget and (when
    the service has sessions) a session with a message."""

    admin: Person
    ta: Person
    tb: Person
    s1: Person
    s2: Person
    s3: Person
    course_a: str
    course_b: str
    s1_token_id: str = ""
    s1_budget_id: str = ""
    s1_session_id: str = ""
    extra: dict[str, str] = field(default_factory=dict)


_PASSWORDS = (f"pass-word-{n}-long-enough" for n in itertools.count())


async def _browser(api: Api, email: str, password: str) -> tuple[str, str]:
    """Log in: ``(cookie, csrf)``."""
    done = await api.call(
        "POST", "/api/auth/login", who=email, json={"email": email, "password": password}
    )
    assert done.status == 200, done.text()
    cookie = next(
        v.split(";", 1)[0].split("=", 1)[1]
        for k, v in done.headers
        if k.lower() == "set-cookie" and v.startswith("agentica_session=")
    )
    return cookie, done.json()["csrf_token"]


async def _person_with_token(api: Api, email: str, password: str) -> Person:
    cookie, csrf = await _browser(api, email, password)
    me = await api.call("GET", "/api/me", who=email, cookie=cookie)
    issued = await api.call(
        "POST", "/api/me/tokens", who=email, cookie=cookie, csrf=csrf, json={"name": "cli"}
    )
    assert issued.status == 201, issued.text()
    return Person(me.json()["id"], email, issued.json()["token"], password)


async def _ok(exchange: Awaitable[Exchange], *statuses: int) -> Any:
    done = await exchange
    assert done.status in (statuses or (200, 201)), f"{done.method} {done.path}: {done.text()}"
    return done.json() if done.body else None


async def provision_classroom(api: Api, team: Team) -> Classroom:
    """Provision the ``Classroom`` through the HTTP API (as a teacher would)."""
    first = team.first_admin
    assert first is not None, "the service's database was not new"
    admin = await _person_with_token(api, first.user.email, first.password)
    teachers = []
    for name in ("ta", "tb"):
        email, password = f"{name}@school.edu", next(_PASSWORDS)
        await _ok(
            api.call(
                "POST",
                "/api/users",
                who="admin",
                token=admin.token,
                json={"email": email, "role": "teacher", "password": password},
            )
        )
        teachers.append(await _person_with_token(api, email, password))
    ta, tb = teachers
    courses, students = [], []
    for teacher, name, roster in (
        (ta, "course-a", "email,name\ns1@school.edu,Sam One\ns2@school.edu,Sue Two\n"),
        (tb, "course-b", "s3@school.edu\n"),
    ):
        course = await _ok(
            api.call("POST", "/api/courses", who=name, token=teacher.token, json={"name": name})
        )
        courses.append(course["id"])
        done = await _ok(
            api.call(
                "POST",
                f"/api/courses/{course['id']}/students",
                who=name,
                token=teacher.token,
                json={"roster": roster},
            )
        )
        students += [Person(s["user"]["id"], s["user"]["email"], s["token"]) for s in done]
    s1, s2, s3 = students
    room = Classroom(admin, ta, tb, s1, s2, s3, courses[0], courses[1])
    # S1's personal token (a course token cannot mint one; an admin's server-side tools can)
    extra = await team.accounts.issue_token(s1.id, name="laptop")
    room.s1_token_id = extra.info.id
    budget = await _ok(
        api.call(
            "PUT",
            f"/api/courses/{room.course_a}/budgets",
            who="ta",
            token=ta.token,
            json={"scope": "student", "user_id": s1.id, "period": "day", "max_tokens": 10**9},
        )
    )
    room.s1_budget_id = budget["id"]
    await _s1_session(api, room)
    return room


async def _s1_session(api: Api, room: Classroom) -> None:
    """S1's session in course A, with one message the agent answered by writing a file."""
    s1 = room.s1
    session = await _ok(
        api.call(
            "POST",
            "/api/sessions",
            who="s1",
            token=s1.token,
            json={"course_id": room.course_a, "title": "s1's work"},
        )
    )
    room.s1_session_id = session["id"]
    path = f"/api/sessions/{session['id']}/messages"
    await _ok(api.call("POST", path, who="s1", token=s1.token, json={"text": "take notes"}), 202)
    for _ in range(400):
        done = await api.call("GET", path, who="s1", token=s1.token)
        if done.json()[-1]["state"] not in ("pending", "running"):
            break
        await asyncio.sleep(0.05)
    assert done.json()[-1]["state"] == "done", done.text()
    files = await _ok(api.call("GET", path.replace("/messages", "/files"), token=s1.token))
    assert [f["path"] for f in files] == [SESSION_FILE], files


SESSION_FILE = "/notes.md"


def scripted_reply(body: dict[str, Any]) -> ServerReply:
    """The upstream's default answer: a request with tools (an agent's) first gets a
    ``write_file`` of ``SESSION_FILE`` and then text; any other request gets text."""
    messages = body.get("messages") or [{}]
    if body.get("tools") and messages[-1].get("role") != "tool":
        arguments = _json.dumps({"path": SESSION_FILE, "content": "s1's private notes"})
        return AssistantMessage(
            tool_calls=[ToolCall(id="", name="write_file", arguments=arguments)]
        )
    return "the scripted model's answer"


@dataclass
class LiveTeam:
    """A running service (see ``live_team``)."""

    url: str
    team: Team
    thread: LoopThread
    upstream: CapturingUpstream
    room: Classroom
    exchanges: list[Exchange]
    settings: Any

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float = 120.0) -> _T:
        """Run ``coro`` in the service's event loop."""
        return self.thread.run(coro, timeout)


@contextmanager
def _live_team(
    tmp_path: Path,
    responder: Responder = scripted_reply,
    *,
    watch_loop: bool = True,
    **overrides: Any,
) -> Iterator[LiveTeam]:
    from agentica_team.settings import TeamSettings
    from tests.team.server import serve_team, sqlite_settings  # the app: imported when used

    thread = LoopThread(watch=watch_loop)
    upstream = CapturingUpstream(responder)
    serving = None
    try:
        thread.run(upstream.start())
        overrides.setdefault("model", "fake-model")
        overrides.setdefault("model_base_url", upstream.base_url)
        if "database_url" in overrides:  # PostgreSQL
            settings = TeamSettings(data_dir=tmp_path, **overrides)
        else:
            settings = sqlite_settings(tmp_path, **overrides)
        serving = serve_team(settings)
        url, team = thread.run(serving.__aenter__())
        exchanges: list[Exchange] = []

        async def provision() -> Classroom:
            async with Api(url, exchanges) as api:
                return await provision_classroom(api, team)

        room = thread.run(provision())
        yield LiveTeam(url, team, thread, upstream, room, exchanges, settings)
    finally:
        if serving is not None:
            thread.run(serving.__aexit__(None, None, None))
        thread.run(upstream.stop())
        thread.close()


@pytest.fixture(scope="session")
def live_team() -> Callable[..., Any]:
    """``with live_team(tmp_path, responder, watch_loop=True, **settings) as live``: see the
    section comment (``watch_loop=False`` where the test's own thread keeps the CPU busy, as a
    fuzzer does: the server's thread then waits for the GIL, which looks like a blocked loop)."""
    return _live_team
