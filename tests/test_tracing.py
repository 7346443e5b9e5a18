"""Tracing: the run's timeline (``RunRecord.trace``), its OpenTelemetry export (the SDK's in-memory
exporter, and OTLP/HTTP to a collector on 127.0.0.1), and ``agentica trace``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentica import Agent, ModelPrice, tool
from agentica.cli.main import main
from agentica.errors import UsageError
from agentica.storage import InMemoryStorage, SpanRecord, dump_run, load_run
from agentica.testing import ScriptedModel, call, text, tool_calls
from agentica.tracing import OpenTelemetry
from tests.otlp import otlp_collector


@tool
async def lookup(city: str) -> str:
    """Look up a city's population."""
    await asyncio.sleep(0.05)
    return f"{city}: 1,000"


@tool
async def broken(x: int) -> str:
    """Always fails."""
    raise ValueError("the gauge is broken")


def _researcher() -> Agent[str]:
    model = ScriptedModel([tool_calls(call("lookup", city="Oslo")), text("Oslo has 1,000.")])
    return Agent(model=model, name="researcher", tools=[lookup])


def _lead(storage: Any = None, capabilities: Sequence[Any] = ()) -> Agent[str]:
    model = ScriptedModel(
        [
            tool_calls(
                call("lookup", city="Lima"),
                call("broken", x=1),
                call("researcher", task="Oslo's population?"),
            ),
            text("Lima 1,000, Oslo 1,000."),
        ],
        price=ModelPrice(input=1.0, output=2.0),  # USD per million tokens
    )
    return Agent(
        model=model, name="lead", tools=[lookup, broken, _researcher().as_tool()],
        storage=storage, session_id="s1", capabilities=list(capabilities),
    )  # fmt: skip


def _exporter() -> tuple[InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider


async def test_the_run_records_its_timeline_with_the_subagent_under_its_call() -> None:
    agent = _lead()
    await agent.run("Populations of Lima and Oslo?")
    trace = agent.memory.runs[-1].trace
    assert trace is not None and trace.kind == "run" and trace.name == "lead"
    kinds = [(s.kind, s.name) for s in trace.children]
    assert kinds == [
        ("model", "scripted"), ("tool", "lookup"), ("tool", "broken"), ("tool", "researcher"),
        ("model", "scripted"),
    ]  # fmt: skip
    first, lookup_span, broken_span, delegate, last = trace.children
    assert isinstance(first.attributes["gen_ai.usage.input_tokens"], int)
    usage = first.attributes
    expected = (
        usage["gen_ai.usage.input_tokens"] * 1.0 + usage["gen_ai.usage.output_tokens"] * 2.0
    ) / 1e6  # type: ignore[operator]
    assert first.attributes["agentica.cost_usd"] == pytest.approx(expected)
    assert first.attributes["agentica.tool_calls"] == 3
    assert lookup_span.duration >= 0.05 and lookup_span.error is None
    assert broken_span.error is not None and "gauge is broken" in broken_span.error
    assert broken_span.attributes["error.type"] == "ValueError"
    # the subagent's run is a child of the call that started it, with its own steps
    (child,) = delegate.children
    assert child.kind == "run" and child.name == "researcher"
    assert [s.kind for s in child.children] == ["model", "tool", "model"]
    assert child.attributes["agentica.parent_call"] == delegate.attributes["gen_ai.tool.call.id"]
    # the calls of one turn ran at the same time, inside the run, after the first model call
    assert first.start + first.duration <= lookup_span.start + 1e-3
    assert abs(lookup_span.start - delegate.start) < 0.05
    assert trace.start <= first.start and last.start + last.duration <= trace.start + trace.duration
    # the run's usage includes its subagent's (as RunResponse.usage does)
    assert trace.attributes["agentica.tool_calls"] == 4
    assert trace.attributes["agentica.requests"] == 4


async def test_the_timeline_is_stored_and_loads_back() -> None:
    storage = InMemoryStorage()
    agent = _lead(storage)
    await agent.run("Populations?")
    data = await storage.load_session("default", "s1")
    assert data is not None
    stored = data.runs[-1].trace
    assert stored is not None
    again = load_run(json.loads(json.dumps(dump_run(data.runs[-1])))).trace
    assert again == stored
    assert [d for d, _ in stored.walk()] == [0, 1, 1, 1, 1, 2, 3, 3, 3, 1]


async def test_opentelemetry_exports_the_tree_with_genai_attributes() -> None:
    exporter, provider = _exporter()
    agent = _lead(capabilities=[OpenTelemetry(provider)])
    await agent.run("Populations?")
    spans: Sequence[ReadableSpan] = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (root,) = by_name["invoke_agent lead"]
    (child_run,) = by_name["invoke_agent researcher"]
    (delegate,) = by_name["execute_tool researcher"]
    assert root.parent is None
    assert delegate.parent is not None and delegate.parent.span_id == root.context.span_id
    assert child_run.parent is not None and child_run.parent.span_id == delegate.context.span_id
    chats = by_name["chat scripted"]
    assert len(chats) == 4  # two of the lead, two of the researcher
    assert all(s.attributes is not None for s in chats)
    chat = next(s for s in chats if s.parent and s.parent.span_id == root.context.span_id)
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "scripted"
    assert isinstance(chat.attributes["gen_ai.usage.output_tokens"], int)
    (failed,) = by_name["execute_tool broken"]
    assert failed.status.status_code.name == "ERROR"
    assert failed.attributes is not None and failed.attributes["error.type"] == "ValueError"
    assert root.attributes is not None and root.attributes["gen_ai.conversation.id"] == "s1"
    assert root.start_time is not None and chat.start_time is not None
    assert root.start_time <= chat.start_time
    # nothing else: one tree of 1 + 5 + (1 + 3) spans
    assert len(spans) == 10


async def test_a_run_inside_a_callers_span_becomes_its_child() -> None:
    exporter, provider = _exporter()
    agent = _lead(capabilities=[OpenTelemetry(provider)])
    with provider.get_tracer("service").start_as_current_span("team.event") as outer:
        await agent.run("Populations?")
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent lead"]
    assert root.parent is not None and root.parent.span_id == outer.get_span_context().span_id


async def test_otlp_http_export_reaches_a_collector_on_loopback() -> None:
    async with otlp_collector() as collector:
        tracing = OpenTelemetry(endpoint=collector.endpoint)
        try:
            agent = _lead(capabilities=[tracing])
            await agent.run("Populations?")
            assert await asyncio.to_thread(tracing.flush, 10_000)
        finally:
            await asyncio.to_thread(tracing.shutdown)
    names = collector.names
    assert sorted(names).count("chat scripted") == 4
    assert "invoke_agent lead" in names and "execute_tool broken" in names


def test_tracing_is_off_unless_configured() -> None:
    assert OpenTelemetry.from_env({}) is None
    with pytest.raises(UsageError, match="http"):
        OpenTelemetry(endpoint="127.0.0.1:4318")
    with pytest.raises(UsageError, match="one"):
        OpenTelemetry()


def test_agentica_trace_prints_the_timeline(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    db = tmp_path / "s.db"

    async def record() -> str:
        from agentica.storage import open_storage

        storage = open_storage(str(db))
        agent = _lead(storage)
        response = await agent.run("Populations?")
        await storage.aclose()
        return response.run_id

    run_id = asyncio.run(record())
    with pytest.raises(SystemExit) as exit_:
        main(["trace", run_id[:8], "--storage", str(db)])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert f"run {run_id}" in out and "· lead · completed" in out
    assert "execute_tool broken" in out and "gauge is broken" in out
    assert "invoke_agent researcher" in out and "chat scripted" in out
    lines = out.splitlines()
    researcher = next(line for line in lines if "invoke_agent researcher" in line)
    delegate = next(line for line in lines if "execute_tool researcher" in line)
    assert researcher.index("✓ invoke_agent") > delegate.index("✓ execute_tool")  # nested
    with pytest.raises(SystemExit) as exit_:
        main(["trace", "last", "--storage", str(db), "--json"])
    assert exit_.value.code == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["kind"] == "run" and len(as_json["children"]) == 5
    with pytest.raises(SystemExit) as exit_:
        main(["trace", "nope", "--storage", str(db)])
    assert exit_.value.code == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_span_record_walk_is_depth_first() -> None:
    leaf = SpanRecord(kind="tool", name="t", start=0.0)
    root = SpanRecord(
        kind="run", name="r", start=0.0,
        children=[SpanRecord(kind="model", name="m", start=0.0, children=[leaf])],
    )  # fmt: skip
    assert [(d, s.name) for d, s in root.walk()] == [(0, "r"), (1, "m"), (2, "t")]
