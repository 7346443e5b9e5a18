"""``Telemetry``: the service's OpenTelemetry spans, one per session event and per operation.

Off unless configured (``otlp_endpoint``, or a tracer provider given to ``Team.open``): every
method is then a no-op and OpenTelemetry is not imported. On, each ``Team`` has a provider of its
own, never the process-wide one. A runtime opens ``team.event <kind>`` for each event it handles
(a message, an interruption, a cancel) and makes it current while its agents run, so their runs
(``agentica.tracing.OpenTelemetry``) nest under it; ``team.operation <kind>`` is an operation on
an executor (a lane's command, a call to a student's computer). Attributes are ids, kinds, sizes,
durations and outcomes: never a message's text (its length only), file contents, command output,
tokens or keys; a command line is kept redacted and cut at 200 characters.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeAlias

from agentica_team.security import redact

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from agentica.run.capability import Capability

__all__ = [
    "COMMAND_CHARS",
    "NOT_TRACED",
    "OFF",
    "Attribute",
    "Owned",
    "Telemetry",
    "Traced",
    "open_telemetry",
]

SCOPE = "agentica_team"
SERVICE_NAME = "agentica-team"
COMMAND_CHARS = 200
"""How much of a command line an operation's span keeps (the audit keeps 2000)."""
_PREFIX = "agentica_team."
_LANE: contextvars.ContextVar[str] = contextvars.ContextVar("agentica_team_lane", default="")

Attribute: TypeAlias = str | bool | int | float | Sequence[int]


class Owned(Protocol):
    """What a span needs of a session: its ids."""

    @property
    def id(self) -> str: ...

    @property
    def user_id(self) -> str: ...

    @property
    def course_id(self) -> str: ...


class Traced:
    """One span of the service, or nothing when tracing is off. Attribute names are given
    without the ``agentica_team.`` prefix; ``end`` may be called more than once (the first
    counts)."""

    __slots__ = ("_span", "_started", "_timed")

    def __init__(self, span: Span | None = None, *, timed: bool = False) -> None:
        self._span = span
        self._started = time.monotonic()
        self._timed = timed

    @property
    def span(self) -> Span | None:
        return self._span

    def set(self, key: str, value: Attribute) -> None:
        if self._span is not None and self._span.is_recording():
            self._span.set_attribute(_PREFIX + key, value)

    def current(self) -> AbstractContextManager[object]:
        """Make the span current for the block: the agents' runs in it nest under it."""
        if self._span is None:
            return contextlib.nullcontext()
        from opentelemetry.trace import use_span

        return use_span(self._span, record_exception=False, set_status_on_exception=False)

    def end(self, outcome: str, error: str = "") -> None:
        """End the span with its ``outcome``; ``error`` (a kind or an exception's class name,
        never a message) marks it failed."""
        span = self._span
        if span is None or not span.is_recording():
            return
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute(_PREFIX + "outcome", outcome)
        if self._timed:
            duration = round(time.monotonic() - self._started, 6)
            span.set_attribute(_PREFIX + "operation.duration", duration)
        if error:
            span.set_attribute("error.type", error[:100])
            span.set_status(Status(StatusCode.ERROR, error[:100]))
        span.end()


NOT_TRACED = Traced()


class Telemetry:
    """The spans of one service (see the module docstring); ``Telemetry()`` is off."""

    def __init__(self, provider: TracerProvider | None = None, *, owned: bool = False) -> None:
        self.provider = provider
        self.owned = owned
        self._tracer: Tracer | None = None
        self._capabilities: list[Capability] = []
        if provider is not None:
            from agentica.tracing import OpenTelemetry

            self._tracer = provider.get_tracer(SCOPE)
            self._capabilities = [OpenTelemetry(provider)]

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def capabilities(self) -> list[Capability]:
        """What an agent of the service needs to export its runs (none when off)."""
        return list(self._capabilities)

    def event(
        self,
        kind: str,
        session: Owned,
        attributes: Mapping[str, Attribute] | None = None,
        *,
        parent: Traced | None = None,
    ) -> Traced:
        """A ``team.event <kind>`` span of ``session``, started now: a root (a session's loop
        outlives the request that woke it), or a child of ``parent``."""
        if self._tracer is None:
            return NOT_TRACED
        from opentelemetry import context, trace

        where = context.Context()
        if parent is not None and parent.span is not None:
            where = trace.set_span_in_context(parent.span, where)
        ids = {"course.id": session.course_id, "session.id": session.id,
               "user.id": session.user_id, "event.kind": kind}  # fmt: skip
        span = self._tracer.start_span(
            f"team.event {kind}", context=where, attributes=_prefixed({**ids, **(attributes or {})})
        )
        return Traced(span)

    def operation(
        self,
        kind: str,
        *,
        executor: str,
        op: str = "",
        lane: str = "",
        command: str | None = None,
        session: Owned | None = None,
        user_id: str = "",
    ) -> Traced:
        """A ``team.operation <kind>`` span started now under the current span (the event's),
        in the lane of ``lane()`` unless ``lane`` is given."""
        if self._tracer is None:
            return NOT_TRACED
        attributes: dict[str, Attribute] = {
            "operation.kind": kind, "operation.id": op, "executor.id": executor,
            "lane": lane or _LANE.get(), "user.id": session.user_id if session else user_id,
        }  # fmt: skip
        if session is not None:
            attributes |= {"course.id": session.course_id, "session.id": session.id}
        if command is not None:
            attributes["operation.command"] = redact(command)[:COMMAND_CHARS]
        span = self._tracer.start_span(f"team.operation {kind}", attributes=_prefixed(attributes))
        return Traced(span, timed=True)

    @contextlib.contextmanager
    def lane(self, lane: str) -> Iterator[None]:
        """The operations started in the block belong to ``lane``."""
        if self._tracer is None:
            yield
            return
        token = _LANE.set(lane)
        try:
            yield
        finally:
            _LANE.reset(token)

    async def aclose(self) -> None:
        """Send what is buffered: a provider made here is shut down, a caller's flushed."""
        provider = self.provider
        if provider is None:
            return
        if self.owned:
            await asyncio.to_thread(provider.shutdown)
        else:
            await asyncio.to_thread(provider.force_flush)


OFF = Telemetry()


def open_telemetry(endpoint: str = "", provider: TracerProvider | None = None) -> Telemetry:
    """The service's telemetry on ``provider`` (the caller's: flushed at close, not shut down),
    else on a provider of its own that sends OTLP/HTTP to ``endpoint``, else ``OFF``. Blocking
    (it imports OpenTelemetry and starts the exporter's thread): call it from a worker thread."""
    if provider is not None:
        return Telemetry(provider)
    if not endpoint:
        return OFF
    from agentica.tracing import otlp_provider

    return Telemetry(otlp_provider(endpoint, service_name=SERVICE_NAME), owned=True)


def _prefixed(attributes: Mapping[str, Attribute]) -> dict[str, Attribute]:
    return {_PREFIX + key: value for key, value in attributes.items() if value != ""}
