"""Metering: every model call of the service is counted against the budgets and the audit.

``MeteredModel`` wraps a course's model for one student and implements agentica's ``Model``
protocol, so agents and the gateway use it like any model. Before a call it estimates the
call's maximum (the prompt counted offline, plus the output cap, which is also set on the
forwarded request so the reply cannot exceed it), priced with ``agentica.models.pricing``, and
``reserve``s that on the budgets: a refused call never reaches the provider. After the call it
``settle``s the real usage and audits a ``model_call`` record. A failed or cancelled call is
released (a stream cut after some output is settled for that output), in a task that a
cancellation cannot interrupt (``Meter.finish``). No provider key reaches an error or a record.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentica.context.tokens import TokenCounter
from agentica.errors import ModelResponseError
from agentica.messages import (
    AssistantMessage,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
    UserMessage,
)
from agentica.models.base import (
    Model,
    ModelRequest,
    ModelResponse,
    ModelStreamEvent,
    ResponseDone,
)
from agentica.models.pricing import ModelPrice
from agentica_team.errors import BadRequest, BudgetExceeded, RateLimited
from agentica_team.security import redact

if TYPE_CHECKING:
    from agentica_team.audit import Along, Audit
    from agentica_team.budgets import Budgets, Reservation

__all__ = [
    "AuditNote",
    "CourseModel",
    "Meter",
    "MeteredModel",
    "Upstream",
    "cost_micros",
    "count_prompt",
    "scrub",
]

log = logging.getLogger("agentica_team.metering")

ESTIMATE_MARGIN = 1.5
"""Prompt counts of an inexact counter (``EstimateCounter``: up to 52% off, its docstring says)
are multiplied by this before they are reserved."""
INLINE_CHARS = 16_384
"""Prompts with more characters than this are counted on a worker thread (an exact count costs
about 0.1 ms per 1,000 characters; see ``benchmarks/team_gateway.py``)."""
_PER_TOOL = 8
_MESSAGE_CAP = 500


@dataclass(frozen=True, slots=True)
class Upstream:
    """A built model and how its calls are counted: ``counter`` (loaded), ``price`` (``None``:
    unknown, the cost counts as 0 and tokens still count), ``secrets``: the provider key(s),
    scrubbed from every error and record."""

    model: Model
    counter: TokenCounter
    price: ModelPrice | None
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def exact(self) -> bool:
        return bool(getattr(self.counter, "exact", False))


@dataclass(frozen=True, slots=True)
class CourseModel:
    """A course's model as configured now: the upstream and the course's output cap."""

    upstream: Upstream
    max_output_tokens: int


@dataclass(frozen=True, slots=True)
class AuditNote:
    """An audit record of the caller's (``kind``, ``subject``, ``data``; its actor and course
    are the call's) written with the first call's admission, in its transaction: durable
    before the model is called, without a commit of its own. If the call is not admitted
    (refused, failed before), it is written on its own, before the refusal's record."""

    kind: str
    subject: str
    data: dict[str, Any]


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without ``secrets`` and without anything that looks like a key or a token."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return redact(text)


def cost_micros(usage: Usage, price: ModelPrice | None) -> int:
    """The cost of ``usage`` in micro-dollars, rounded up; 0 when the price is unknown."""
    return 0 if price is None else math.ceil(price.cost(usage) * 1_000_000 - 1e-9)


def _chars(message: Message) -> int:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return len(message.content)
        return sum(len(getattr(part, "text", "")) for part in message.content)
    if isinstance(message, AssistantMessage):
        size = len(message.content or "") + len(message.reasoning or "")
        return size + sum(len(c.arguments) + len(c.name) for c in message.tool_calls)
    return len(getattr(message, "content", "") or "")


def _request_chars(request: ModelRequest) -> int:
    size = sum(_chars(m) for m in request.messages)
    return size + sum(len(t.description) + 200 for t in request.tools)


def count_prompt(request: ModelRequest, counter: TokenCounter, *, exact: bool) -> int:
    """The prompt tokens of ``request`` (messages, tool definitions, output schema), counted
    with ``counter``; an inexact count gets ``ESTIMATE_MARGIN``."""
    tokens = counter.count_messages(request.messages)
    for tool in request.tools:
        tokens += _PER_TOOL + counter.count_text(tool.name) + counter.count_text(tool.description)
        tokens += counter.count_text(json.dumps(tool.parameters, separators=(",", ":")))
    if request.output_schema is not None:
        tokens += counter.count_text(json.dumps(request.output_schema.schema))
    return tokens if exact else math.ceil(tokens * ESTIMATE_MARGIN)


def _output_text(message: AssistantMessage) -> str:
    parts = [message.content or "", message.reasoning or ""]
    parts += [c.name + c.arguments for c in message.tool_calls]
    return "".join(parts)


def _output_cap(request: ModelRequest, cap: int) -> int:
    asked = request.settings.max_tokens
    if asked is None:
        return cap
    if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
        raise BadRequest(f"max_tokens must be a positive integer, not {asked!r}")
    return min(asked, cap)


@dataclass(slots=True)
class _Call:
    """One admitted call: its reservation and what it was reserved for."""

    meter: Meter
    binding: _Binding
    upstream: Upstream
    request: ModelRequest
    reservation: Reservation
    prompt_tokens: int
    output_cap: int
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None

    def _latency_ms(self) -> int:
        return round(((self.ended or time.perf_counter()) - self.started) * 1000)

    def _count_output(self, text: str) -> int:
        tokens = self.upstream.counter.count_text(text) if text else 0
        tokens = tokens if self.upstream.exact else math.ceil(tokens * ESTIMATE_MARGIN)
        return min(tokens, self.output_cap)

    def settle(self, usage: Usage, message: AssistantMessage | None) -> Coroutine[Any, Any, None]:
        """The work of settling the reservation with the real usage (counted offline where the
        provider reported none) and auditing the call; the call's latency ends now."""
        self.ended = time.perf_counter()
        return self._settle_usage(usage, message)

    async def _settle_usage(self, usage: Usage, message: AssistantMessage | None) -> None:
        estimated = False
        if usage.input_tokens <= 0:
            usage, estimated = replace(usage, input_tokens=self.prompt_tokens), True
        if usage.output_tokens <= 0 and message is not None:
            counted = self._count_output(_output_text(message))
            if counted:
                usage, estimated = replace(usage, output_tokens=counted), True
        await self._settle(usage, status="ok", estimated=estimated)

    async def _settle(self, usage: Usage, *, status: str, estimated: bool, **extra: Any) -> None:
        cost = cost_micros(usage, self.upstream.price)
        settling = self.meter.budgets.settling(
            self.reservation,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_micros=cost,
            cached_tokens=usage.cache_read_tokens,
            source=self.binding.source,
        )
        data = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cache_read_tokens,
            "cost_micros": cost,
        }
        if estimated:
            data["usage_estimated"] = True
        await self.meter.audit_call(self, settling, status=status, **data, **extra)

    def fail(self, error: BaseException, output: str = "") -> Coroutine[Any, Any, None]:
        """The work after a failed or cancelled call: release the reservation, or, when output
        was already streamed to the caller, settle that output (it was spent); audit the
        failure. The call's latency ends now."""
        self.ended = time.perf_counter()
        return self._fail(error, output)

    async def _fail(self, error: BaseException, output: str) -> None:
        cancelled = isinstance(error, asyncio.CancelledError | GeneratorExit)
        status = "cancelled" if cancelled else "failed"
        detail = {
            "error": type(error).__name__,
            "message": scrub(str(error), self.upstream.secrets)[:_MESSAGE_CAP],
        }
        if output:
            usage = Usage(input_tokens=self.prompt_tokens, output_tokens=self._count_output(output))
            await self._settle(usage, status=status, estimated=True, **detail)
            return
        releasing = self.meter.budgets.releasing(self.reservation)
        await self.meter.audit_call(self, releasing, status=status, **detail)


@dataclass(frozen=True, slots=True)
class _Binding:
    course_id: str
    user_id: str
    source: str
    session_id: str


class Meter:
    """The budgets and audit model calls are counted against, and the settling tasks still
    running (``finish`` runs them so that cancelling the caller cannot stop them)."""

    def __init__(self, budgets: Budgets, audit: Audit) -> None:
        self.budgets = budgets
        self.audit = audit
        self._finishing: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``work`` (settling, releasing, auditing) in a task of its own, which ``drain``
        waits for; a failure is logged."""
        task = asyncio.ensure_future(work)
        self._finishing.add(task)
        task.add_done_callback(self._done)
        return task

    async def finish(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` to the end even if the caller is cancelled meanwhile: the caller sees
        its cancellation at once, the work goes on (``start``)."""
        await asyncio.shield(self.start(work))

    def _done(self, task: asyncio.Task[None]) -> None:
        self._finishing.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("settling a model call failed: %s", redact(str(error))[:_MESSAGE_CAP])

    async def audit_call(self, call: _Call, along: Along, *, status: str, **data: Any) -> None:
        """Audit ``call`` as a ``model_call`` record, committed in one transaction with
        ``along`` (its settling or release; group-committed with other records)."""
        binding = call.binding
        await self.audit.record(
            "model_call",
            actor_id=binding.user_id,
            course_id=binding.course_id,
            subject=binding.session_id or binding.source,
            data={
                "model": call.upstream.model.id,
                "provider": call.upstream.model.provider,
                "source": binding.source,
                "session_id": binding.session_id,
                "status": status,
                **data,
                "latency_ms": call._latency_ms(),
            },
            along=along,
        )

    async def note(self, note: AuditNote | None, *, course_id: str, user_id: str) -> None:
        """Write ``note`` on its own (its call was not admitted); a cancellation of the caller
        does not stop it."""
        if note is not None:
            await self.finish(self._record_note(note, course_id, user_id))

    async def _record_note(self, note: AuditNote, course_id: str, user_id: str) -> None:
        await self.audit.record(
            note.kind,
            actor_id=user_id,
            course_id=course_id,
            subject=note.subject,
            data=note.data,
        )

    async def _note_in(self, binding: _Binding, note: AuditNote | None) -> Along | None:
        if note is None:
            return None
        return await self.audit.prepare(
            note.kind,
            actor_id=binding.user_id,
            course_id=binding.course_id,
            subject=note.subject,
            data=note.data,
        )

    async def admit(
        self,
        binding: _Binding,
        course_model: CourseModel,
        request: ModelRequest,
        note: AuditNote | None = None,
    ) -> _Call:
        """Estimate the call's maximum, cap its output and reserve it (``BudgetExceeded`` /
        ``RateLimited`` when refused: the refusal is audited and nothing was spent); ``note``
        is written with the admission (see ``AuditNote``)."""
        upstream = course_model.upstream
        try:
            cap = _output_cap(request, course_model.max_output_tokens)
            if _request_chars(request) > INLINE_CHARS:
                prompt = await asyncio.to_thread(
                    count_prompt, request, upstream.counter, exact=upstream.exact
                )
            else:
                prompt = count_prompt(request, upstream.counter, exact=upstream.exact)
            cost = cost_micros(Usage(input_tokens=prompt, output_tokens=cap), upstream.price)
            reservation = await self.budgets.reserve(
                course_id=binding.course_id,
                user_id=binding.user_id,
                tokens=prompt + cap,
                cost_micros=cost,
                along=await self._note_in(binding, note),
            )
        except (BudgetExceeded, RateLimited) as refusal:
            await self.note(note, course_id=binding.course_id, user_id=binding.user_id)
            await self.audit.record(
                "model_refused",
                actor_id=binding.user_id,
                course_id=binding.course_id,
                subject=binding.session_id or binding.source,
                data={
                    "model": upstream.model.id,
                    "source": binding.source,
                    "session_id": binding.session_id,
                    "reason": refusal.kind,
                    "message": refusal.message[:_MESSAGE_CAP],
                    "tokens": prompt + cap,
                    "cost_micros": cost,
                },
            )
            raise
        except BaseException:
            await self.note(note, course_id=binding.course_id, user_id=binding.user_id)
            raise
        settings = replace(request.settings, max_tokens=cap)
        forwarded = replace(request, settings=settings)
        return _Call(self, binding, upstream, forwarded, reservation, prompt, cap)

    async def drain(self) -> None:
        """Wait for the settling under way (and what it started)."""
        while self._finishing:
            await asyncio.gather(*self._finishing, return_exceptions=True)

    async def aclose(self) -> None:
        await self.drain()


def _scrub_error(error: BaseException, secrets: tuple[str, ...]) -> None:
    """Remove ``secrets`` from ``error``'s message and body (in place), before it propagates."""
    if not any(secrets):
        return
    error.args = tuple(scrub(a, secrets) if isinstance(a, str) else a for a in error.args)
    body = getattr(error, "body", None)
    if isinstance(body, str):
        error.body = scrub(body, secrets)  # type: ignore[attr-defined]


class _Output:
    """The text streamed so far (what a cut stream is charged for)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, event: TextDelta | ReasoningDelta | ToolCallDelta) -> None:
        if isinstance(event, ToolCallDelta):
            self.parts.append((event.name or "") + event.arguments)
        else:
            self.parts.append(event.text)

    def text(self) -> str:
        return "".join(self.parts)


class MeteredModel:
    """A course's model bound to one student and one source (``"gateway"``, ``"agent"``):
    each call is reserved, settled and audited (see the module docstring). ``resolve`` gives
    the course's model as configured now, so a teacher's change applies to the next call.

    With ``defer_settling`` a successful call returns (a stream yields its ``ResponseDone``)
    without waiting for its settling and audit record, which ``Meter`` finishes meanwhile:
    the reservation holds the call's maximum until then, so no budget can be overspent, but a
    call started at that moment sees less budget than there is. The gateway uses it (the
    answer reaches the student sooner); an agent's next call should see the settled budget."""

    def __init__(
        self,
        meter: Meter,
        resolve: Callable[[], Awaitable[CourseModel]],
        current: CourseModel,
        *,
        course_id: str,
        user_id: str,
        source: str,
        session_id: str = "",
        defer_settling: bool = False,
        note: AuditNote | None = None,
    ) -> None:
        self._meter = meter
        self._note = note
        self._resolve = resolve
        self._current = current
        self._binding = _Binding(course_id, user_id, source, session_id)
        self._defer = defer_settling

    def __repr__(self) -> str:
        b = self._binding
        return f"MeteredModel({self.id!r}, course={b.course_id!r}, user={b.user_id!r})"

    @property
    def id(self) -> str:
        return self._current.upstream.model.id

    @property
    def provider(self) -> str:
        return self._current.upstream.model.provider

    @property
    def price(self) -> ModelPrice | None:
        return self._current.upstream.price

    @property
    def context_window(self) -> int | None:
        window = getattr(self._current.upstream.model, "context_window", None)
        return window if isinstance(window, int) else None

    @property
    def weights_path(self) -> Any:
        """The embedded model's weights file (its exact tokenizer), else ``None``."""
        return getattr(self._current.upstream.model, "weights_path", None)

    @property
    def max_output_tokens(self) -> int:
        """The most output tokens one call may use (the course's cap)."""
        return self._current.max_output_tokens

    async def _admit(self, request: ModelRequest) -> _Call:
        note, self._note = self._note, None  # the first call's
        try:
            self._current = await self._resolve()
        except BaseException:
            await self._meter.note(
                note, course_id=self._binding.course_id, user_id=self._binding.user_id
            )
            raise
        return await self._meter.admit(self._binding, self._current, request, note)

    async def response(self, request: ModelRequest) -> ModelResponse:
        call = await self._admit(request)
        try:
            response = await call.upstream.model.response(call.request)
        except BaseException as error:
            _scrub_error(error, call.upstream.secrets)  # first: finishing may be interrupted
            await self._meter.finish(call.fail(error))
            raise
        await self._settled(call.settle(response.usage, response.message))
        return response

    async def _settled(self, work: Coroutine[Any, Any, None]) -> None:
        if self._defer:
            self._meter.start(work)
        else:
            await self._meter.finish(work)

    async def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        call = await self._admit(request)
        output = _Output()
        done = False
        try:
            events = call.upstream.model.response_stream(call.request)
            async with aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    if isinstance(event, ResponseDone):
                        message = event.response.message
                        await self._settled(call.settle(event.response.usage, message))
                        done = True
                    else:
                        output.add(event)
                    yield event
        except BaseException as error:
            if not done:
                _scrub_error(error, call.upstream.secrets)
                await self._meter.finish(call.fail(error, output.text()))
            raise
        if not done:
            ended = ModelResponseError(
                "the model stream ended without a final response",
                provider=self.provider,
                model=self.id,
            )
            await self._meter.finish(call.fail(ended, output.text()))
            raise ended

    async def aclose(self) -> None:
        """Nothing to release: the course's model is shared and closed by ``CourseModels``."""
