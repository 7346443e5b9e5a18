"""Fuzzing the running service over real HTTP: schemathesis and hand-made hostile requests.

Schemathesis generates requests for every operation of ``GET /openapi.json`` (valid ones, and
invalid ones) with a student's and a teacher's token, the path parameters their own things (so
the handlers behind the access checks are reached) or generated; no answer may be a 5xx, and an
answer the schema documents must conform to it. The hand-made cases: bodies over
``max_body_bytes`` (declared, chunked, lying), malformed JSON, wrong types, huge strings, NUL
and control characters, path parameters with ``../``, ``%00`` and thousands of characters; each
gets a 4xx whose message says what was wrong, and afterwards the server still serves and
nothing it had accepted is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from tests.postgres import Cluster
from tests.team.conftest import Api, Classroom, Exchange, LiveTeam

MAX_BODY = 4096
EXAMPLES = 3  # generated requests per operation, caller and mode (bounded: the file runs < 90 s)
POSITIVE, NEGATIVE = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.fixture(scope="module")
def live(live_team: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveTeam]:
    # The fuzzer keeps this thread busy generating, so the server's thread waits for the GIL:
    # that is not a blocked event loop, and the loop is not watched here (the other modules do).
    path = tmp_path_factory.mktemp("fuzz")
    with live_team(path, watch_loop=False, max_body_bytes=MAX_BODY) as running:
        yield running


@pytest.fixture
async def api(live: LiveTeam) -> AsyncIterator[Api]:
    async with Api(live.url) as client:
        yield client


# -- schemathesis --------------------------------------------------------------------------------


def _own_things(room: Classroom, fuzz_course: str, fuzz_session: str) -> dict[str, dict[str, str]]:
    """The path parameters each caller's requests are pinned to: their own things (the
    teacher works on a course of their own with no students, so a fuzzed model setting or
    budget breaks nothing the other callers use; the student on a session of their own, which
    a fuzzed DELETE may delete)."""
    return {
        "student": {
            "course_id": room.course_a,
            "user_id": room.s1.id,
            "session_id": fuzz_session,
            "token_id": room.s1_token_id,
            "budget_id": room.s1_budget_id,
            "path": "notes.md",
        },
        "teacher": {
            "course_id": fuzz_course,
            "user_id": room.s2.id,
            "budget_id": room.s1_budget_id,
        },
    }


@dataclass
class Finding:
    operation: str
    who: str
    mode: str
    problem: str


def _fuzz_operation(
    operation: Any, url: str, token: str, pinned: dict[str, str] | None, mode: Any
) -> str | None:
    """Run ``EXAMPLES`` generated requests; the first failure's description, or ``None``."""
    names = {p.name for p in operation.path_parameters}
    fixed = {k: v for k, v in (pinned or {}).items() if k in names} or None
    query = {"follow": "false"} if any(p.name == "follow" for p in operation.query) else None
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed, query=query)
    session = requests.Session()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(
            base_url=url, session=session, headers={"Authorization": f"Bearer {token}"}, timeout=20
        )
        case.validate_response(response, checks=CHECKS)

    try:
        run()
    except (Exception, BaseExceptionGroup) as exc:  # reported with the others at the end
        return f"{type(exc).__name__}: {str(exc)[:1500]}"
    finally:
        session.close()
    return None


def test_schemathesis_finds_no_server_error_and_no_nonconforming_answer(live: LiveTeam) -> None:
    room = live.room

    async def create(token: str, path: str, body: dict[str, Any]) -> str:
        async with Api(live.url) as api:
            done = await api.call("POST", path, token=token, json=body)
            assert done.status == 201, done.text()
            created: str = done.json()["id"]
            return created

    course = live.run(create(room.ta.token, "/api/courses", {"name": "fuzz-course"}))
    session = live.run(create(room.s1.token, "/api/sessions", {"course_id": room.course_a}))
    pins = _own_things(room, course, session)
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    findings: list[Finding] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 30
    # what deletes comes last, so the operations before it still reach the things it deletes
    operations.sort(key=lambda operation: operation.method.upper() == "DELETE")
    callers = {"student": room.s1.token, "teacher": room.ta.token}
    for number, operation in enumerate(operations):
        # valid requests on each caller's own things; invalid ones (ids generated too) from
        # one caller per operation, in turn
        runs = [(who, POSITIVE, pins[who]) for who in callers]
        runs.append((("student", "teacher")[number % 2], NEGATIVE, None))
        for who, mode, pinned in runs:
            problem = _fuzz_operation(operation, live.url, callers[who], pinned, mode)
            if problem:
                findings.append(Finding(operation.label, who, mode.value, problem))
    assert not findings, f"{len(findings)} findings:\n\n" + "\n\n".join(
        f"{f.operation} as {f.who} ({f.mode}):\n{f.problem}" for f in findings
    )


# -- hand-made hostile requests ------------------------------------------------------------------


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes

    def message(self) -> str:
        """The error message of a JSON error body ("" if there is none)."""
        try:
            return str(json.loads(self.body)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            return ""


async def raw_http(url: str, head: bytes, body: Iterable[bytes] = ()) -> Raw:
    """Send ``head`` (the request line and headers, without the blank line) and the ``body``
    pieces as they are, exactly; read the whole answer (the connection is closed after it).
    A server that answers before the body is sent may close the connection meanwhile."""
    address = urlsplit(url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        writer.write(head + b"\r\nConnection: close\r\n\r\n")
        with contextlib.suppress(ConnectionError):
            for piece in body:
                writer.write(piece)
                await writer.drain()
        answer = b""
        async with asyncio.timeout(20):
            with contextlib.suppress(ConnectionResetError):  # (a reset after the answer)
                while piece := await reader.read(65536):
                    answer += piece
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    top, _, payload = answer.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    if headers.get("transfer-encoding", headers.get("Transfer-Encoding")) == "chunked":
        payload = _unchunk(payload)
    return Raw(int(lines[0].split()[1]), headers, payload)


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, rest = data.partition(b"\r\n")
        length = int(size, 16)
        if length == 0:
            break
        out, data = out + rest[:length], rest[length + 2 :]
    return out


def _request(method: str, path: str, token: str, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}"]
    return "\r\n".join([*lines, *extra]).encode()


def _chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    """A JSON body of ``total`` bytes, chunked (no Content-Length)."""
    text = json.dumps({"text": "x" * (total - 11)}).encode()
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def _problem(status: int, message: str, *, expect: Iterable[int], says: Iterable[str]) -> str:
    """ "" if ``status`` is expected and ``message`` says all of ``says`` (case-insensitive)."""
    wanted = set(expect)
    if status not in wanted:
        return f"status {status}, expected {sorted(wanted)} (message {message[:200]!r})"
    missing = [word for word in says if word.lower() not in message.lower()]
    return f"the message {message[:200]!r} does not say {missing}" if missing else ""


def _fail_on(problems: dict[str, str]) -> None:
    bad = {case: problem for case, problem in problems.items() if problem}
    assert not bad, "\n".join(f"{case}: {problem}" for case, problem in bad.items())


async def test_oversized_bodies_are_refused_with_413(live: LiveTeam, api: Api) -> None:
    room, problems = live.room, {}
    messages = f"/api/sessions/{room.s1_session_id}/messages"
    big = {"text": "x" * (MAX_BODY + 10)}
    done = await api.call("POST", messages, token=room.s1.token, json=big)
    problems["declared length"] = _problem(
        done.status, _message(done.body), expect={413}, says=[str(MAX_BODY), "max_body_bytes"]
    )
    for name, path in (("a JSON route", messages), ("the gateway", "/v1/chat/completions")):
        head = _request(
            "POST", path, room.s1.token, "Content-Type: application/json",
            "Transfer-Encoding: chunked",
        )  # fmt: skip
        answer = await raw_http(live.url, head, _chunks(MAX_BODY * 4))
        problems[f"chunked, {name}"] = _problem(
            answer.status, answer.message(), expect={413}, says=[str(MAX_BODY)]
        )
    head = _request("POST", messages, room.s1.token, f"Content-Length: {10**15}")
    answer = await raw_http(live.url, head)
    problems["a huge declared length"] = _problem(
        answer.status, answer.message(), expect={413}, says=[str(MAX_BODY)]
    )
    head = _request("POST", messages, room.s1.token, "Content-Length: 12abc")
    answer = await raw_http(live.url, head)  # (a body sent after the server closed: a reset)
    problems["a length that is not a number"] = _problem(
        answer.status, "", expect=range(400, 500), says=[]
    )
    _fail_on(problems)


def _message(body: bytes) -> str:
    return Raw(0, {}, body).message()


async def test_malformed_bodies_get_a_4xx_that_names_the_problem(live: LiveTeam, api: Api) -> None:
    room, problems = live.room, {}
    course = f"/api/courses/{room.course_a}"
    cases: list[tuple[str, str, str, Any, bytes | None, set[int], list[str]]] = [
        ("not JSON", "POST", "/api/sessions", None, b'{"course_id": ', {422}, ["JSON"]),
        ("not JSON, gateway", "POST", "/v1/chat/completions", None, b"{nope", {400}, ["JSON"]),
        ("JSON but a list", "POST", "/api/sessions", [1, 2], None, {422}, ["object"]),
        ("a number for a name", "POST", "/api/me/tokens", {"name": 5}, None, {422}, ["name"]),
        ("a string for a count", "PUT", f"{course}/budgets",
         {"scope": "course", "period": "day", "max_tokens": "lots"}, None, {422},
         ["max_tokens"]),
        ("an unknown field", "PATCH", course, {"colour": "red"}, None, {422}, ["colour"]),
        ("a null title", "PATCH", course, {"title": None}, None, {400, 422}, ["title"]),
        ("a string over its limit", "PATCH", course, {"title": "t" * 3000}, None, {422},
         ["title"]),
        ("a name over its limit", "POST", "/api/courses", {"name": "n" * 65}, None, {422},
         ["name"]),
        ("an empty message", "POST", f"/api/sessions/{room.s1_session_id}/messages",
         {"text": ""}, None, {422}, ["text"]),
        ("no messages, gateway", "POST", "/v1/chat/completions",
         {"model": "course-a", "messages": []}, None, {400}, ["messages"]),
        ("a wrong role, gateway", "POST", "/v1/chat/completions",
         {"model": "course-a", "messages": [{"role": "wizard", "content": "x"}]}, None, {400},
         ["role"]),
    ]  # fmt: skip
    for name, method, path, body, data, expect, says in cases:
        token = room.ta.token if path.startswith(course) else room.s1.token
        headers = {"Content-Type": "application/json"}
        sent = {"json": body} if data is None else {"data": data, "headers": headers}
        done = await api.call(method, path, token=token, **sent)
        problems[name] = _problem(done.status, _message(done.body), expect=expect, says=says)
    _fail_on(problems)


HOSTILE_TEXTS = {
    "NUL": "a\x00b",
    "control characters": "\x07\x1b[31mred\x1b[0m\r\n\t",
    "a lone surrogate": "x\ud800y",
    "right-to-left override": "\u202etxt.exe",
    "emoji and combining marks": "😀 e\u0301 \ufdfd",
    "non-characters": "\ufffe\uffff\U0010ffff",
}


async def test_hostile_strings_are_stored_as_sent_or_refused(live: LiveTeam, api: Api) -> None:
    """NUL, control characters, lone surrogates and other odd text in names, titles, messages
    and logins: a 2xx that keeps the text as sent, or a 4xx with a message; never a 5xx."""
    _fail_on(await _hostile_strings(live, api))


def test_hostile_strings_on_postgresql(live_team: Any, pg_cluster: Cluster, tmp_path: Path) -> None:
    """The same on PostgreSQL, whose text cannot hold NUL; afterwards the course's audit and
    S1's session still read."""
    url = pg_cluster.create_database(f"fuzz_{os.getpid()}_{secrets.token_hex(4)}")
    with live_team(tmp_path, database_url=url, watch_loop=False) as running:

        async def probe() -> dict[str, str]:
            async with Api(running.url) as client:
                problems = await _hostile_strings(running, client)
            try:
                state = await _state(running)
            except AssertionError as exc:
                problems["reading the state afterwards"] = str(exc).split("\n")[0]
            else:
                damaged = [c for c in state["verify"] if not c["ok"]]
                problems["the audit chain afterwards"] = f"damaged: {damaged}" if damaged else ""
            return problems

        _fail_on(running.run(probe()))


async def _hostile_strings(live: LiveTeam, api: Api) -> dict[str, str]:
    room, problems = live.room, {}
    session = f"/api/sessions/{room.s1_session_id}"
    accepted: list[str] = []
    for label, text in HOSTILE_TEXTS.items():
        probes: list[tuple[str, str, str, Any, str | None]] = [
            ("a course title", "PATCH", f"/api/courses/{room.course_a}", {"title": text},
             "title"),
            ("a token name", "POST", "/api/me/tokens", {"name": text}, "name"),
            ("a session title", "POST", "/api/sessions",
             {"course_id": room.course_a, "title": text}, "title"),
            ("a message", "POST", f"{session}/messages", {"text": text}, "text"),
            ("a login", "POST", "/api/auth/login", {"email": text + "@x.org", "password": text},
             None),
            ("a gateway message", "POST", "/v1/chat/completions",
             {"model": "course-a", "messages": [{"role": "user", "content": text}]}, None),
        ]  # fmt: skip
        for what, method, path, body, echoed in probes:
            token = room.ta.token if "/courses/" in path else room.s1.token
            done = await api.call(method, path, token=token, json=body)
            problems[f"{label} in {what}"] = _judge_hostile(done, echoed, text)
            if what == "a message" and done.status == 202:
                accepted.append(text)
    problems["the accepted messages are kept"] = await _kept(api, live, accepted)
    return problems


def _judge_hostile(done: Exchange, echoed: str | None, text: str) -> str:
    if done.status >= 500:
        return f"a server error {done.status}: {done.text()[:200]}"
    if done.status >= 400 and not _message(done.body):
        return f"a {done.status} without a message"
    if done.status < 300 and echoed and done.json().get(echoed) != text:
        return f"stored {done.json().get(echoed)!r} instead of {text!r}"
    return ""


async def _kept(api: Api, live: LiveTeam, accepted: list[str]) -> str:
    """ "" once every accepted message is in the session's log (within a few seconds)."""
    path = f"/api/sessions/{live.room.s1_session_id}/messages"
    missing = accepted
    for _ in range(50):
        done = await api.call("GET", path, token=live.room.s1.token)
        if done.status != 200:
            return f"the messages do not read: {done.status} {done.text()[:200]}"
        kept = {m["text"] for m in done.json()}
        missing = [text for text in accepted if text not in kept]
        if not missing:
            return ""
        await asyncio.sleep(0.1)
    return f"accepted (202) but not in the session's log: {missing}"


async def test_hostile_path_parameters_get_a_4xx(live: LiveTeam) -> None:
    """``../``, ``%00``, encoded slashes and thousands of characters in path parameters,
    sent byte for byte (no client normalizes them): a 4xx that reveals nothing of the host."""
    room, problems = live.room, {}
    session = f"/api/sessions/{room.s1_session_id}"
    paths = {
        "dot-dot to the host": f"{session}/files/../../../../../../etc/passwd",
        "encoded dot-dot": f"{session}/files/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "dot-dot in the workspace": f"{session}/files/a/../../../etc/passwd",
        "an absolute path": f"{session}/files//etc/passwd",
        "dot-dot out of the session": "/api/sessions/../../etc/passwd",
        "an encoded session": "/api/sessions/..%2f..%2fetc%2fpasswd/files",
        "NUL in a file name": f"{session}/files/notes.md%00.txt",
        "NUL in an id": f"/api/courses/{room.course_a}%00",
        "NUL alone": "/api/users/%00",
        "bad percent-encoding": "/api/users/%zz%c3%28",
        "a long session id": "/api/sessions/" + "s" * 5000,
        "a long course id": "/api/courses/" + "c" * 5000 + "/usage",
        "a long token id": "/api/me/tokens/" + "t" * 5000,
        "a long file name": f"{session}/files/" + "f" * 5000,
    }
    for name, path in paths.items():
        method = "DELETE" if "/me/tokens/" in path else "GET"
        answer = await raw_http(live.url, _request(method, path, room.s1.token))
        problem = _problem(answer.status, "", expect=range(400, 500), says=[])
        if not problem and not answer.message():
            problem = f"a {answer.status} without a message: {answer.body[:200]!r}"
        if b"root:" in answer.body:
            problem = "it shows the host's /etc/passwd"
        problems[name] = problem
    _fail_on(problems)


# -- afterwards ----------------------------------------------------------------------------------


async def _state(live: LiveTeam) -> dict[str, Any]:
    """What the service had accepted: S1's messages and files, course A's members, budgets and
    audit, the server-wide audit, and whether the chains verify."""
    room = live.room
    session = f"/api/sessions/{room.s1_session_id}"
    course = f"/api/courses/{room.course_a}"
    async with Api(live.url) as api:
        reads = {
            "messages": (f"{session}/messages", room.s1.token),
            "files": (f"{session}/files", room.s1.token),
            "members": (f"{course}/members", room.ta.token),
            "budgets": (f"{course}/budgets", room.ta.token),
            "audit": (f"{course}/audit?limit=1000", room.ta.token),
            "server audit": ("/api/courses/server/audit?limit=1000", room.admin.token),
            "verify": (f"{course}/audit/verify", room.ta.token),
            "verify server": ("/api/courses/server/audit/verify", room.admin.token),
        }
        state = {}
        for name, (path, token) in reads.items():
            done = await api.call("GET", path, token=token)
            assert done.status == 200, f"{name}: {done.status} {done.text()[:300]}"
            state[name] = done.json()
    return state


@pytest.fixture(scope="module")
def baseline(live: LiveTeam) -> dict[str, Any]:
    """The state before any test of this module sent anything hostile."""
    return live.run(_state(live))


@pytest.fixture(autouse=True)
def _baseline_first(baseline: dict[str, Any]) -> None:
    """Every test takes the baseline first (so it is taken before the first one runs)."""


def _lost(before: list[dict[str, Any]], after: list[dict[str, Any]], key: str) -> list[Any]:
    now = {json.dumps(item.get(key), sort_keys=True) for item in after}
    return [item for item in before if json.dumps(item.get(key), sort_keys=True) not in now]


async def test_afterwards_the_server_serves_and_lost_nothing(
    live: LiveTeam, baseline: dict[str, Any]
) -> None:
    after = await _state(live)
    lost = {
        "messages": _lost(baseline["messages"], after["messages"], "seq"),
        "files": _lost(baseline["files"], after["files"], "path"),
        "members": _lost(baseline["members"], after["members"], "user"),
        "budgets": _lost(baseline["budgets"], after["budgets"], "id"),
        "audit": _lost(baseline["audit"], after["audit"], "hash"),
        "server audit": _lost(baseline["server audit"], after["server audit"], "hash"),
    }
    assert not any(lost.values()), f"lost: { {k: v for k, v in lost.items() if v} }"
    first = baseline["messages"][0]
    assert [m for m in after["messages"] if m["seq"] == first["seq"]] == [first]
    for chain in (*after["verify"], *after["verify server"]):
        assert chain["ok"], f"the audit chain {chain['chain']!r} is damaged: {chain}"
    assert len(after["audit"]) > len(baseline["audit"]), "the hostile requests left no record"
