"""Metering: every call of a course's model is reserved before it reaches the provider, settled
to the real usage and audited; failed, cancelled and cut calls give their hold back (or pay for
what was streamed); the key never shows. Real SQLite (and PostgreSQL for admission under
concurrency), a real scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import random
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentica.errors import ModelHTTPError
from agentica.messages import (
    AssistantMessage,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolDefinition,
    Usage,
    UserMessage,
)
from agentica.models.base import ModelRequest, ModelSettings, ResponseDone
from agentica.models.pricing import price_for
from agentica.testing import FakeOpenAIServer, Hang, HTTPFault
from agentica.testing.openai_server import RawStream
from agentica_team.accounts import Accounts, Course
from agentica_team.audit import Audit, AuditRecord
from agentica_team.budgets import Budgets, Remaining
from agentica_team.course_models import CourseModels, ModelUnavailable
from agentica_team.db import Database
from agentica_team.errors import BadRequest, BudgetExceeded
from agentica_team.metering import ESTIMATE_MARGIN, cost_micros, count_prompt
from agentica_team.principal import Principal
from agentica_team.security import KeyBox
from agentica_team.settings import TeamSettings
from tests.postgres import Cluster

KEY = "sk-course-key-0123456789abcdefSECRET"
CAP = 64
Starter = Callable[..., Awaitable[FakeOpenAIServer]]


@dataclass
class World:
    db: Database
    audit: Audit
    budgets: Budgets
    accounts: Accounts
    models: CourseModels
    teacher: Principal
    course: Course
    student: str

    async def configure(self, server: FakeOpenAIServer, model: str = "openai:gpt-4o-mini",
                        course: Course | None = None, **changes: Any) -> None:  # fmt: skip
        await self.accounts.update_course(
            (course or self.course).id,
            actor=self.teacher.user_id,
            model=model,
            model_base_url=server.base_url,
            model_api_key=KEY,
            **changes,
        )

    async def remaining(self) -> list[Remaining]:
        return await self.budgets.remaining(self.course.id, self.student)

    async def records(self, kind: str) -> list[AuditRecord]:
        found = await self.audit.search(course_id=self.course.id, kind=kind)
        return list(found)


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


def _upgraded(url: str) -> str:
    async def upgrade() -> None:
        database = Database(url)
        await database.upgrade()
        await database.aclose()

    asyncio.run(upgrade())
    return url


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An upgraded SQLite database, copied for each test (migrating takes a while)."""
    path = tmp_path_factory.mktemp("template") / "team.db"
    _upgraded(f"sqlite+aiosqlite:///{path}")

    async def warm_up() -> None:  # the process's first settings and statements take ~0.3 s
        scratch = tmp_path_factory.mktemp("warm-up")
        await _sqlite(path, scratch)
        async for _ in _world(f"sqlite+aiosqlite:///{scratch / 'team.db'}", scratch):
            pass

    asyncio.run(warm_up())
    return path


async def _sqlite(template: Path, tmp_path: Path) -> str:
    await asyncio.to_thread(shutil.copy, template, tmp_path / "team.db")
    return f"sqlite+aiosqlite:///{tmp_path / 'team.db'}"


async def _world(url: str, tmp_path: Path) -> AsyncIterator[World]:
    """A course with its teacher and one student on the upgraded database at ``url``."""
    db = Database(url)
    audit = Audit(db)
    budgets = Budgets(db)
    keys = await asyncio.to_thread(KeyBox.load, "", tmp_path / "secret.key")
    accounts = Accounts(db, audit, keys=keys)
    settings = TeamSettings(database_url=url, data_dir=tmp_path, max_output_tokens=CAP)
    user = await accounts.create_user(f"teacher{random.randrange(10**9)}@school.org",
                                      role="teacher")  # fmt: skip
    teacher = Principal(user.id, user.email, user.name, "teacher", "system")
    course = await accounts.create_course(teacher, f"web-{random.randrange(10**9)}")
    student = await accounts.create_user(f"s{random.randrange(10**9)}@school.org")
    await accounts.add_member(course.id, student.id, "student", actor=teacher.user_id)
    models = CourseModels(settings, accounts, budgets, audit)
    models.config_ttl = 0.0  # every call reads the course's configuration
    try:
        yield World(db, audit, budgets, accounts, models, teacher, course, student.id)
    finally:
        await models.aclose()
        await audit.aclose()
        await db.aclose()


@pytest.fixture
async def world(template: Path, tmp_path: Path) -> AsyncIterator[World]:
    async for w in _world(await _sqlite(template, tmp_path), tmp_path):
        yield w


def ask(text: str = "Say hello.", **settings: Any) -> ModelRequest:
    return ModelRequest(
        messages=[SystemMessage(content="Be brief."), UserMessage(content=text)],
        settings=ModelSettings(**settings),
    )


def held(remaining: list[Remaining]) -> tuple[int, int]:
    """(reserved, used) tokens on the student's own budget."""
    (mine,) = [r for r in remaining if r.scope == "student"]
    return mine.reserved_tokens, mine.used_tokens


async def settled(world: World) -> None:
    """Wait for the settling that runs after a cancelled call."""
    await world.models.meter.drain()


# -- admission, settling, the audit ------------------------------------------------------------


@pytest.mark.parametrize("source", ["gateway", "agent"])
async def test_a_call_reserves_its_maximum_first_and_settles_the_real_usage(
    world: World, fake_openai: Starter, source: str
) -> None:
    during: list[list[Remaining]] = []

    async def responder(body: dict[str, Any]) -> str:
        during.append(await world.remaining())  # what the budget holds while the call runs
        return "Hello there, student."

    server = await fake_openai(responder)
    await world.configure(server)
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_tokens=100_000)  # fmt: skip
    session = "ses_1" if source == "agent" else ""
    model = await world.models.for_user(
        world.course.id, world.student, source=source, session_id=session
    )
    request = ask()
    response = await model.response(request)

    upstream = (await world.models.course_model(world.course.id)).upstream
    prompt = count_prompt(request, upstream.counter, exact=True)
    assert upstream.exact and prompt > 10
    assert held(during[0]) == (prompt + CAP, 0)  # reserved before the provider saw the call
    assert server.requests[0]["max_tokens"] == CAP  # the output can never exceed the hold
    usage = response.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert held(await world.remaining()) == (0, usage.input_tokens + usage.output_tokens)

    (row,) = await world.budgets.usage(world.course.id, user_id=world.student)
    price = price_for("gpt-4o-mini")
    assert price is not None and model.price == price
    assert (row.source, row.requests, row.input_tokens, row.output_tokens) == (
        source, 1, usage.input_tokens, usage.output_tokens,
    )  # fmt: skip
    assert row.cost_micros == cost_micros(usage, price) > 0
    (record,) = await world.records("model_call")
    assert record.actor_id == world.student
    assert record.subject == ("ses_1" if source == "agent" else "gateway")
    data = record.data
    assert data["status"] == "ok" and data["source"] == source and data["model"] == "gpt-4o-mini"
    assert (data["input_tokens"], data["output_tokens"], data["cost_micros"]) == (
        usage.input_tokens, usage.output_tokens, row.cost_micros,
    )  # fmt: skip
    assert data["cached_tokens"] == 0 and isinstance(data["latency_ms"], int)


async def test_deferred_settling_holds_the_reservation_until_it_is_done(
    world: World, fake_openai: Starter
) -> None:
    server = await fake_openai(lambda body: "quick answer")
    await world.configure(server)
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_tokens=100_000)  # fmt: skip
    model = await world.models.for_user(
        world.course.id, world.student, source="gateway", defer_settling=True
    )
    request = ask()
    response = await model.response(request)
    counter = (await world.models.course_model(world.course.id)).upstream.counter
    maximum = count_prompt(request, counter, exact=True) + CAP
    # settled already, or the whole maximum still held: never neither (no overspending)
    assert held(await world.remaining()) in ((0, response.usage.total_tokens), (maximum, 0))
    await world.models.meter.drain()
    assert held(await world.remaining()) == (0, response.usage.total_tokens)
    (record,) = await world.records("model_call")
    assert record.data["status"] == "ok"


async def test_a_call_over_budget_is_refused_before_the_model_sees_it(
    world: World, fake_openai: Starter
) -> None:
    server = await fake_openai(lambda body: "never")
    await world.configure(server)
    await world.budgets.set_budget(world.course.id, scope="student", period="day", max_tokens=50)
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    with pytest.raises(BudgetExceeded) as refused:
        await model.response(ask())
    assert server.requests == []
    assert held(await world.remaining()) == (0, 0)
    assert "resets_at" in json.dumps(refused.value.body())
    (record,) = await world.records("model_refused")
    assert record.data["reason"] == "budget_exceeded" and record.data["tokens"] > 50

    # a money budget refuses too: one micro-dollar is less than any call of a priced model
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_cost_micros=1)  # fmt: skip
    with pytest.raises(BudgetExceeded):
        await model.response(ask())
    assert server.requests == [] and await world.records("model_call") == []


async def test_the_output_cap_is_the_smaller_of_the_request_and_the_course(
    world: World, fake_openai: Starter
) -> None:
    server = await fake_openai(lambda body: "ok")
    await world.configure(server)
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    await model.response(ask(max_tokens=10))
    await model.response(ask(max_tokens=5000))
    await world.configure(server, max_output_tokens=32)  # the teacher lowers the course's cap
    await model.response(ask())
    assert [r["max_tokens"] for r in server.requests] == [10, CAP, 32]
    assert model.max_output_tokens == 32
    with pytest.raises(BadRequest, match="max_tokens"):
        await model.response(ask(max_tokens=0))
    assert len(server.requests) == 3


async def test_an_unknown_price_costs_nothing_but_its_tokens_count_with_a_margin(
    world: World, fake_openai: Starter
) -> None:
    during: list[list[Remaining]] = []

    async def responder(body: dict[str, Any]) -> str:
        during.append(await world.remaining())
        return "fine"

    server = await fake_openai(responder)
    await world.configure(server, model="classroom-llm")  # a bare id on the teacher's server
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_tokens=100_000, max_cost_micros=1)  # fmt: skip
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    request = ask("A question " * 50)
    response = await model.response(request)
    upstream = (await world.models.course_model(world.course.id)).upstream
    assert upstream.price is None and not upstream.exact
    raw = upstream.counter.count_messages(request.messages)
    assert held(during[0])[0] == math.ceil(raw * ESTIMATE_MARGIN) + CAP
    (row,) = await world.budgets.usage(world.course.id)
    assert row.cost_micros == 0
    assert row.input_tokens + row.output_tokens == response.usage.total_tokens > 0


async def test_tool_definitions_are_counted_and_calls_pass_through(
    world: World, fake_openai: Starter
) -> None:
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "index.html"}')
    server = await fake_openai(lambda body: AssistantMessage(tool_calls=[call]))
    await world.configure(server)
    model = await world.models.for_user(world.course.id, world.student, source="agent")
    tool = ToolDefinition(
        name="read_file",
        description="Read a file of the workspace " * 20,
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    bare, with_tools = ask(), ask()
    with_tools.tools = [tool]
    counter = (await world.models.course_model(world.course.id)).upstream.counter
    assert (
        count_prompt(with_tools, counter, exact=True)
        > count_prompt(bare, counter, exact=True) + 100
    )
    response = await model.response(with_tools)
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        ("read_file", '{"path": "index.html"}')
    ]
    assert server.requests[0]["tools"][0]["function"]["name"] == "read_file"


# -- failures ----------------------------------------------------------------------------------


async def test_a_failed_call_is_released_audited_and_its_error_has_no_key(
    world: World, fake_openai: Starter
) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid"}}
    server = await fake_openai(lambda body: HTTPFault(400, body=echo))
    await world.configure(server)
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_tokens=100_000)  # fmt: skip
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    with pytest.raises(ModelHTTPError) as failed:
        await model.response(ask())
    assert len(server.requests) == 1
    assert KEY not in str(failed.value) and KEY not in failed.value.body
    assert "Incorrect API key" in str(failed.value)
    assert held(await world.remaining()) == (0, 0)
    assert await world.budgets.usage(world.course.id) == []
    (record,) = await world.records("model_call")
    assert record.data["status"] == "failed" and record.data["error"] == "ModelHTTPError"
    assert KEY not in json.dumps(record.to_json())


async def test_a_cancelled_call_is_released(world: World, fake_openai: Starter) -> None:
    arrived = asyncio.Event()

    def responder(body: dict[str, Any]) -> Hang:
        arrived.set()
        return Hang(30)

    server = await fake_openai(responder)
    await world.configure(server)
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_tokens=100_000)  # fmt: skip
    model = await world.models.for_user(world.course.id, world.student, source="agent")
    task = asyncio.create_task(model.response(ask()))
    await arrived.wait()
    assert held(await world.remaining())[0] > 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settled(world)
    assert held(await world.remaining()) == (0, 0)
    (record,) = await world.records("model_call")
    assert record.data["status"] == "cancelled"


async def test_a_stream_settles_when_it_ends(world: World, fake_openai: Starter) -> None:
    server = await fake_openai(lambda body: "one two three four")
    await world.configure(server)
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    texts, final = [], None
    async with aclosing(model.response_stream(ask())) as events:
        async for event in events:
            if isinstance(event, ResponseDone):
                final = event.response
                # settled before the caller sees the end of the stream
                (row,) = await world.budgets.usage(world.course.id)
                assert row.output_tokens == final.usage.output_tokens > 0
            elif isinstance(event, TextDelta):
                texts.append(event.text)
    assert "".join(texts) == "one two three four" and final is not None
    assert server.requests[0]["max_tokens"] == CAP
    (record,) = await world.records("model_call")
    assert record.data["status"] == "ok" and "usage_estimated" not in record.data


async def test_a_stream_left_early_pays_for_what_it_streamed(
    world: World, fake_openai: Starter
) -> None:
    server = await fake_openai(lambda body: "Hello " + "word " * 40)
    await world.configure(server)
    await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                   max_tokens=100_000)  # fmt: skip
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    request = ask()
    async with aclosing(model.response_stream(request)) as events:
        async for event in events:
            assert isinstance(event, TextDelta) and event.text == "Hello "
            break  # the caller goes away after the first piece
    await settled(world)
    upstream = (await world.models.course_model(world.course.id)).upstream
    prompt = count_prompt(request, upstream.counter, exact=True)
    streamed = upstream.counter.count_text("Hello ")
    assert held(await world.remaining()) == (0, prompt + streamed)
    (record,) = await world.records("model_call")
    assert record.data["status"] == "cancelled" and record.data["usage_estimated"] is True
    assert record.data["output_tokens"] == streamed


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def test_a_provider_that_reports_no_usage_is_counted_offline(
    world: World, fake_openai: Starter
) -> None:
    pieces = [_chunk({"content": "Counted "}), _chunk({"content": "offline."}, "stop"),
              b"data: [DONE]\n\n"]  # fmt: skip
    server = await fake_openai(lambda body: RawStream(pieces))
    await world.configure(server)
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    request = ask()
    async with aclosing(model.response_stream(request)) as events:
        async for _ in events:
            pass
    upstream = (await world.models.course_model(world.course.id)).upstream
    (row,) = await world.budgets.usage(world.course.id)
    assert row.input_tokens == count_prompt(request, upstream.counter, exact=True)
    assert row.output_tokens == upstream.counter.count_text("Counted offline.")
    (record,) = await world.records("model_call")
    assert record.data["usage_estimated"] is True


# -- concurrency -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_url(pg_cluster: Cluster) -> str:
    return _upgraded(
        pg_cluster.create_database(f"metering_{os.getpid()}_{random.randrange(10**9)}")
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request: pytest.FixtureRequest, template: Path, tmp_path: Path) -> str:
    if request.param == "sqlite":
        shutil.copy(template, tmp_path / "team.db")
        return f"sqlite+aiosqlite:///{tmp_path / 'team.db'}"
    return str(request.getfixturevalue("pg_url"))


async def test_concurrent_calls_are_admitted_exactly_up_to_the_budget(
    any_url: str, tmp_path: Path, fake_openai: Starter
) -> None:
    url = any_url
    gate = asyncio.Event()

    async def responder(body: dict[str, Any]) -> str:
        await gate.wait()  # every admitted call holds its reservation until all were decided
        return "ok"

    async for world in _world(url, tmp_path):
        server = await fake_openai(responder)
        await world.configure(server)
        probe = (await world.models.course_model(world.course.id)).upstream
        each = count_prompt(ask(), probe.counter, exact=True) + CAP
        await world.budgets.set_budget(world.course.id, scope="student", period="day",
                                       max_tokens=5 * each + each // 2)  # fmt: skip
        model = await world.models.for_user(world.course.id, world.student, source="gateway")
        calls = [asyncio.create_task(model.response(ask())) for _ in range(20)]
        pending: set[asyncio.Task[Any]] = set(calls)
        while len(pending) > 5:  # the refusals come back while the admitted calls wait
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        assert len(server.requests) == 5
        gate.set()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert sum(isinstance(o, BudgetExceeded) for o in outcomes) == 15
        reserved, used = held(await world.remaining())
        assert reserved == 0 and 0 < used <= 5 * each


# -- the courses' models -----------------------------------------------------------------------


async def test_models_are_shared_per_configuration_and_rebuilt_when_it_changes(
    world: World, fake_openai: Starter
) -> None:
    first, second = await fake_openai(lambda b: "first"), await fake_openai(lambda b: "second")
    other = await world.accounts.create_course(world.teacher, f"css-{random.randrange(10**9)}")
    await world.configure(first)
    await world.configure(first, course=other)
    a = await world.models.base_model(world.course.id)
    assert a is await world.models.base_model(other.id)  # one model and pool for both
    model = await world.models.for_user(world.course.id, world.student, source="gateway")
    assert (await model.response(ask())).message.content == "first"

    await world.configure(second)  # the teacher points the course elsewhere
    assert (await model.response(ask())).message.content == "second"
    assert await world.models.base_model(world.course.id) is not a
    assert await world.models.base_model(other.id) is a


async def test_a_model_that_cannot_work_is_model_unavailable_without_the_key(
    world: World,
) -> None:
    await world.accounts.update_course(world.course.id, actor=world.teacher.user_id,
                                       model="nosuch:model", model_api_key=KEY)  # fmt: skip
    with pytest.raises(ModelUnavailable) as unavailable:
        await world.models.for_user(world.course.id, world.student, source="gateway")
    assert unavailable.value.status == 503 and "unknown provider" in unavailable.value.message
    assert KEY not in json.dumps(unavailable.value.body())


async def test_cost_is_rounded_up_to_whole_micro_dollars() -> None:
    price = price_for("gpt-4o-mini")
    assert cost_micros(Usage(input_tokens=1), price) == 1  # 0.15 micro-dollars
    assert cost_micros(Usage(input_tokens=1_000_000, output_tokens=1_000_000), price) == 750_000
    assert cost_micros(Usage(input_tokens=10**6), None) == 0
