"""The OpenAI-compatible gateway, called by the official ``openai`` client over real HTTP: the
service under uvicorn on 127.0.0.1, the course's model a scripted OpenAI-compatible server on
loopback. JSON and streamed completions, tool calls both ways, usage counted on the student's
budget, refusals as 429 before the model is called, courses kept apart, upstream failures as
502 with the hold released, a client leaving mid-stream, and the provider key nowhere."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import openai
import openai.resources.chat  # the client imports these lazily: not inside a test's event loop
import openai.resources.models
import pytest
import uvicorn
from openai import AsyncOpenAI

import agentica_team.api.accounts
import agentica_team.api.audit
import agentica_team.api.courses
import agentica_team.api.sessions
import agentica_team.gateway  # noqa: F401  (the app imports its routers when it is created)
from agentica.messages import AssistantMessage, ToolCall
from agentica.testing import FakeOpenAIServer, HTTPFault
from agentica.testing._server import ServerReply
from agentica.testing.openai_server import RawStream
from agentica_team.accounts import Course
from agentica_team.app import create_app
from agentica_team.budgets import Remaining
from agentica_team.db import Database
from agentica_team.principal import Principal
from agentica_team.service import Team
from agentica_team.settings import TeamSettings
from tests.team.server import sqlite_settings

KEY = "sk-proj-COURSEKEY-0123456789abcdefghijklmnop"
CAP = 256
ANSWER = "Hello from the class model."
del openai.resources.chat, openai.resources.models  # imported for their side effect only


class Upstream(FakeOpenAIServer):
    """The course's provider: answers with ``script`` and keeps each request's headers."""

    def __init__(self) -> None:
        super().__init__(lambda body: self.script(body))
        self.script: Callable[[dict[str, Any]], ServerReply] = lambda body: ANSWER
        self.headers: list[dict[str, str]] = []

    def _record(self, request: Any, body: dict[str, Any]) -> None:
        super()._record(request, body)
        self.headers.append(dict(request.headers))


@dataclass
class Gateway:
    """The service with course ``web-2026`` (teacher, student ``sam``; its model is ``upstream``
    with the key ``KEY``) and course ``css-2026`` (student ``ola``; model ``other``)."""

    url: str
    team: Team
    upstream: Upstream
    other: Upstream
    teacher: Principal
    web: Course
    css: Course
    sam: str
    sam_token: str
    ola: str
    ola_token: str
    clients: list[AsyncOpenAI] = field(default_factory=list)

    async def client(self, token: str | None = None) -> AsyncOpenAI:
        """An ``openai`` client with a student's token (Sam's by default), made on a worker
        thread: making one loads the CA certificates, 0.1-0.4 s."""
        made = await asyncio.to_thread(
            AsyncOpenAI, base_url=f"{self.url}/v1", api_key=token or self.sam_token, max_retries=0
        )
        self.clients.append(made)
        return made

    async def sams_budget(self) -> tuple[int, int]:
        """(reserved, used) tokens on Sam's own budget, once the settling under way is done
        (the gateway settles after answering)."""
        await self.team.models.meter.drain()
        remaining: list[Remaining] = await self.team.budgets.remaining(self.web.id, self.sam)
        (mine,) = [r for r in remaining if r.scope == "student"]
        return mine.reserved_tokens, mine.used_tokens

    async def records(self, kind: str, course: Course | None = None) -> list[Any]:
        await self.team.models.meter.drain()
        return await self.team.audit.search(course_id=(course or self.web).id, kind=kind)


@pytest.fixture(scope="module", autouse=True)
def _unfreeze() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _frozen_heap(_unfreeze: None) -> None:
    """Before each test, keep what is alive (pytest, every library, tiktoken's tables, earlier
    fixtures) out of the garbage collector's full passes: on a loaded 2-core machine one pass
    over the test process's heap takes 0.2-0.5 s, which the blocked-loop check reports as a
    blocked event loop."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An upgraded database, copied for each test (migrating takes a while). Before the tests,
    one round of every kind of call runs in a loop of its own: what the process does only the
    first time (the openai client's lazy imports and models, compiling statements) is not
    what the tests' blocked-loop check is about."""
    path = tmp_path_factory.mktemp("template") / "team.db"

    async def upgrade() -> None:
        database = Database(f"sqlite+aiosqlite:///{path}")
        await database.upgrade()
        await database.aclose()

    async def warm_up(directory: Path) -> None:
        shutil.copy(path, directory / "team.db")
        async for gw in _serve(directory):
            client = await gw.client()
            await client.models.list()
            gw.upstream.script = _weather
            await client.chat.completions.create(model="web-2026", messages=ASK, tools=[TOOL])
            stream = await client.chat.completions.create(
                model="web-2026", messages=ASK, tools=[TOOL], stream=True,
                stream_options={"include_usage": True},
            )  # fmt: skip
            async for _ in stream:
                pass

    asyncio.run(upgrade())
    asyncio.run(warm_up(tmp_path_factory.mktemp("warm-up")))
    return path


@pytest.fixture
async def gateway(template: Path, tmp_path: Path) -> AsyncIterator[Gateway]:
    await asyncio.to_thread(shutil.copy, template, tmp_path / "team.db")
    async for gw in _serve(tmp_path):
        yield gw


async def _serve(tmp_path: Path) -> AsyncIterator[Gateway]:
    """The service on the database in ``tmp_path``, provisioned (see ``Gateway``)."""
    upstream, other = Upstream(), Upstream()
    other.script = lambda body: "Hello from the CSS course."
    await upstream.start()
    await other.start()
    settings = sqlite_settings(tmp_path, max_output_tokens=CAP)
    try:
        async with _service(settings) as (url, team):
            gw = await _provision(url, team, upstream, other)
            team.models.config_ttl = 0.0
            yield gw
            for client in gw.clients:
                await client.close()
    finally:
        await upstream.stop()
        await other.stop()


@asynccontextmanager
async def _service(settings: TeamSettings) -> AsyncIterator[tuple[str, Team]]:
    """``tests.team.server.serve_team``, but the app's routes are prepared on a worker thread
    first: FastAPI builds them on an app's first request, 0.1-0.4 s of CPU in the event loop."""
    team = await Team.open(settings)
    app = await asyncio.to_thread(create_app, team=team)  # building the routes takes ~0.2 s
    await asyncio.to_thread(asyncio.run, _request_nothing(app))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", team
    finally:
        server.should_exit = True
        await task
        sock.close()
        await team.aclose()


async def _request_nothing(app: Any) -> None:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": "/api/-", "raw_path": b"/api/-", "query_string": b"",
             "root_path": "", "headers": [], "client": None, "server": None}  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    await app(scope, receive, send)


async def _provision(url: str, team: Team, upstream: Upstream, other: Upstream) -> Gateway:
    accounts = team.accounts
    user = await accounts.create_user("teacher@school.edu", role="teacher")
    teacher = Principal(user.id, user.email, user.name, "teacher", "token")
    courses = []
    for name, server in (("web-2026", upstream), ("css-2026", other)):
        course = await accounts.create_course(teacher, name)
        await accounts.update_course(
            course.id,
            actor=teacher.user_id,
            model="openai:gpt-4o-mini",
            model_base_url=server.base_url,
            model_api_key=KEY,
        )
        courses.append(course)
    web, css = courses
    (sam,) = await accounts.add_students(web, [("sam@school.edu", "Sam")], actor=user.id)
    (ola,) = await accounts.add_students(css, [("ola@school.edu", "Ola")], actor=user.id)
    await team.budgets.set_budget(web.id, scope="student", period="day", max_tokens=10**6)
    return Gateway(url, team, upstream, other, teacher, web, css,
                   sam.user.id, sam.token, ola.user.id, ola.token)  # fmt: skip


ASK = [{"role": "user", "content": "Say hello to the class."}]


# -- models, completions, streams --------------------------------------------------------------


async def test_models_are_the_callers_courses(gateway: Gateway) -> None:
    listed = await (await gateway.client()).models.list()
    assert [m.id for m in listed.data] == ["web-2026"]
    with pytest.raises(openai.AuthenticationError, match="token"):
        await (await gateway.client("agt_not-a-real-token-at-all")).models.list()


async def test_a_completion_through_the_openai_client_is_forwarded_counted_and_audited(
    gateway: Gateway,
) -> None:
    reply = await (await gateway.client()).chat.completions.create(model="web-2026", messages=ASK)
    assert reply.model == "web-2026" and reply.choices[0].message.content == ANSWER
    assert reply.choices[0].finish_reason == "stop"
    usage = reply.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0

    (sent,) = gateway.upstream.requests
    assert sent["model"] == "gpt-4o-mini" and sent["max_tokens"] == CAP
    assert sent["messages"] == ASK
    assert gateway.upstream.headers[0]["Authorization"] == f"Bearer {KEY}"

    assert await gateway.sams_budget() == (0, usage.prompt_tokens + usage.completion_tokens)
    (row,) = await gateway.team.budgets.usage(gateway.web.id, user_id=gateway.sam)
    assert (row.source, row.requests, row.input_tokens, row.output_tokens) == (
        "gateway", 1, usage.prompt_tokens, usage.completion_tokens,
    )  # fmt: skip
    assert row.cost_micros > 0  # gpt-4o-mini has a price
    (asked,) = await gateway.records("gateway_request")
    assert asked.actor_id == gateway.sam and asked.data["instruction"] == ASK[0]["content"]
    (call,) = await gateway.records("model_call")
    assert call.data["status"] == "ok" and call.data["source"] == "gateway"
    assert call.data["output_tokens"] == usage.completion_tokens


async def test_a_streamed_completion_with_usage(gateway: Gateway) -> None:
    gateway.upstream.script = lambda body: "one two three four five"
    stream = await (await gateway.client()).chat.completions.create(
        model="web-2026", messages=ASK, stream=True, stream_options={"include_usage": True}
    )
    pieces, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "one two three four five" and finish == "stop"
    assert usage is not None and usage.completion_tokens > 0
    assert await gateway.sams_budget() == (0, usage.prompt_tokens + usage.completion_tokens)
    (call,) = await gateway.records("model_call")
    assert call.data["status"] == "ok" and call.data["input_tokens"] == usage.prompt_tokens
    (asked,) = await gateway.records("gateway_request")
    assert asked.data["stream"] is True


TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALL = ToolCall(id="call_7", name="get_weather", arguments='{"city": "Oslo"}')


def _weather(body: dict[str, Any]) -> ServerReply:
    if body["messages"][-1]["role"] == "tool":
        return "It is sunny in Oslo."
    return AssistantMessage(tool_calls=[CALL])


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_pass_through_both_ways(gateway: Gateway, stream: bool) -> None:
    gateway.upstream.script = _weather
    client = await gateway.client()
    if stream:
        events = await client.chat.completions.create(
            model="web-2026", messages=ASK, tools=[TOOL], stream=True
        )
        calls: dict[int, dict[str, str]] = {}
        async for chunk in events:
            for choice in chunk.choices:
                for delta in choice.delta.tool_calls or []:
                    slot = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] += delta.id or ""
                    if delta.function is not None:
                        slot["name"] += delta.function.name or ""
                        slot["arguments"] += delta.function.arguments or ""
        (got,) = calls.values()
        call_id, name, arguments = got["id"], got["name"], got["arguments"]
    else:
        reply = await client.chat.completions.create(model="web-2026", messages=ASK, tools=[TOOL])
        assert reply.choices[0].finish_reason == "tool_calls"
        (tool_call,) = reply.choices[0].message.tool_calls or []
        assert tool_call.type == "function"
        call_id = tool_call.id
        name, arguments = tool_call.function.name, tool_call.function.arguments
    assert (call_id, name, json.loads(arguments)) == ("call_7", "get_weather", {"city": "Oslo"})
    assert gateway.upstream.requests[0]["tools"][0]["function"]["name"] == "get_weather"

    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }
    result = {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"}
    answer = await client.chat.completions.create(
        model="web-2026",
        tools=[TOOL],
        messages=[*ASK, assistant, result],
    )
    assert answer.choices[0].message.content == "It is sunny in Oslo."
    assert gateway.upstream.requests[1]["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_7", "content": "sunny, 21 C",
    }  # fmt: skip
    assert len(await gateway.records("model_call")) == 2


# -- which course ------------------------------------------------------------------------------


async def test_a_student_reaches_only_their_own_courses_model(gateway: Gateway) -> None:
    ola = await gateway.client(gateway.ola_token)
    # in one course, any model name means that course: Ola asking for web-2026 gets css-2026
    reply = await ola.chat.completions.create(model="web-2026", messages=ASK)
    assert reply.model == "css-2026"
    assert reply.choices[0].message.content == "Hello from the CSS course."
    assert gateway.upstream.requests == [] and len(gateway.other.requests) == 1
    assert await gateway.records("model_call") == []
    assert len(await gateway.records("model_call", gateway.css)) == 1
    # the only-course fallback also serves tools that insist on a model name of their own
    sam = await (await gateway.client()).chat.completions.create(model="gpt-4o", messages=ASK)
    assert sam.model == "web-2026"

    # in two courses the name must be one of them (with a personal token: Ola's course token
    # acts in its own course only)
    third = await gateway.team.accounts.create_course(gateway.teacher, "js-2026")
    await gateway.team.accounts.add_member(third.id, gateway.ola, "student",
                                           actor=gateway.teacher.user_id)  # fmt: skip
    ola = await gateway.client((await gateway.team.accounts.issue_token(gateway.ola)).token)
    with pytest.raises(openai.NotFoundError) as missing:
        await ola.chat.completions.create(model="web-2026", messages=ASK)
    assert "css-2026, js-2026" in str(missing.value)
    assert [m.id for m in (await ola.models.list()).data] == ["css-2026", "js-2026"]
    assert len(gateway.upstream.requests) == 1  # Sam's only


# -- refusals and failures ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_budget_refusal_is_a_429_before_the_model_is_called(
    gateway: Gateway, stream: bool
) -> None:
    team = gateway.team
    await team.budgets.set_budget(gateway.web.id, scope="student", user_id=gateway.sam,
                                  period="day", max_tokens=100)  # fmt: skip
    with pytest.raises(openai.RateLimitError) as refused:
        await (await gateway.client()).chat.completions.create(
            model="web-2026", messages=ASK, stream=stream
        )
    error = refused.value
    assert error.status_code == 429 and "budget" in str(error)
    body = error.body
    assert isinstance(body, dict) and body["type"] == "budget_exceeded"
    assert "resets_at" in json.dumps(body)
    assert gateway.upstream.requests == []  # nothing was spent
    assert await gateway.sams_budget() == (0, 0)
    (refusal,) = await gateway.records("model_refused")
    assert refusal.actor_id == gateway.sam


async def test_an_upstream_failure_is_a_502_and_the_hold_is_released(gateway: Gateway) -> None:
    gateway.upstream.script = lambda body: HTTPFault(500, headers={"Retry-After": "0"})
    with pytest.raises(openai.APIStatusError) as failed:
        await (await gateway.client()).chat.completions.create(model="web-2026", messages=ASK)
    assert failed.value.status_code == 502
    assert "the course's model failed" in str(failed.value)
    assert len(gateway.upstream.requests) == 3  # the provider adapter's retries
    assert await gateway.sams_budget() == (0, 0)
    (call,) = await gateway.records("model_call")
    assert call.data["status"] == "failed"


def _slow_pieces() -> Iterator[bytes]:
    for n in range(400):
        choice = {"index": 0, "delta": {"content": f"w{n} "}, "finish_reason": None}
        body = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
        yield b"data: " + json.dumps(body).encode() + b"\n\n"


async def test_a_client_leaving_mid_stream_pays_only_for_what_was_streamed(
    gateway: Gateway,
) -> None:
    gateway.upstream.script = lambda body: RawStream(_slow_pieces(), interval=0.05)
    stream = await (await gateway.client()).chat.completions.create(
        model="web-2026", messages=ASK, stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    await stream.close()  # the student's tool goes away after the first words
    for _ in range(200):  # the gateway notices and settles in the background
        calls = await gateway.records("model_call")
        if calls:
            break
        await asyncio.sleep(0.05)
    (call,) = calls
    assert call.data["status"] == "cancelled" and call.data["usage_estimated"] is True
    reserved, used = await gateway.sams_budget()
    assert reserved == 0
    assert 0 < call.data["output_tokens"] < 100  # a few words, not the 400 the model had
    assert used == call.data["input_tokens"] + call.data["output_tokens"]


async def test_malformed_requests_are_400s_that_say_what_is_wrong(gateway: Gateway) -> None:
    async with aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {gateway.sam_token}"}
    ) as http:
        url = f"{gateway.url}/v1/chat/completions"
        for body, expected in (
            (b"{not json", "not JSON"),
            (b"[1, 2]", "JSON object"),
            (b'{"model": "web-2026"}', "messages"),
            (b'{"model": "web-2026", "messages": [{"role": "wizard"}]}', "role"),
            (b'{"model": "web-2026", "messages": [{"role": "user"}], "n": 3}', "n must be 1"),
            (b'{"model": "web-2026", "messages": [{"role": "user"}], "max_tokens": -5}',
             "max_tokens"),
            (b'{"model": "web-2026", "messages": [{"role": "user"}], "stream": "yes"}', "stream"),
            (b'{"model": 7, "messages": [{"role": "user"}]}', "model"),
            (b'{"model": "web-2026", "messages": [7]}', "not a valid chat completion"),
            (b'{"model": "web-2026", "messages": [{"role": "user"}], "tools": [{"function": 1}]}',
             "not a valid chat completion"),
            (b'{"model": "web-2026", "messages": [{"role": "user"}], "stop": 5}',
             "not a valid chat completion"),
            (b'{"model": "web-2026", "messages": [{"role": "user", "content": "\\ud800"}]}',
             "unicode"),
            (b'{"model": "web-2026", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
             "nested"),
        ):  # fmt: skip
            async with http.post(url, data=body) as response:
                answer = await response.json()
            assert response.status == 400, (body, answer)
            assert expected in answer["error"]["message"], (body, answer)
    assert gateway.upstream.requests == []


# -- the key -----------------------------------------------------------------------------------


async def test_the_provider_key_never_reaches_a_response_a_record_or_a_log(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="aiosqlite")  # its DEBUG lines are every statement
    seen: list[str] = []
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid"}}
    scripts: list[Callable[[dict[str, Any]], ServerReply]] = [
        lambda body: ANSWER,
        lambda body: HTTPFault(401, body=echo),  # the provider rejects the key, quoting it
        lambda body: HTTPFault(400, body=echo),  # or refuses the request, quoting it
    ]
    headers = {"Authorization": f"Bearer {gateway.sam_token}"}
    async with aiohttp.ClientSession(base_url=gateway.url, headers=headers) as http:

        async def call(method: str, path: str, **kwargs: Any) -> int:
            async with http.request(method, path, **kwargs) as response:
                seen.append(f"{response.status} {dict(response.headers)} {await response.text()}")
                return response.status

        statuses = []
        for script in scripts:
            gateway.upstream.script = script
            for stream in (False, True):
                body = {"model": "web-2026", "messages": ASK, "stream": stream}
                statuses.append(await call("POST", "/v1/chat/completions", json=body))
        assert statuses == [200, 200, 502, 502, 400, 400]
        await call("GET", "/v1/models")
        await gateway.team.budgets.set_budget(gateway.web.id, scope="student", period="day",
                                              max_tokens=1)  # fmt: skip
        assert await call("POST", "/v1/chat/completions", json={"model": "x", "messages": ASK})
    async with aiohttp.ClientSession(base_url=gateway.url) as http:
        issued = await gateway.team.accounts.issue_token(gateway.teacher.user_id)
        auth = {"Authorization": f"Bearer {issued.token}"}
        async with http.get(f"/api/courses/{gateway.web.id}", headers=auth) as response:
            seen.append(await response.text())
            assert response.status == 200 and '"model_api_key_set":true' in seen[-1]
    records = await gateway.team.audit.search(course_id=gateway.web.id, limit=1000)
    assert {r.kind for r in records} >= {"gateway_request", "model_call", "model_refused"}
    seen += [json.dumps(r.to_json()) for r in records]
    seen += [record.getMessage() for record in caplog.records]
    assert not [text for text in seen if KEY in text]
    assert {h["Authorization"] for h in gateway.upstream.headers} == {f"Bearer {KEY}"}
    assert any("rejected the server's credentials" in text for text in seen)
