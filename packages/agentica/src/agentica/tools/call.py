"""``FunctionCall``: one invocation of a tool, with its arguments, result, error and id.

``execute()`` is the only way a tool runs. It never raises an ordinary exception: an unknown tool,
arguments that do not validate, a timeout, a ``ToolError`` or any other exception become an error
result the model reads (so one failure cannot cancel or lose its siblings). So do the
``BaseException``s a tool raises itself (``SystemExit`` from a library, a ``CancelledError`` or
``GeneratorExit`` of its own, custom ones); only signals to the run propagate: the run's task being
cancelled, the coroutine being closed, and ``KeyboardInterrupt`` (Ctrl-C means stop). Control
values (``StopRun``, ``Retry``) returned by the tool are kept in ``control``. While it runs,
``running_call()`` (a context variable) names it: a run started by the tool nests under it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Literal

import pydantic_core

from agentica.errors import GuardrailTripped, ToolError
from agentica.messages import ToolCall, ToolMessage
from agentica.storage.records import SpanRecord
from agentica.tools.context import RunContext
from agentica.tools.control import Retry, StopRun
from agentica.tools.function import ArgumentsError, Function
from agentica.tools.guardrails import (
    GuardrailVerdict,
    ToolCallInfo,
    ToolGuardrails,
    run_guardrails,
)

__all__ = ["FunctionCall", "render_result", "running_call"]

_RUNNING: contextvars.ContextVar[FunctionCall | None] = contextvars.ContextVar(
    "agentica_running_call", default=None
)


def running_call() -> FunctionCall | None:
    """The tool call the current task runs, if any (a subagent's run is recorded under it)."""
    return _RUNNING.get()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _raised_by_the_tool(exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether a ``BaseException`` that reached a call is the tool's own failure rather than a
    signal to the run: ``task`` (the one running the call) being cancelled, its coroutine being
    closed (``GeneratorExit`` thrown in from outside the task), or ``KeyboardInterrupt``."""
    if isinstance(exc, KeyboardInterrupt) or task is None:
        return False
    if isinstance(exc, asyncio.CancelledError):
        return task.cancelling() == 0  # nobody asked this task to stop: the tool raised it
    if isinstance(exc, GeneratorExit):
        try:
            return asyncio.current_task() is task
        except RuntimeError:  # closed with no loop running: certainly not the tool's doing
            return False
    return True


def _outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """Run a blocking tool (in its thread): its result, or what it raised as a value. An
    exception set on the future would be thrown into the task, and a ``GeneratorExit`` thrown
    into a coroutine closes every frame of it instead of reaching an ``except``."""
    try:
        return call(), None
    except BaseException as exc:
        return None, exc


async def _call_entrypoint(
    function: Function, kwargs: dict[str, Any], executor: Executor | None
) -> tuple[Any, BaseException | None]:
    """Call the tool: an ``async def`` awaited, a ``def`` run on ``executor``, and an awaitable
    it returns awaited too. Its result, or what a blocking tool raised, as a value: raised from
    this coroutine, a ``StopIteration`` would turn into ``RuntimeError`` (PEP 479). What an
    async tool raises propagates."""
    if function.is_async:
        result = await function.entrypoint(**kwargs)
    else:
        loop = asyncio.get_running_loop()
        call = functools.partial(function.entrypoint, **kwargs)
        run = functools.partial(contextvars.copy_context().run, _outcome, call)
        result, raised = await loop.run_in_executor(executor, run)
        if raised is not None:
            return None, raised
    if inspect.isawaitable(result):
        result = await result
    return result, None


def _failure_message(
    name: str,
    exc: BaseException,
    deadline: asyncio.Timeout,
    timeout: float | None,
    task: asyncio.Task[Any] | None,
) -> str | None:
    """What the model is told about the call of tool ``name`` that raised ``exc``; ``None``
    when ``exc`` is a signal to the run (see ``_raised_by_the_tool``) that must propagate."""
    if isinstance(exc, ToolError):
        return str(exc) or f"tool '{name}' failed"
    if isinstance(exc, TimeoutError):
        if deadline.expired():
            return f"Tool '{name}' timed out after {timeout:g} s and was abandoned."
        return f"Tool '{name}' failed: TimeoutError: {exc}"
    if isinstance(exc, Exception):
        return f"Tool '{name}' failed: {_describe(exc)}"
    if not _raised_by_the_tool(exc, task):
        return None
    return f"Tool '{name}' failed: {_describe(exc)} (raised by the tool itself; the run goes on)"


def render_result(value: Any) -> str:
    """The text the model sees for a tool's return value (JSON unless it is already a string)."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=repr).decode()


class FunctionCall:
    """One call of a tool in a model turn.

    Attributes:
        call: the ``ToolCall`` the model sent (id, name, raw arguments).
        function: the resolved ``Function``, or ``None`` when the model named an unknown tool.
        result: the tool's return value (after control values are unwrapped).
        error: the error text sent to the model, when the call failed.
        exception: the exception the tool raised, if any (for logs and tests).
        control: a ``StopRun`` or ``Retry`` the tool returned, if any.
        status: ``"pending"``, ``"success"`` or ``"error"``.
        ref: the reference of the archived output (set by the evidence archive), if any.
        tripped: the ``GuardrailTripped`` error when a tool guardrail stopped the run.
        duration: seconds the call took.
        notes: remarks added after the call ran (e.g. a repetition warning), appended to what
            the model receives.
        replacement: the text the model receives instead of the result, when the result was
            too large for the context (a preview and where the full text was saved).
        span: the call's step in the run's timeline (``SpanRecord``), when the run records one.
    """

    __slots__ = (
        "call",
        "control",
        "duration",
        "error",
        "exception",
        "function",
        "notes",
        "ref",
        "replacement",
        "result",
        "span",
        "status",
        "tripped",
    )

    def __init__(self, call: ToolCall, function: Function | None) -> None:
        self.call = call
        self.function = function
        self.result: Any = None
        self.error: str | None = None
        self.exception: BaseException | None = None
        self.control: StopRun | Retry | None = None
        self.status: Literal["pending", "success", "error"] = "pending"
        self.ref: str | None = None
        self.tripped: GuardrailTripped | None = None
        self.duration = 0.0
        self.notes: list[str] = []
        self.replacement: str | None = None
        self.span: SpanRecord | None = None

    @property
    def id(self) -> str:
        return self.call.id

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def content_without_notes(self) -> str:
        """The result (or error) as text, with its evidence reference; without ``notes``."""
        if self.replacement is not None:
            return self.replacement
        text = self.error if self.error is not None else render_result(self.result)
        if self.ref is not None:
            text = f"{text}\n[__ref: {self.ref}]"
        return text

    @property
    def content(self) -> str:
        """The text the model receives for this call (with its evidence reference, if archived)."""
        text = self.content_without_notes
        return "\n\n".join((text, *self.notes)) if self.notes else text

    def to_message(self) -> ToolMessage:
        return ToolMessage(
            tool_call_id=self.call.id,
            name=self.call.name,
            content=self.content,
            is_error=self.status == "error",
        )

    def fail(self, message: str, exception: BaseException | None = None) -> None:
        """Record a failure whose ``message`` goes to the model."""
        self.status = "error"
        self.error = message
        self.exception = exception

    async def execute(
        self,
        ctx: RunContext[Any],
        *,
        executor: Executor | None = None,
        default_timeout: float | None = None,
        known_tools: tuple[str, ...] = (),
        guardrails: ToolGuardrails | None = None,
    ) -> None:
        """Run the tool and record its outcome. Raises only when the run must stop: the task's
        cancellation (``asyncio.CancelledError``), ``GeneratorExit``, ``KeyboardInterrupt``."""
        if self.span is not None:
            self.span.start = time.time()
        started = time.perf_counter()
        token = _RUNNING.set(self)
        try:
            await self._execute(ctx, executor, default_timeout, known_tools, guardrails)
        finally:
            _RUNNING.reset(token)
            self.duration = time.perf_counter() - started

    async def _execute(
        self,
        ctx: RunContext[Any],
        executor: Executor | None,
        default_timeout: float | None,
        known_tools: tuple[str, ...],
        guardrails: ToolGuardrails | None,
    ) -> None:
        function = self.function
        if function is None:
            available = ", ".join(known_tools) or "none"
            self.fail(
                f"Unknown tool '{self.call.name}'. Available tools: {available}. "
                "Call one of these, or answer in plain text."
            )
            return
        try:
            kwargs = function.validate_arguments(self.call.arguments)
        except ArgumentsError as exc:
            self.fail(str(exc))
            return
        checks_in, checks_out = guardrails.for_tool(function.name) if guardrails else ([], [])
        info = ToolCallInfo(function.name, dict(kwargs), self.call.id)
        if checks_in and self._blocked(await run_guardrails(checks_in, ctx, info)):
            return
        if function.context_param is not None:
            kwargs[function.context_param] = ctx
        timeout = function.timeout if function.timeout is not None else default_timeout
        deadline = asyncio.timeout(timeout)
        task = asyncio.current_task()
        try:
            async with deadline:
                result, raised = await _call_entrypoint(function, kwargs, executor)
                if raised is not None:
                    raise raised
        except BaseException as exc:
            message = _failure_message(function.name, exc, deadline, timeout, task)
            if message is None:  # a signal to the run, not the tool's failure
                raise
            self.fail(message, exc)
            return
        if isinstance(result, Retry):
            self.control = result
            self.fail(result.message)
            return
        if isinstance(result, StopRun):
            self.control = result
            result = result.content
        if checks_out and self._blocked(await run_guardrails(checks_out, ctx, (info, result))):
            return
        self.result = result
        self.status = "success"

    def _blocked(self, verdict: GuardrailVerdict | None) -> bool:
        """Apply a guardrail's verdict: True when the call must not go on (or its result stand)."""
        if verdict is None or verdict.output.action == "allow":
            return False
        if verdict.output.action == "stop":
            self.tripped = verdict.error()
            self.fail(f"Stopped by a guardrail: {self.tripped}", self.tripped)
        else:
            self.fail(verdict.output.message or f"Refused by guardrail {verdict.guardrail.name!r}.")
        return True

    def __repr__(self) -> str:
        return f"<FunctionCall {self.call.name} id={self.call.id} {self.status}>"
