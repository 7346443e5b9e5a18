"""Guardrails: checks that run around an agent's run and around each tool call.

Two levels (the paper's section 3.7), four kinds: ``InputGuardrail`` and ``OutputGuardrail`` see
the user's message and the final answer; ``ToolInputGuardrail`` and ``ToolOutputGuardrail`` see a
call's arguments before the tool runs and its result before the model does. A guardrail is a
function made one by ``@input_guardrail`` (or one of the three other decorators), passed to
``Agent(guardrails=[...])``, that returns a ``GuardrailOutput``; ``run_guardrails`` runs those of
one kind. The public names are re-exported by ``agentica.guardrails``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, TypeVar, cast, overload

from agentica.errors import GuardrailTripped, UsageError
from agentica.tools.context import RunContext

__all__ = [
    "AgentGuardrails",
    "AnyGuardrail",
    "GuardrailOutput",
    "GuardrailVerdict",
    "InputGuardrail",
    "OutputGuardrail",
    "ToolCallInfo",
    "ToolGuardrails",
    "ToolInputGuardrail",
    "ToolOutputGuardrail",
    "input_guardrail",
    "output_guardrail",
    "run_guardrails",
    "tool_input_guardrail",
    "tool_output_guardrail",
]

Action = Literal["allow", "reject", "stop"]


@dataclass(frozen=True, slots=True)
class GuardrailOutput:
    """What a guardrail decided: ``allow``, ``reject`` (tell the model) or ``stop`` the run.

    - ``GuardrailOutput.allow()`` (or returning ``None``): nothing to say;
    - ``GuardrailOutput.reject(message)``: the model sees ``message`` and the run continues (the
      tool is not run, or its result is replaced; an input note is added after the user's
      message; an answer is sent back for another try);
    - ``GuardrailOutput.stop(message)``: the run ends with ``GuardrailTripped``.

    Attributes:
        action: the decision.
        message: for ``reject``, the text the model sees; for ``stop``, the error's message.
        info: anything worth keeping (it is attached to ``GuardrailTripped.info``).
    """

    action: Action = "allow"
    message: str | None = None
    info: Any = None

    @classmethod
    def allow(cls, info: Any = None) -> GuardrailOutput:
        return cls("allow", None, info)

    @classmethod
    def reject(cls, message: str, info: Any = None) -> GuardrailOutput:
        return cls("reject", message, info)

    @classmethod
    def stop(cls, message: str, info: Any = None) -> GuardrailOutput:
        return cls("stop", message, info)


@dataclass(frozen=True, slots=True)
class ToolCallInfo:
    """The call a tool guardrail checks: the tool's name, its validated arguments, the call id."""

    name: str
    arguments: dict[str, Any]
    call_id: str


Result: TypeAlias = GuardrailOutput | None
SubjectT = TypeVar("SubjectT")


class _Guardrail(Generic[SubjectT]):
    """A named check with a timeout; the four public kinds differ in what they are given.

    The function may be ``def`` (run in a worker thread) or ``async def``. A guardrail that
    raises or times out fails closed: ``on_error`` decides, ``"stop"`` by default, or
    ``"reject"``.
    """

    kind = "guardrail"

    def __init__(
        self,
        fn: Callable[..., Result | Awaitable[Result]],
        *,
        name: str | None = None,
        timeout: float | None = 10.0,
        on_error: Literal["stop", "reject"] = "stop",
    ) -> None:
        if not callable(fn):
            raise UsageError(f"a guardrail must be a function, got {type(fn).__name__}")
        if timeout is not None and timeout <= 0:
            raise UsageError("a guardrail's timeout must be positive (or None for no limit)")
        if on_error not in ("stop", "reject"):
            raise UsageError('on_error must be "stop" or "reject"')
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", type(fn).__name__))
        self.timeout = timeout
        self.on_error = on_error
        self._is_async = inspect.iscoroutinefunction(fn)

    async def _call(self, *args: Any) -> Result:
        if self._is_async:
            value = await cast("Awaitable[Result]", self.fn(*args))
        else:  # a synchronous check may be slow: keep it off the event loop
            produced: object = await asyncio.to_thread(self.fn, *args)
            if inspect.isawaitable(produced):
                produced = await produced
            value = cast("Result", produced)
        if value is not None and not isinstance(value, GuardrailOutput):
            raise UsageError(
                f"guardrail {self.name!r} returned {type(value).__name__}; return a "
                "GuardrailOutput (GuardrailOutput.allow(), .reject(msg), .stop(msg)) or None"
            )
        return value

    async def check(self, ctx: RunContext[Any], subject: SubjectT) -> GuardrailVerdict:
        """Run the guardrail and turn its outcome (or its failure) into a verdict."""
        try:
            async with asyncio.timeout(self.timeout):
                output = await self._call(*self._arguments(ctx, subject))
        except TimeoutError:
            return self._failed(f"did not answer within {self.timeout:g} s")
        except UsageError:
            raise
        except Exception as exc:
            return self._failed(f"raised {type(exc).__name__}: {exc}")
        return GuardrailVerdict(self, output or GuardrailOutput.allow())

    def _arguments(self, ctx: RunContext[Any], subject: SubjectT) -> tuple[Any, ...]:
        return (ctx, ctx.agent, subject)

    def _failed(self, what: str) -> GuardrailVerdict:
        message = f"the {self.kind} {self.name!r} {what}"
        return GuardrailVerdict(self, GuardrailOutput(self.on_error, message, None))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class InputGuardrail(_Guardrail[str]):
    """Checks the user's message: ``fn(ctx, agent, text)``."""

    kind = "input guardrail"


class OutputGuardrail(_Guardrail[str]):
    """Checks the final answer: ``fn(ctx, agent, text)``."""

    kind = "output guardrail"


class _ToolGuardrail(_Guardrail[SubjectT]):
    def __init__(
        self,
        fn: Callable[..., Result | Awaitable[Result]],
        *,
        name: str | None = None,
        timeout: float | None = 10.0,
        on_error: Literal["stop", "reject"] = "stop",
        tools: Collection[str] | None = None,
    ) -> None:
        super().__init__(fn, name=name, timeout=timeout, on_error=on_error)
        self.tools = frozenset(tools) if tools is not None else None

    def applies_to(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools


class ToolInputGuardrail(_ToolGuardrail[ToolCallInfo]):
    """Checks a call before the tool runs: ``fn(ctx, call)`` with a ``ToolCallInfo``.

    ``tools``: the tool names it applies to (default: every tool).
    """

    kind = "tool input guardrail"

    def _arguments(self, ctx: RunContext[Any], subject: ToolCallInfo) -> tuple[Any, ...]:
        return (ctx, subject)


class ToolOutputGuardrail(_ToolGuardrail[tuple[ToolCallInfo, Any]]):
    """Checks a tool's result before the model sees it: ``fn(ctx, call, result)``.

    ``tools``: the tool names it applies to (default: every tool).
    """

    kind = "tool output guardrail"

    def _arguments(
        self, ctx: RunContext[Any], subject: tuple[ToolCallInfo, Any]
    ) -> tuple[Any, ...]:
        return (ctx, *subject)


@dataclass(frozen=True, slots=True)
class GuardrailVerdict:
    """One guardrail's decision, with the guardrail that took it."""

    guardrail: _Guardrail[Any]
    output: GuardrailOutput

    def error(self) -> GuardrailTripped:
        default = f"the {self.guardrail.kind} {self.guardrail.name!r} stopped the run"
        message = self.output.message or default
        return GuardrailTripped(message, guardrail=self.guardrail.name, info=self.output.info)


async def run_guardrails(
    guardrails: Sequence[_Guardrail[SubjectT]], ctx: RunContext[Any], subject: SubjectT
) -> GuardrailVerdict | None:
    """Run ``guardrails`` concurrently, each with its own timeout; the first ``stop`` verdict in
    order, else the first ``reject``, else ``None`` (all allowed)."""
    if not guardrails:
        return None
    if len(guardrails) == 1:
        verdicts = [await guardrails[0].check(ctx, subject)]
    else:
        async with asyncio.TaskGroup() as group:  # check() never raises but for misuse
            tasks = [group.create_task(g.check(ctx, subject)) for g in guardrails]
        verdicts = [t.result() for t in tasks]
    for action in ("stop", "reject"):
        for verdict in verdicts:
            if verdict.output.action == action:
                return verdict
    return None


GuardrailFn: TypeAlias = Callable[..., Result | Awaitable[Result]]
G = TypeVar("G", bound=_Guardrail[Any])


def _decorator(
    kind: type[G], fn: GuardrailFn | None, options: dict[str, Any]
) -> G | Callable[[GuardrailFn], G]:
    def decorate(f: GuardrailFn) -> G:
        return kind(f, **options)

    return decorate(fn) if fn is not None else decorate


@overload
def input_guardrail(fn: GuardrailFn, /) -> InputGuardrail: ...
@overload
def input_guardrail(
    *, name: str | None = None, timeout: float | None = 10.0,
    on_error: Literal["stop", "reject"] = "stop",
) -> Callable[[GuardrailFn], InputGuardrail]: ...  # fmt: skip
def input_guardrail(
    fn: GuardrailFn | None = None, /, **options: Any
) -> InputGuardrail | Callable[[GuardrailFn], InputGuardrail]:
    """Make ``fn(ctx, agent, text)`` an agent-level input guardrail.

    ```python
    @input_guardrail
    async def no_secrets(ctx, agent, text):
        if "password" in text.lower():
            return GuardrailOutput.stop("the message contains a password; remove it and ask again")
    ```
    """
    return _decorator(InputGuardrail, fn, options)


@overload
def output_guardrail(fn: GuardrailFn, /) -> OutputGuardrail: ...
@overload
def output_guardrail(
    *, name: str | None = None, timeout: float | None = 10.0,
    on_error: Literal["stop", "reject"] = "stop",
) -> Callable[[GuardrailFn], OutputGuardrail]: ...  # fmt: skip
def output_guardrail(
    fn: GuardrailFn | None = None, /, **options: Any
) -> OutputGuardrail | Callable[[GuardrailFn], OutputGuardrail]:
    """Make ``fn(ctx, agent, text)`` an agent-level output guardrail."""
    return _decorator(OutputGuardrail, fn, options)


@overload
def tool_input_guardrail(fn: GuardrailFn, /) -> ToolInputGuardrail: ...
@overload
def tool_input_guardrail(
    *, name: str | None = None, timeout: float | None = 10.0,
    on_error: Literal["stop", "reject"] = "stop", tools: Collection[str] | None = None,
) -> Callable[[GuardrailFn], ToolInputGuardrail]: ...  # fmt: skip
def tool_input_guardrail(
    fn: GuardrailFn | None = None, /, **options: Any
) -> ToolInputGuardrail | Callable[[GuardrailFn], ToolInputGuardrail]:
    """Make ``fn(ctx, call)`` a guardrail on tool calls' arguments."""
    return _decorator(ToolInputGuardrail, fn, options)


@overload
def tool_output_guardrail(fn: GuardrailFn, /) -> ToolOutputGuardrail: ...
@overload
def tool_output_guardrail(
    *, name: str | None = None, timeout: float | None = 10.0,
    on_error: Literal["stop", "reject"] = "stop", tools: Collection[str] | None = None,
) -> Callable[[GuardrailFn], ToolOutputGuardrail]: ...  # fmt: skip
def tool_output_guardrail(
    fn: GuardrailFn | None = None, /, **options: Any
) -> ToolOutputGuardrail | Callable[[GuardrailFn], ToolOutputGuardrail]:
    """Make ``fn(ctx, call, result)`` a guardrail on tool results."""
    return _decorator(ToolOutputGuardrail, fn, options)


AnyGuardrail: TypeAlias = (
    InputGuardrail | OutputGuardrail | ToolInputGuardrail | ToolOutputGuardrail
)


@dataclass(frozen=True, slots=True)
class AgentGuardrails:
    """An agent's guardrails sorted by kind (``Agent.guardrails``)."""

    inputs: tuple[InputGuardrail, ...] = ()
    outputs: tuple[OutputGuardrail, ...] = ()
    tools: ToolGuardrails | None = None

    @classmethod
    def of(cls, guardrails: Sequence[AnyGuardrail]) -> AgentGuardrails:
        """Sort ``guardrails`` by kind; anything else is a ``UsageError``."""
        inputs, outputs, tool_inputs, tool_outputs = [], [], [], []
        for g in guardrails:
            if isinstance(g, InputGuardrail):
                inputs.append(g)
            elif isinstance(g, OutputGuardrail):
                outputs.append(g)
            elif isinstance(g, ToolInputGuardrail):
                tool_inputs.append(g)
            elif isinstance(g, ToolOutputGuardrail):
                tool_outputs.append(g)
            else:
                raise UsageError(
                    f"{g!r} is not a guardrail: decorate the function with @input_guardrail, "
                    "@output_guardrail, @tool_input_guardrail or @tool_output_guardrail"
                )
        tools = ToolGuardrails(tuple(tool_inputs), tuple(tool_outputs))
        return cls(tuple(inputs), tuple(outputs), tools if tool_inputs or tool_outputs else None)

    @property
    def all(self) -> tuple[AnyGuardrail, ...]:
        extra: tuple[AnyGuardrail, ...] = (
            (*self.tools.inputs, *self.tools.outputs) if self.tools else ()
        )
        return (*self.inputs, *self.outputs, *extra)


@dataclass(frozen=True, slots=True)
class ToolGuardrails:
    """The tool-level guardrails of an agent, as the execution engine uses them: they run inside
    the call's own task, so they never delay or cancel sibling calls."""

    inputs: tuple[ToolInputGuardrail, ...] = ()
    outputs: tuple[ToolOutputGuardrail, ...] = ()

    def for_tool(self, name: str) -> tuple[list[ToolInputGuardrail], list[ToolOutputGuardrail]]:
        return (
            [g for g in self.inputs if g.applies_to(name)],
            [g for g in self.outputs if g.applies_to(name)],
        )
