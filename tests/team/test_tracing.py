"""Tracing in the team service, over real HTTP with scripted models: a student's message is one
trace (``team.event`` -> the agent's ``invoke_agent`` -> ``chat`` / ``execute_tool``, the
operations on the student's executor beside them), with ids, sizes and outcomes and no secret
or text; a cancel is a span under the message it stops; ``otlp_endpoint`` sends the spans to a
collector on loopback by the time the service closes; and tracing is off unless configured.

Spans go to an in-memory exporter on a ``TracerProvider`` given to ``Team.open`` (never the
process-wide provider)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from agentica.messages import AssistantMessage
from agentica.testing import FakeOpenAIServer
from agentica_team.app import create_app
from agentica_team.service import Team
from agentica_team.settings import TeamSettings
from agentica_team.telemetry import OFF
from tests.otlp import otlp_collector
from tests.team.server import client, serve_team, sqlite_settings
from tests.team.test_executors import _lane_running, connected
from tests.team.test_sessions import (
    HELLO,
    Class,
    ended,
    make_class,
    new_session,
    read_events,
    send,
    tutor,
)

PROVIDER_KEY = "sk-course-provider-key-0123456789abcdef"
ASK = "write a hello program, my password is hunter2-secret"


@pytest.fixture(scope="module", autouse=True)
def _warm_up(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Pay the process's one-time costs (imports, the first migration, the first request, the
    first executor) before the tests' loops are watched for blocking calls."""

    async def warm_up() -> None:
        scratch = tmp_path_factory.mktemp("warm-up")
        _, provider = _exporter()
        async with (
            FakeOpenAIServer(tutor) as model,
            traced(_settings(scratch), provider) as (
                url,
                team,
            ),
        ):
            c = await make_class(team, model.base_url)
            async with (
                connected(url, team, c.ann, scratch / "laptop", c.ann_id),
                client(url, c.ann) as ann,
            ):
                session_id = await new_session(ann, c.course)
                message = await send(ann, session_id, "write a hello program")
                await read_events(ann, session_id, until=ended(message["seq"]))

    asyncio.run(warm_up())


def _settings(tmp_path: Path, **overrides: Any) -> TeamSettings:
    return sqlite_settings(tmp_path / "server", **overrides)


def _exporter() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


@asynccontextmanager
async def traced(
    settings: TeamSettings, provider: TracerProvider | None
) -> AsyncIterator[tuple[str, Team]]:
    """``serve_team`` with the service's spans going to ``provider``."""
    team = await Team.open(settings, tracer_provider=provider)
    app = await asyncio.to_thread(create_app, team=team)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}", team
    finally:
        server.should_exit = True
        await task
        await team.aclose()


async def _with_key(team: Team, c: Class, model_url: str) -> None:
    """The course's model with a provider key of its own (it must never reach a span)."""
    teacher = await team.accounts.user_by_email("t@school.edu")
    assert teacher is not None
    await team.accounts.update_course(
        c.course, actor=teacher.id, model_base_url=model_url, model_api_key=PROVIDER_KEY
    )


def _one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _assert_nothing_secret(spans: Sequence[ReadableSpan], *secrets: str) -> None:
    """No attribute value, span name, status or event of any span holds a secret."""
    for span in spans:
        said = [span.name, str(span.status.description or "")]
        said += [
            json.dumps(list(v) if isinstance(v, tuple) else v) for v in _attributes(span).values()
        ]
        said += [json.dumps(dict(e.attributes or {}), default=str) for e in span.events]
        for secret in secrets:
            assert not any(secret in text for text in said), (secret, span.name, said)


async def test_a_students_message_is_one_trace_with_its_operations(tmp_path: Path) -> None:
    exporter, provider = _exporter()
    async with (
        FakeOpenAIServer(tutor) as model,
        traced(_settings(tmp_path), provider) as (
            url,
            team,
        ),
    ):
        c = await make_class(team, model.base_url)
        await _with_key(team, c, model.base_url)
        async with (
            connected(url, team, c.ann, tmp_path / "laptop", c.ann_id) as (executor, _),
            client(url, c.ann) as ann,
        ):
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, ASK)
            await read_events(ann, session_id, until=ended(message["seq"]))
        assert (await asyncio.to_thread((tmp_path / "laptop" / "hello.py").read_text)) == HELLO
        assert team.telemetry.provider is provider and team.supervisor.telemetry.enabled
    assert trace.get_tracer_provider() is not provider  # never the process-wide provider
    spans = exporter.get_finished_spans()

    event = _one(spans, "team.event user_message")
    assert event.parent is None
    assert _attributes(event) == {
        "agentica_team.course.id": c.course,
        "agentica_team.session.id": session_id,
        "agentica_team.user.id": c.ann_id,
        "agentica_team.event.kind": "user_message",
        "agentica_team.message.seq": message["seq"],
        "agentica_team.message.length": len(ASK),
        "agentica_team.runtime": "serial",
        "agentica_team.outcome": "answered",
    }
    assert event.status.status_code.name == "UNSET"
    run = _one(spans, "invoke_agent assistant")
    assert run.parent is not None and run.parent.span_id == event.context.span_id
    steps = sorted(s.name for s in _children(spans, run))
    assert steps == ["chat fake-tutor", "chat fake-tutor", "execute_tool write_file"], steps
    assert {s.context.trace_id for s in spans} == {event.context.trace_id}  # one trace
    # the operations on the student's computer, under the event (the agent's spans are
    # exported when its run ends, so the calls made meanwhile hang off the event)
    operations = [s for s in spans if s.name.startswith("team.operation ")]
    assert "team.operation files.write" in {s.name for s in operations}
    for operation in operations:
        assert operation.parent is not None and operation.parent.span_id == event.context.span_id
        attributes = _attributes(operation)
        assert attributes["agentica_team.executor.id"] == executor.executor_id
        assert attributes["agentica_team.operation.id"].startswith("call")
        assert attributes["agentica_team.user.id"] == c.ann_id
        assert attributes["agentica_team.outcome"] == "completed"
        assert attributes["agentica_team.operation.duration"] >= 0
    assert event.end_time is not None and run.end_time is not None
    assert event.end_time >= run.end_time
    _assert_nothing_secret(spans, c.ann, PROVIDER_KEY, ASK, "hunter2", HELLO)


async def test_a_lanes_command_is_an_operation_span_under_the_message(tmp_path: Path) -> None:
    exporter, provider = _exporter()
    command = "echo sorted > out.txt && echo 'token agt_secret0123456789abcdef'"
    scripted = _lane_running(command, ends_on="ended", summary="sorted")
    settings = _settings(tmp_path, agent_runtime="lanes")
    async with FakeOpenAIServer(scripted) as model, traced(settings, provider) as (url, team):
        c = await make_class(team, model.base_url)
        await _with_key(team, c, model.base_url)
        async with (
            connected(url, team, c.ann, tmp_path / "laptop", c.ann_id) as (executor, _),
            client(url, c.ann) as ann,
        ):
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "implement a sort")
            await read_events(ann, session_id, until=ended(message["seq"]), timeout=30)
    spans = exporter.get_finished_spans()

    event = _one(spans, "team.event user_message")
    attributes = _attributes(event)
    assert attributes["agentica_team.runtime"] == "lanes"
    assert attributes["agentica_team.outcome"] == "answered"
    assert attributes["agentica_team.user.id"] == c.ann_id
    under_event = {s.name for s in _children(spans, event)}
    # the router's run, the lane's two steps (start the command; hear it ended, done), the
    # command itself
    assert {"invoke_agent router", "invoke_agent lane L1", "team.operation command"} <= under_event
    steps = [s for s in spans if s.name == "invoke_agent lane L1"]
    assert len(steps) == 2
    tools = {s.name for step in steps for s in _children(spans, step)}
    assert {"execute_tool start_command", "execute_tool lane_done"} <= tools
    operation = _one(spans, "team.operation command")
    done = _attributes(operation)
    assert done["agentica_team.operation.id"] == "op1"
    assert done["agentica_team.lane"] == "L1"
    assert done["agentica_team.executor.id"] == executor.executor_id
    assert done["agentica_team.session.id"] == session_id
    assert done["agentica_team.operation.exit_code"] == 0
    assert done["agentica_team.operation.status"] == "exited"
    assert done["agentica_team.outcome"] == "completed"
    assert done["agentica_team.operation.command"].startswith("echo sorted > out.txt")
    assert "agt_secret" not in done["agentica_team.operation.command"]  # redacted
    (start,) = _children(spans, operation)  # the call that started it on the executor
    assert start.name == "team.operation command.start"
    _assert_nothing_secret(spans, c.ann, PROVIDER_KEY, "agt_secret", "implement a sort")


async def test_a_cancel_is_a_span_under_the_message_it_stops(tmp_path: Path) -> None:
    exporter, provider = _exporter()
    release = asyncio.Event()

    async def waits(body: dict[str, Any]) -> AssistantMessage | str:
        if not release.is_set():
            await release.wait()
        return "ok"

    async with (
        FakeOpenAIServer(waits) as model,
        traced(_settings(tmp_path), provider) as (
            url,
            team,
        ),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            message = await send(ann, session_id, "write a hello program")
            await read_events(
                ann, session_id, until=lambda e: e["data"].get("kind") == "model_request_started"
            )
            async with ann.post(f"/api/sessions/{session_id}/cancel") as r:
                assert r.status == 202, await r.text()
            await read_events(ann, session_id, until=ended(message["seq"]))
            release.set()
    spans = exporter.get_finished_spans()
    event = _one(spans, "team.event user_message")
    assert _attributes(event)["agentica_team.outcome"] == "cancelled"
    cancel = _one(spans, "team.event cancel_requested")
    assert cancel.parent is not None and cancel.parent.span_id == event.context.span_id
    assert _attributes(cancel)["agentica_team.outcome"] == "cancelled"
    run = _one(spans, "invoke_agent assistant")
    assert run.parent is not None and run.parent.span_id == event.context.span_id
    assert run.status.status_code.name == "ERROR"  # the run was cancelled


async def test_an_otlp_endpoint_gets_the_spans_by_the_time_the_service_closes(
    tmp_path: Path,
) -> None:
    async with otlp_collector() as collector:
        settings = _settings(tmp_path, otlp_endpoint=collector.endpoint)
        async with FakeOpenAIServer(tutor) as model, serve_team(settings) as (url, team):
            provider = team.telemetry.provider
            assert provider is not None and team.telemetry.owned
            assert trace.get_tracer_provider() is not provider
            c = await make_class(team, model.base_url)
            async with client(url, c.ann) as ann:
                session_id = await new_session(ann, c.course)
                message = await send(ann, session_id, "write a hello program")
                await read_events(ann, session_id, until=ended(message["seq"]))
        # closed: the provider was shut down, its batch sent
    spans = [
        (resource, span)
        for message in collector.requests
        for resource in message.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = sorted(span.name for _, span in spans)
    assert "team.event user_message" in names and "invoke_agent assistant" in names
    services = {
        attribute.value.string_value
        for resource, _ in spans
        for attribute in resource.resource.attributes
        if attribute.key == "service.name"
    }
    assert services == {"agentica-team"}


async def test_tracing_is_off_unless_configured(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.otlp_endpoint == ""
    team = await Team.open(settings)
    try:
        assert team.telemetry is OFF and not team.telemetry.enabled
        assert team.telemetry.provider is None
        assert team.supervisor.telemetry is OFF and team.executors.telemetry is OFF
        assert OFF.capabilities() == []
    finally:
        await team.aclose()
    with pytest.raises(ValidationError, match="http"):
        TeamSettings(otlp_endpoint="127.0.0.1:4318")
