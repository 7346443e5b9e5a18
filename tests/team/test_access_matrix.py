"""The access matrix: every operation of the running app's OpenAPI schema, called by everyone who
must not reach student S1's things (or course A's), expects a refusal.

The operations come from ``GET /openapi.json``, never from a hand list: a new route is probed the
day it lands. Each path parameter is filled with S1's (or course A's) identifier by its name
(``PATH_IDS``; an unknown name fails, so a new route must be mapped), each body is the smallest
valid one its schema allows, with S1's identifiers in fields that name one. Callers: S3 (a
student of course B), TB (B's teacher), S2 (S1's classmate) and, on A's teacher routes, S1
itself. Every test prints its table of (method, path, who, status, verdict) and fails listing
each violation; a positive control checks that the identifiers really reach S1's things.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.team.conftest import SESSION_FILE, Api, Classroom, Exchange, LiveTeam

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
READ_FOR = 3.0  # seconds of a stream that does not end (an SSE follow) read before giving up

# Operations under /api/courses/{course_id} that a student of the course may use; every other
# operation there is a teacher's, and a student gets 403 on it. A new student route goes here.
STUDENT_COURSE_ROUTES = frozenset(
    {
        ("GET", "/api/courses/{course_id}"),
        ("GET", "/api/courses/{course_id}/remaining"),
        ("GET", "/api/courses/{course_id}/usage"),
        ("GET", "/api/courses/{course_id}/knowledge"),
        ("GET", "/api/courses/{course_id}/knowledge/search"),
        ("GET", "/api/courses/{course_id}/shared-answers"),
    }
)
# Operations that answer without credentials (everything else is a 401 for an anonymous caller).
ANONYMOUS = frozenset({("POST", "/api/auth/login")})
SERVER_CHAIN = "server"  # the course id of the server-wide audit chain (admins only)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    spec: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.path

    def params(self, where: str) -> list[dict[str, Any]]:
        return [p for p in self.spec.get("parameters", []) if p.get("in") == where]

    def body_schema(self) -> dict[str, Any] | None:
        content = (self.spec.get("requestBody") or {}).get("content") or {}
        media = content.get("application/json")
        return None if media is None else media.get("schema", {})


@dataclass
class Row:
    method: str
    path: str
    who: str
    status: int
    verdict: str  # "ok" or what is wrong


@dataclass
class Matrix:
    """The probes' rows; ``violations`` are the rows whose verdict is not ``ok``."""

    rows: list[Row] = field(default_factory=list)

    def add(self, op: Operation, who: str, status: int, problem: str = "") -> None:
        self.rows.append(Row(op.method, op.path, who, status, problem or "ok"))

    @property
    def violations(self) -> list[Row]:
        return [r for r in self.rows if r.verdict != "ok"]

    def table(self) -> str:
        lines = [f"{'method':7} {'path':52} {'who':5} {'status':6} verdict"]
        lines += [
            f"{r.method:7} {r.path:52} {r.who:5} {r.status:<6} {r.verdict}" for r in self.rows
        ]
        return "\n".join(lines)

    def check(self) -> None:
        print(self.table())
        bad = self.violations
        assert self.rows, "the matrix probed nothing"
        assert not bad, f"{len(bad)} access violations:\n" + "\n".join(
            f"{r.method} {r.path} as {r.who}: {r.status}: {r.verdict}" for r in bad
        )


# -- the schema ----------------------------------------------------------------------------------


def operations(schema: dict[str, Any]) -> list[Operation]:
    ops = []
    for path, item in schema["paths"].items():
        shared = item.get("parameters", [])
        for method, spec in item.items():
            if method in METHODS:
                spec = {**spec, "parameters": [*shared, *spec.get("parameters", [])]}
                ops.append(Operation(method.upper(), path, spec))
    return ops


def _resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = spec
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _choice(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The first variant of an ``anyOf``/``oneOf`` that is not null; ``allOf`` merged."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            variants = [_resolve(v, spec) for v in schema[key]]
            real = [v for v in variants if v.get("type") != "null"]
            return real[0] if real else variants[0]
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, spec))
        return merged
    return schema


def _string(schema: dict[str, Any]) -> str:
    size = max(int(schema.get("minLength", 1)), 1)
    size = min(size, int(schema.get("maxLength", size)))
    return "x" * size


def _number(schema: dict[str, Any]) -> float:
    low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
    return min(max(low, 1), schema.get("maximum", max(low, 1)))


def example(schema: dict[str, Any], spec: dict[str, Any], name: str, ids: dict[str, str]) -> Any:
    """The smallest valid value of ``schema`` (a field called ``name``); a field named like an
    identifier in ``ids`` gets that identifier."""
    schema = _choice(_resolve(schema, spec), spec)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if name in ids and kind in ("string", None):
        return ids[name]
    if name in KNOWN_FIELDS:
        return KNOWN_FIELDS[name]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        wanted = [*schema.get("required", []), *(k for k in props if k in ids)]
        return {k: example(props.get(k, {}), spec, k, ids) for k in dict.fromkeys(wanted)}
    if kind == "array":
        return [example(schema.get("items", {}), spec, name, ids)]
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return int(_number(schema))
    if kind == "number":
        return float(_number(schema))
    if kind == "boolean":
        return False
    return None


# -- the probes ----------------------------------------------------------------------------------


@dataclass
class Request:
    """One probe of an operation: its URL, body and which of S1's/A's identifiers it carries."""

    op: Operation
    url: str
    body: Any
    in_path: set[str]
    in_body: set[str]


def path_ids(room: Classroom) -> dict[str, str]:
    """What each path parameter is filled with: S1's things, course A."""
    return {
        "course_id": room.course_a,
        "user_id": room.s1.id,
        "session_id": room.s1_session_id,
        "token_id": room.s1_token_id,
        "budget_id": room.s1_budget_id,
        "path": SESSION_FILE.lstrip("/"),
        "op_id": "op1",  # an operation of S1's session (the id its lanes would give)
        "name": "syllabus.md",  # course A's material
        "answer_id": "a_shared",  # course A's shared answer (the id need not exist)
    }


def field_ids(room: Classroom) -> dict[str, str]:
    """What body fields and query parameters named like an identifier are filled with (a
    gateway ``model`` is a course's name)."""
    return {**path_ids(room), "actor_id": room.s1.id, "email": room.s1.email, "model": "course-a"}


# Values for fields whose schema says too little to build a valid one.
KNOWN_FIELDS: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}]}


def build(op: Operation, room: Classroom, spec: dict[str, Any], course: str) -> Request:
    """The probe of ``op`` with S1's identifiers (``course`` as the course id); ``KeyError``
    names a path parameter the matrix does not know."""
    ids = {**path_ids(room), "course_id": course}
    url, in_path = op.path, set()
    for param in op.params("path"):
        value = ids[param["name"]]  # KeyError: a new kind of identifier
        url = url.replace("{" + param["name"] + "}", value)
        in_path.add(value)
    fields = {**field_ids(room), "course_id": course}
    query = {}
    for param in op.params("query"):
        if param["name"] in fields:
            query[param["name"]] = fields[param["name"]]
        elif param.get("required"):
            query[param["name"]] = example(param.get("schema", {}), spec, param["name"], fields)
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    schema = op.body_schema()
    body = None if schema is None else example(schema, spec, "", fields)
    carried = set(query.values()) | _strings(body)
    return Request(op, url, body, in_path, {v for v in fields.values() if v in carried})


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


async def send(api: Api, request: Request, who: str, token: str | None) -> Exchange:
    kwargs: dict[str, Any] = {} if request.body is None else {"json": request.body}
    return await api.call(
        request.op.method, request.url, who=who, token=token, read_for=READ_FOR, **kwargs
    )


def private_of_s1(room: Classroom) -> dict[str, str]:
    """S1's identifiers that nobody but S1 (and A's teachers) may see, by what they are."""
    return {
        "S1's id": room.s1.id,
        "S1's e-mail": room.s1.email,
        "S1's session": room.s1_session_id,
        "S1's token id": room.s1_token_id,
        "S1's budget": room.s1_budget_id,
    }


def leaks(exchange: Exchange, secret: dict[str, str]) -> str:
    """What of ``secret`` the response shows ("" for nothing)."""
    text = exchange.everything()
    return ", ".join(name for name, value in secret.items() if value in text)


def judge_outsider(request: Request, done: Exchange, secret: dict[str, str]) -> str:
    """The verdict on a caller who must not reach ``secret`` (S1's things, and course A for
    someone outside it) nor the server-wide chain."""
    if done.status >= 500:
        return "a server error"
    touched = request.in_path & {*secret.values(), SERVER_CHAIN}
    if touched and done.status not in (403, 404):
        return f"expected 403 or 404 for someone else's {', '.join(sorted(touched))}"
    carried = request.in_body & set(secret.values())
    unauthorized = done.status == 401 and request.op.key not in ANONYMOUS
    if carried and request.op.method != "GET" and (done.status < 400 or unauthorized):
        return "a change that names someone else's things was not refused with a 4xx"
    if 200 <= done.status < 300 and (shown := leaks(done, secret)):
        return f"the response shows {shown}"
    return ""


# -- the service ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(live_team: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveTeam]:
    with live_team(tmp_path_factory.mktemp("matrix")) as running:
        yield running


@pytest.fixture(scope="module")
def schema(live: LiveTeam) -> dict[str, Any]:
    async def fetch() -> dict[str, Any]:
        async with Api(live.url) as api:
            done = await api.call("GET", "/openapi.json")
            assert done.status == 200, done.text()
            result: dict[str, Any] = done.json()
            return result

    return live.run(fetch())


@pytest.fixture
async def api(live: LiveTeam) -> AsyncIterator[Api]:
    async with Api(live.url) as client:
        yield client


def _probes(schema: dict[str, Any], room: Classroom) -> Iterator[Request]:
    """Every operation once with course A and, if it takes a course, once with ``server`` (the
    server-wide audit chain, for admins only)."""
    for op in operations(schema):
        yield build(op, room, schema, room.course_a)
        if any(p["name"] == "course_id" for p in op.params("path")):
            yield build(op, room, schema, SERVER_CHAIN)


# -- the tests -----------------------------------------------------------------------------------


def test_every_path_parameter_of_the_schema_is_mapped(
    schema: dict[str, Any], live: LiveTeam
) -> None:
    unknown = sorted(
        f"{op.method} {op.path}: {{{param['name']}}}"
        for op in operations(schema)
        for param in op.params("path")
        if param["name"] not in path_ids(live.room)
    )
    assert not unknown, (
        "the access matrix does not know whose identifier these path parameters take; map "
        "each in path_ids():\n" + "\n".join(unknown)
    )
    assert len(operations(schema)) >= 30, "the schema lost its routes"


async def test_outsiders_reach_nothing_of_course_a_or_s1(
    schema: dict[str, Any], live: LiveTeam, api: Api
) -> None:
    """S3 (a student of B) and TB (B's teacher): 403/404 on anything of A's or S1's; never a
    5xx; no 2xx shows S1's or A's identifiers."""
    room, matrix = live.room, Matrix()
    secret = {**private_of_s1(room), "course A": room.course_a}
    for request in _probes(schema, room):
        for who, person in (("S3", room.s3), ("TB", room.tb)):
            done = await send(api, request, who, person.token)
            matrix.add(request.op, who, done.status, judge_outsider(request, done, secret))
    matrix.check()


def _is_teacher_route(request: Request) -> bool:
    names = {p["name"] for p in request.op.params("path")}
    return "course_id" in names and request.op.key not in STUDENT_COURSE_ROUTES


async def test_a_classmate_reaches_nothing_of_s1(
    schema: dict[str, Any], live: LiveTeam, api: Api
) -> None:
    """S2 (in course A with S1): 403/404 on S1's own things, 403 on A's teacher routes, and
    what A shows its students never shows S1's things."""
    room, matrix = live.room, Matrix()
    secret = private_of_s1(room)
    for request in _probes(schema, room):
        done = await send(api, request, "S2", room.s2.token)
        problem = judge_outsider(request, done, secret)
        own_course = room.course_a in request.in_path
        if not problem and own_course and _is_teacher_route(request) and done.status != 403:
            problem = "a student on a teacher route of their own course: expected 403"
        matrix.add(request.op, "S2", done.status, problem)
    matrix.check()


async def test_a_student_gets_403_on_the_teacher_routes_of_their_course(
    schema: dict[str, Any], live: LiveTeam, api: Api
) -> None:
    """S1 on every teacher route of course A, with S1's own identifiers: 403."""
    room, matrix = live.room, Matrix()
    for op in operations(schema):
        request = build(op, room, schema, room.course_a)
        if not _is_teacher_route(request):
            continue
        done = await send(api, request, "S1", room.s1.token)
        matrix.add(op, "S1", done.status, "" if done.status == 403 else "expected 403")
    matrix.check()


async def test_without_credentials_everything_is_401(
    schema: dict[str, Any], live: LiveTeam, api: Api
) -> None:
    room, matrix = live.room, Matrix()
    for op in operations(schema):
        request = build(op, room, schema, room.course_a)
        done = await send(api, request, "anon", None)
        if op.key in ANONYMOUS:
            problem = "" if 400 <= done.status < 500 else "expected a 4xx (wrong credentials)"
        else:
            problem = "" if done.status == 401 else "expected 401"
            if not problem and "error" not in done.json():
                problem = "the 401 does not say what is wrong"
        matrix.add(op, "anon", done.status, problem)
    for path in ("/openapi.json", "/docs"):
        done = await api.call("GET", path, who="anon")
        assert done.status == 200, f"{path} is for everyone: {done.status}"
    matrix.check()


async def test_the_owner_and_the_teacher_reach_what_the_matrix_probes(
    schema: dict[str, Any], live: LiveTeam, api: Api
) -> None:
    """The positive control: every read the matrix probes with S1's identifiers succeeds for S1
    or for A's teacher, so the refusals above are refusals and not wrong identifiers."""
    room, matrix = live.room, Matrix()
    for op in operations(schema):
        if op.method != "GET" or not op.params("path"):
            continue
        request = build(op, room, schema, room.course_a)
        statuses = []
        for who, person in (("S1", room.s1), ("TA", room.ta)):
            done = await send(api, request, who, person.token)
            statuses.append(done.status)
            matrix.add(op, who, done.status)
            if 200 <= done.status < 300:
                break
        if not any(200 <= s < 300 for s in statuses):
            matrix.add(op, "both", statuses[-1], "neither S1 nor TA reaches it: fix the ids")
    matrix.check()
