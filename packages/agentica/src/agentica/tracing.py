"""Tracing: every run's timeline exported as OpenTelemetry spans (``OpenTelemetry``).

The run loop records each run's timeline as it goes (``RunRecord.trace``: the run, its model
calls, compactions and tool calls, a subagent's run under the call that started it) with the
GenAI semantic conventions' attribute names. ``Agent(capabilities=[OpenTelemetry(...)])`` turns
each finished top-level run into spans of that tree, parented to the span current when the run
ended (a web request's, a team event's). Off unless configured: nothing is sent unless you pass a
tracer provider or an OTLP/HTTP endpoint (``agentica[otel]``). ``agentica trace RUN_ID`` prints
the same timeline from storage, with no collector.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentica.errors import UsageError
from agentica.run.capability import Capability
from agentica.storage.records import RunRecord, SpanRecord
from agentica.tools.context import RunContext

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

__all__ = ["OpenTelemetry", "export_trace", "otlp_provider", "span_name"]

SCOPE = "agentica"
ERROR_CHARS = 200

_OPERATIONS = {"run": "invoke_agent", "model": "chat", "tool": "execute_tool"}


def span_name(span: SpanRecord) -> str:
    """The span's name as the GenAI conventions give it (``chat qwen``, ``execute_tool grep``)."""
    operation = _OPERATIONS.get(span.kind)
    return f"{operation} {span.name}" if operation else f"agentica.compaction {span.name}"


def _require_sdk() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise UsageError(
            "tracing needs OpenTelemetry's SDK: pip install 'agentica[otel]'"
        ) from None


def otlp_provider(
    endpoint: str, *, headers: Mapping[str, str] | None = None, service_name: str = "agentica"
) -> TracerProvider:
    """A tracer provider that sends spans to an OTLP/HTTP collector at ``endpoint`` (for example
    ``http://127.0.0.1:4318/v1/traces``) in the background, in batches."""
    _require_sdk()
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"the OTLP endpoint must be an http(s) URL, not {endpoint!r}")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _attributes(span: SpanRecord) -> dict[str, Any]:
    return {key: value for key, value in span.attributes.items() if value is not None}


def export_trace(trace: SpanRecord, tracer: Tracer, context: Context | None = None) -> None:
    """Emit ``trace`` and its descendants as spans of ``tracer`` with their recorded times,
    under ``context`` (default: the current span)."""
    from opentelemetry import trace as otel
    from opentelemetry.trace import Status, StatusCode

    kind = otel.SpanKind.CLIENT if trace.kind == "model" else otel.SpanKind.INTERNAL
    start = int(trace.start * 1e9)
    span = tracer.start_span(
        span_name(trace), context=context, kind=kind, attributes=_attributes(trace),
        start_time=start,
    )  # fmt: skip
    if trace.error is not None:  # its kind only: a tool's error may quote what it read
        error = trace.attributes.get("error.type") or trace.error.split(":", 1)[0][:ERROR_CHARS]
        span.set_status(Status(StatusCode.ERROR, str(error)))
    inside = otel.set_span_in_context(span, context)
    for child in trace.children:
        export_trace(child, tracer, inside)
    span.end(end_time=start + int(trace.duration * 1e9))


class OpenTelemetry(Capability):
    """Export every run of the agent as OpenTelemetry spans when it ends.

    ``OpenTelemetry(provider)`` uses your ``TracerProvider`` (the SDK's, with the exporters you
    chose); ``OpenTelemetry(endpoint="http://127.0.0.1:4318/v1/traces")`` builds one that sends
    OTLP/HTTP; ``OpenTelemetry.from_env()`` reads ``AGENTICA_OTLP_ENDPOINT`` (or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and returns ``None`` when neither is set. A
    subagent's run is exported inside its parent's tree, not on its own. Never the process-wide
    provider unless you pass it: two agents may trace to two places.
    """

    name = "opentelemetry"

    def __init__(
        self,
        provider: TracerProvider | None = None,
        *,
        endpoint: str | None = None,
        headers: Mapping[str, str] | None = None,
        service_name: str = "agentica",
    ) -> None:
        if (provider is None) == (endpoint is None):
            raise UsageError("OpenTelemetry() takes a tracer provider or an endpoint (one)")
        _require_sdk()
        if provider is None:
            assert endpoint is not None
            provider = otlp_provider(endpoint, headers=headers, service_name=service_name)
        self.provider = provider
        self.tracer = provider.get_tracer(SCOPE)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OpenTelemetry | None:
        """The exporter the environment configures, or ``None`` (tracing off)."""
        env = os.environ if environ is None else environ
        endpoint = env.get("AGENTICA_OTLP_ENDPOINT") or env.get(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
        if not endpoint:
            return None
        return cls(endpoint=endpoint, service_name=env.get("OTEL_SERVICE_NAME", "agentica"))

    async def after_run(self, ctx: RunContext[Any], record: RunRecord) -> None:
        trace = record.trace
        if trace is None or "agentica.parent_call" in trace.attributes:
            return  # a subagent's run goes out inside its parent's tree
        export_trace(trace, self.tracer)

    def flush(self, timeout_millis: int = 30_000) -> bool:
        """Send what is buffered now (blocking: call it from a thread in async code)."""
        return bool(self.provider.force_flush(timeout_millis))

    def shutdown(self) -> None:
        """Flush and stop the provider's exporters (blocking)."""
        self.provider.shutdown()
