"""No provider key and no personal token escapes: every feature is driven once, then everything
the service produced is searched.

Two provider keys: course A's own (``sk-LEAKCHECK-...``, a shape ``redact`` knows) and the
server-wide one that course B uses (``LEAKCHECK...``, a shape it cannot know, as a provider's may
be). The upstream is called with them and echoes them in its errors (as real providers do).
Driven: the gateway (JSON and streams, every kind of upstream failure), agent sessions with tool
calls and failures, the audit (search, JSONL and CSV export, verify), failed logins with a token
as the password, malformed settings and server errors. Searched (case-insensitively): every HTTP
response's headers and body, every log record of every logger at DEBUG, every table of the
database and the raw bytes of every file in the data directory. A key may be nowhere but the one
column that must hold course A's key; a token or login cookie only in the response that issued it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentica.testing import BadBody, HTTPFault
from agentica.testing._server import RawStream, ServerReply
from tests.team.conftest import Api, CapturingUpstream, Exchange, LiveTeam, scripted_reply

COURSE_KEY = "sk-LEAKCHECK-" + secrets.token_hex(16)
SERVER_KEY = "LEAKCHECK" + secrets.token_hex(20)  # no known prefix: redact() cannot find it
KEYS = {"course A's key": COURSE_KEY, "the server-wide key": SERVER_KEY}
KEY_COLUMN = ("team_courses", "model_api_key")  # where course A's key is kept, sealed
TOKEN = re.compile(r"agt_[A-Za-z0-9_\-]{40,}")
SERVICE_LOGGERS = ("agentica", "uvicorn", "fastapi", "starlette", "asyncio", "root")


# -- the upstream: it echoes the key it was called with in its errors ---------------------------


class EchoingUpstream:
    """The responder: a marker in the last user message picks a failure whose text contains
    the key the caller sent (as "Incorrect API key provided: sk-..." does)."""

    def __init__(self) -> None:
        self.server: CapturingUpstream | None = None

    def __call__(self, body: dict[str, Any]) -> ServerReply:
        seen = self.server.headers if self.server is not None else []
        key = seen[-1].get("Authorization", "").removeprefix("Bearer ") if seen else ""
        text = _last_user_text(body)
        faults: dict[str, ServerReply] = {
            "FAIL401": HTTPFault(401, {"error": {"message": f"Incorrect API key: {key}"}}),
            "FAIL400": HTTPFault(400, {"error": {"message": f"bad request for {key}"}}),
            "FAIL429": HTTPFault(
                429, {"error": {"message": f"slow down {key}"}}, {"Retry-After": "0"}
            ),
            "FAIL500": HTTPFault(500, {"error": {"message": f"crashed serving {key}"}}),
            "BADBODY": BadBody(f"<html>proxy error for {key}</html>".encode()),
            "MIDSTREAM": RawStream(
                [
                    _chunk({"content": "half an answer "}),
                    b"data: "
                    + json.dumps({"error": {"message": f"overloaded, {key}"}}).encode()
                    + b"\n\n",
                ]
            ),
        }
        for marker, fault in faults.items():
            if marker in text:
                return fault
        return scripted_reply(body)


def _chunk(delta: dict[str, Any]) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


# -- every log record ----------------------------------------------------------------------------


class Capture(logging.Handler):
    """Keeps every record of every logger, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # a record that cannot be formatted still counts, as it is
            text = f"{record.msg!r} {record.args!r}"
        self.records.append((record.name, text))


@dataclass
class Logging:
    """``install`` puts the capture on the root and every logger that does not propagate, all at
    DEBUG (again after uvicorn configured its own); ``remove`` restores everything."""

    capture: Capture = field(default_factory=Capture)
    levels: dict[str, int] = field(default_factory=dict)
    attached: list[logging.Logger] = field(default_factory=list)

    def install(self) -> None:
        loggers = [logging.getLogger()] + [
            item for item in logging.root.manager.loggerDict.values()
            if isinstance(item, logging.Logger)
        ]  # fmt: skip
        for logger in loggers:
            self.levels.setdefault(logger.name, logger.level)
            logger.setLevel(logging.DEBUG)
            attach = logger is logging.getLogger() or not logger.propagate
            if attach and logger not in self.attached:
                logger.addHandler(self.capture)
                self.attached.append(logger)

    def remove(self) -> None:
        for logger in self.attached:
            logger.removeHandler(self.capture)
        for name, level in self.levels.items():
            logging.getLogger(None if name == "root" else name).setLevel(level)


# -- driving every feature -----------------------------------------------------------------------


async def _settled(api: Api, session: str, token: str) -> list[dict[str, Any]]:
    """The session's messages once none is pending or running."""
    for _ in range(600):
        done = await api.call("GET", f"/api/sessions/{session}/messages", token=token)
        messages: list[dict[str, Any]] = done.json()
        if all(m["state"] not in ("pending", "running") for m in messages):
            return messages
        await asyncio.sleep(0.05)
    raise AssertionError(f"the session's agent did not finish: {messages}")


# The server-wide key has no shape redact() knows, so every failure is driven with it (course
# B); course A's key, which it would catch anyway, gets one of each kind of call.
GATEWAY = {
    "course-b": [(False, t) for t in ("hello", "FAIL401", "FAIL400", "FAIL500", "FAIL429",
                                      "BADBODY")]
    + [(True, t) for t in ("hello", "FAIL401", "MIDSTREAM")],
    "course-a": [(False, "hello"), (False, "FAIL401"), (True, "hello"), (True, "MIDSTREAM")],
}  # fmt: skip
SESSION_TEXTS = {
    "course-b": ("take notes", "FAIL401 now", "BADBODY please", "FAIL400 then"),
    "course-a": ("take notes again", "FAIL401 now"),
}


async def _gateway(api: Api, live: LiveTeam) -> None:
    room = live.room
    for model, token in (("course-a", room.s1.token), ("course-b", room.s3.token)):
        for stream, text in GATEWAY[model]:
            body = {"model": model, "stream": stream,
                    "messages": [{"role": "user", "content": text}]}  # fmt: skip
            await api.call("POST", "/v1/chat/completions", token=token, json=body)
        await api.call("GET", "/v1/models", token=token)


async def _sessions(api: Api, live: LiveTeam) -> None:
    room = live.room
    created = await api.call(
        "POST", "/api/sessions", token=room.s3.token, json={"course_id": room.course_b}
    )
    sessions = [
        ("course-a", room.s1_session_id, room.s1.token),
        ("course-b", created.json()["id"], room.s3.token),
    ]
    for model, session, token in sessions:
        for text in SESSION_TEXTS[model]:
            path = f"/api/sessions/{session}/messages"
            await api.call("POST", path, token=token, json={"text": text})
            await _settled(api, session, token)
        await api.call("POST", f"/api/sessions/{session}/continue", token=token, json={})
        await _settled(api, session, token)
        for reader in (token, room.ta.token, room.tb.token):
            for tail in ("", "/messages", "/events/log?limit=500", "/events?follow=false",
                         "/files", "/files/notes.md"):  # fmt: skip
                await api.call("GET", f"/api/sessions/{session}{tail}", token=reader)
        await api.call("GET", "/api/sessions", token=token)


async def _audit(api: Api, live: LiveTeam) -> None:
    room = live.room
    for course, token in ((room.course_a, room.ta.token), (room.course_b, room.tb.token),
                          ("server", room.admin.token)):  # fmt: skip
        base = f"/api/courses/{course}/audit"
        for tail in ("?limit=1000", "/export", "/export?format=csv", "/verify"):
            await api.call("GET", base + tail, token=token)


async def _logins_and_errors(api: Api, live: LiveTeam) -> None:
    room = live.room
    course = f"/api/courses/{room.course_a}"
    logins = [(room.s1.email, room.s1.token), (room.ta.email, room.ta.token),
              (room.admin.email, COURSE_KEY), (room.s3.email, SERVER_KEY)]  # fmt: skip
    for email, password in logins:
        await api.call("POST", "/api/auth/login", json={"email": email, "password": password})
    for header in (f"Token {room.s1.token}", f"Bearer {COURSE_KEY}", f"Bearer {SERVER_KEY}",
                   f"Bearer {room.s1.token}x", f"Basic {room.s1.token}"):  # fmt: skip
        await api.call("GET", "/api/me", headers={"Authorization": header})
        await api.call("POST", "/v1/chat/completions", headers={"Authorization": header},
                       json={"model": "course-a", "messages": []})  # fmt: skip
    ta = room.ta.token
    for change in ({"model_base_url": "ftp://nowhere", "model_api_key": COURSE_KEY},
                   {"model_api_key": COURSE_KEY + "x" * 2000},
                   {"title": None, "model_api_key": COURSE_KEY},
                   {"max_output_tokens": "many", "model_api_key": COURSE_KEY}):  # fmt: skip
        await api.call("PATCH", course, token=ta, json=change)
    # a model the server cannot build, with the key: every call is refused, saying why
    broken = {"model": "nosuchprovider:m", "model_base_url": live.upstream.base_url,
              "model_api_key": COURSE_KEY}  # fmt: skip
    admin = room.admin.token  # a course's endpoint (model_base_url) is set by an admin
    await api.call("PATCH", course, token=admin, json=broken)
    await asyncio.sleep(1.1)  # the course's model settings are re-read after CONFIG_TTL
    body = {"model": "course-a", "messages": [{"role": "user", "content": "hi"}]}
    await api.call("POST", "/v1/chat/completions", token=room.s1.token, json=body)
    await api.call("PATCH", course, token=admin, json=_course_model(live))
    # a budget that is spent: refused with what remains
    await api.call("PUT", f"{course}/budgets", token=ta,
                   json={"scope": "student", "user_id": room.s2.id, "period": "day",
                         "max_tokens": 1})  # fmt: skip
    await api.call("POST", "/v1/chat/completions", token=room.s2.token, json=body)
    reissued = f"{course}/students/{room.s2.id}/token"
    await api.call("POST", reissued, token=ta)


def _course_model(live: LiveTeam) -> dict[str, Any]:
    return {"model": "fake-model", "model_base_url": live.upstream.base_url,
            "model_api_key": COURSE_KEY}  # fmt: skip


async def drive(live: LiveTeam) -> None:
    """Every feature once (the responses are recorded in ``live.exchanges``)."""
    async with Api(live.url, live.exchanges) as api:
        room = live.room
        course = f"/api/courses/{room.course_a}"
        await api.call("PATCH", course, token=room.admin.token, json=_course_model(live))
        for path in (course, "/api/courses", "/api/me", "/openapi.json"):
            await api.call("GET", path, token=room.ta.token)
        await _gateway(api, live)
        await _sessions(api, live)
        await _logins_and_errors(api, live)
        for path in (f"{course}/usage", f"{course}/remaining", f"{course}/budgets",
                     f"{course}/members", "/api/me/tokens", "/api/users"):  # fmt: skip
            await api.call("GET", path, token=room.admin.token)
        await _audit(api, live)


# -- what the service produced -------------------------------------------------------------------


@dataclass
class Evidence:
    exchanges: list[Exchange]
    logs: list[tuple[str, str]]
    tables: dict[tuple[str, str], list[str]]  # (table, column): every value, as text
    files: dict[str, bytes]  # every file in the data directory
    keys_used: set[str]
    passwords: dict[str, str]


def _dump(path: Path) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    with sqlite3.connect(path) as db:
        db.text_factory = lambda raw: raw.decode("utf-8", "replace")
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in names:
            cursor = db.execute(f'SELECT * FROM "{table}"')  # the names come from the file
            columns = [d[0] for d in cursor.description]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                    out.setdefault((table, column), []).append(str(text))
    return out


@pytest.fixture(scope="module")
def evidence(live_team: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evidence]:
    data = tmp_path_factory.mktemp("secrets")
    logs = Logging()
    logs.install()
    upstream = EchoingUpstream()
    try:
        with live_team(data, upstream, model_api_key=SERVER_KEY) as live:
            logs.install()  # again: uvicorn has configured its loggers by now
            upstream.server = live.upstream
            live.run(drive(live))
            assert live.team.first_admin is not None
            passwords = {
                "the admin's password": live.team.first_admin.password,
                "a teacher's password": live.room.ta.password,
            }
            exchanges, keys_used = live.exchanges, live.upstream.keys_seen()
        tables = _dump(data / "team.db")
        files = {str(p): p.read_bytes() for p in data.rglob("*") if p.is_file()}
        yield Evidence(exchanges, logs.capture.records, tables, files, keys_used, passwords)
    finally:
        logs.remove()


def _found(secret: str, text: str) -> bool:
    return secret.lower() in text.lower()


def _issued(evidence: Evidence) -> dict[str, str]:
    """Every token and login cookie any response carried (by value: what it is)."""
    found: dict[str, str] = {}
    for exchange in evidence.exchanges:
        for token in TOKEN.findall(exchange.everything()):
            found[token] = "a personal token"
        for name, value in exchange.headers:
            if name.lower() == "set-cookie" and value.startswith("agentica_session="):
                cookie = value.split(";", 1)[0].split("=", 1)[1]
                if cookie:
                    found[cookie] = "a login cookie"
    return found


# -- the tests -----------------------------------------------------------------------------------


def test_the_keys_were_used_and_the_features_driven(evidence: Evidence) -> None:
    """The positive control: the upstream was called with both keys, echoed them in errors the
    service received, and the service answered the drive with the statuses expected."""
    assert {COURSE_KEY, SERVER_KEY} <= evidence.keys_used
    statuses = {(e.method, e.path.split("?")[0], e.status) for e in evidence.exchanges}
    assert ("POST", "/v1/chat/completions", 200) in statuses
    assert {s for m, p, s in statuses if p == "/v1/chat/completions"} >= {200, 401, 429, 502}
    assert ("POST", "/api/auth/login", 401) in statuses
    assert any(p.endswith("/audit/export") and s == 200 for _, p, s in statuses)
    tools = [e for e in evidence.exchanges if "tool_call_completed" in e.text()]
    assert tools, "no session event shows a tool call"
    assert len(_issued(evidence)) >= 8
    assert evidence.logs, "no log record was captured"


def test_no_response_shows_a_provider_key(evidence: Evidence) -> None:
    shown = [
        f"{e.method} {e.path} -> {e.status}: {name}"
        for e in evidence.exchanges
        for name, key in KEYS.items()
        if _found(key, e.everything())
    ]
    assert not shown, "responses show a provider key:\n" + "\n".join(shown)


def _leaking_logs(evidence: Evidence, service: bool) -> list[str]:
    return [
        f"[{logger}] {text[:600]}"
        for logger, text in evidence.logs
        if logger.startswith(SERVICE_LOGGERS) == service
        for key in KEYS.values()
        if _found(key, text)
    ]


def test_no_log_record_of_the_service_shows_a_provider_key(evidence: Evidence) -> None:
    leaks = _leaking_logs(evidence, service=True)
    assert not leaks, f"{len(leaks)} log records show a key:\n" + "\n".join(leaks[:20])


def test_no_log_record_of_a_library_at_debug_shows_a_provider_key(evidence: Evidence) -> None:
    """The libraries under the service (SQLAlchemy, the database drivers, the HTTP clients)
    logging at DEBUG, as an operator hunting a problem would switch them on."""
    leaks = _leaking_logs(evidence, service=False)
    assert not leaks, f"{len(leaks)} log records show a key:\n" + "\n".join(leaks[:20])


def test_the_database_keeps_course_a_key_only_sealed(evidence: Evidence) -> None:
    kept = [
        f"{table}.{column}: {name}"
        for (table, column), values in evidence.tables.items()
        for name, key in KEYS.items()
        if any(_found(key, v) for v in values)
    ]
    assert not kept, "the database shows a key:\n" + "\n".join(kept)
    sealed = [v for v in evidence.tables[KEY_COLUMN] if v and v.startswith("fernet:")]
    assert sealed, "course A's key is not stored sealed"
    raw = [p for p, data in evidence.files.items() for k in KEYS.values() if k.encode() in data]
    assert not raw, f"a key is in the raw bytes of {raw}"


def test_a_token_or_cookie_appears_only_in_the_response_that_issued_it(
    evidence: Evidence,
) -> None:
    problems = []
    for value, what in _issued(evidence).items():
        carried = [e for e in evidence.exchanges if _found(value, e.everything())]
        if len(carried) != 1:
            where = ", ".join(f"{e.method} {e.path} -> {e.status}" for e in carried)
            problems.append(f"{what} {value[:8]}... is in {len(carried)} responses: {where}")
    assert not problems, "\n".join(problems)


def test_no_token_cookie_or_password_is_in_the_logs_the_database_or_its_files(
    evidence: Evidence,
) -> None:
    secrets_ = {
        value[:8] + "... (" + what + ")": value for value, what in _issued(evidence).items()
    }
    secrets_.update(evidence.passwords)
    problems = []
    for name, value in secrets_.items():
        problems += [f"{name} in a log record of {logger}" for logger, text in evidence.logs
                     if _found(value, text)]  # fmt: skip
        problems += [f"{name} in {table}.{column}" for (table, column), values
                     in evidence.tables.items()
                     if any(_found(value, v) for v in values)]  # fmt: skip
        problems += [f"{name} in the file {path}" for path, data in evidence.files.items()
                     if value.encode() in data]  # fmt: skip
    assert not problems, "\n".join(sorted(set(problems)))
