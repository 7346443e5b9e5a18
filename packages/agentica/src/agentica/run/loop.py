"""The run loop: the one code path every run takes, as an async generator of ``RunEvent``.

One turn is: check the limits (the run's own and its tree's, ``RunBudget``), call the model
(streamed or not), record the reply; if it asked for tools, run them with the three-phase
protocol (started events in call order, concurrent execution, results in call order) and loop;
otherwise validate the final answer and finish.
``Agent.run()`` consumes this stream; nothing else drives a model.

Each handler below is small and does one thing; the state of a run lives in ``_RunState``, never
on the agent, so the agent object only carries configuration and memory.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from agentica.context import assemble_history, repair_tool_pairs
from agentica.errors import (
    ConcurrentRunError,
    ContextOverflowError,
    LimitExceeded,
    ModelResponseError,
    OutputValidationError,
    RunCancelled,
    SessionFormatError,
    StorageError,
    UsageError,
)
from agentica.limits import RunBudget, RunLimits
from agentica.messages import (
    AssistantMessage,
    ContentPart,
    Message,
    RunUsage,
    SystemMessage,
    UserMessage,
)
from agentica.models.base import (
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    ResponseDone,
)
from agentica.models.pricing import ModelPrice, cost_of, price_for
from agentica.run.approval import Decision, PendingCall, apply_decisions, arguments_of
from agentica.run.events import (
    AnswerSentBack,
    ContextCompacted,
    ModelRequestStarted,
    ModelResponseReceived,
    RunCompleted,
    RunEvent,
    RunStarted,
    ToolCallCompleted,
    ToolCallStarted,
    ToolProgress,
)
from agentica.run.result import RunRecord, RunResponse, ToolCallRecord
from agentica.run.window import FINAL_ANSWER_NOTE, ContextWindow, Prepared
from agentica.tools.call import FunctionCall, render_result
from agentica.tools.context import RunContext
from agentica.tools.control import StopRun
from agentica.tools.execution import execute_calls
from agentica.tools.function import Function, _strip_titles
from agentica.tools.guardrails import run_guardrails

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = ["RunInput", "output_schema_for", "paused_run", "pending_calls", "run_events"]

T = TypeVar("T")
RunInput = str | UserMessage | list[ContentPart]
_UNSET: Any = object()
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)


@dataclass(slots=True, kw_only=True)
class _RunState:
    run_id: str
    ctx: RunContext[Any]
    limits: RunLimits
    budget: RunBudget
    settings: ModelSettings
    request_tools: tuple[Any, ...]
    output_schema: OutputSchema | None
    price: ModelPrice | None
    started_at: float
    started: float
    deadline: float | None
    messages: list[Message]
    new_messages: list[Message]
    usage: RunUsage
    window: ContextWindow
    pinned: list[Message]
    calls: list[FunctionCall] = field(default_factory=list)
    allowed: frozenset[str] | None = None
    turn: int = 0
    output_retries: int = 0
    empty_replies: int = 0


def _user_message(user_input: RunInput) -> UserMessage:
    if isinstance(user_input, UserMessage):
        return user_input
    if isinstance(user_input, str | list):
        return UserMessage(content=user_input)
    raise UsageError(
        f"agent.run() takes a str, a UserMessage or a list of content parts, "
        f"not {type(user_input).__name__}"
    )


def _price_of(model: Model) -> ModelPrice | None:
    price = getattr(model, "price", _UNSET)
    return price_for(model.id) if price is _UNSET else price


def output_schema_for(output_type: Any) -> tuple[TypeAdapter[Any], OutputSchema]:
    """The validator and the JSON schema the model is asked to follow for ``output_type``."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = _strip_titles(adapter.json_schema())
    except Exception as exc:
        raise UsageError(f"cannot use {output_type!r} as output_type: {exc}") from exc
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", getattr(output_type, "__name__", "output"))[:64]
    if schema.get("type") != "object":  # providers want an object at the top
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    return adapter, OutputSchema(name=name or "output", schema=schema)


async def _instructions(agent: Agent, ctx: RunContext[Any]) -> str | None:
    text = agent.instructions
    if callable(text):
        value = text(ctx)
        text = await value if inspect.isawaitable(value) else value
    parts = [text] if text else []
    parts.extend(t.instructions for t in agent.toolkits if t.instructions)
    for capability in agent.capabilities:
        extra = await capability.instructions(ctx)
        if extra:
            parts.append(extra)
    if agent.memory.summary:
        parts.append(f"Summary of the earlier conversation:\n{agent.memory.summary}")
    return "\n\n".join(str(p) for p in parts) or None


async def _start(
    agent: Agent,
    user_input: RunInput,
    deps: Any,
    limits: RunLimits | None,
    model_settings: ModelSettings | None,
    *,
    resuming: RunRecord | None = None,
    budget: RunBudget | None = None,
) -> _RunState:
    user = _user_message(user_input)
    limits = limits or agent.limits
    if budget is None:  # a top-level run: its limits are the budget of its whole tree
        budget = RunBudget(limits)
    await agent.load()
    usage = RunUsage()
    run_id = resuming.run_id if resuming is not None else uuid.uuid4().hex
    ctx: RunContext[Any] = RunContext(
        run_id=run_id,
        deps=deps,
        usage=usage,
        agent=agent,
        user_id=agent.user_id,
        session_id=agent.session_id,
        storage=agent.storage,
        input=user.text,
        budget=budget,
        model=agent.model,
        functions=agent.functions,
        session_state=agent.memory.state,
        toolkits=agent.toolkits,
    )
    system = await _instructions(agent, ctx)
    window = getattr(agent.model, "context_window", None)
    policy = agent.history
    history_tokens = policy.max_tokens or (window // 2 if isinstance(window, int) else 16_000)
    earlier = agent.memory.runs[:-1] if resuming is not None else agent.memory.runs
    history = (
        assemble_history([r.messages for r in earlier], budget_tokens=history_tokens, policy=policy)
        if earlier
        else []
    )
    # a paused run left behind (the user moved on) has calls without results: repair them
    messages: list[Message] = [SystemMessage(content=system)] if system else []
    messages.extend(repair_tool_pairs(history, reason="not approved"))
    if resuming is not None:
        messages.extend(resuming.messages)
    else:
        messages.append(user)
    output_schema = agent.output_adapter()[1] if agent.output_type is not None else None
    settings = agent.model_settings.merged(model_settings)
    price = _price_of(agent.model)

    def charge_summary(response: ModelResponse) -> None:
        # a summary is a model call of this run: its tokens and cost count, in the tree too
        cost = cost_of(response.usage, price)
        usage.add_request(response.usage, cost)
        budget.charge_response(response.usage, cost)

    window = await ContextWindow.open(
        agent.context,
        agent.model,
        settings,
        state=agent.memory.state,
        readable="read_file" in agent.functions,
        on_summary=charge_summary,
    )
    task = resuming.messages[0] if resuming is not None and resuming.messages else user
    started = time.monotonic()
    deadline = (
        asyncio.get_running_loop().time() + limits.max_wall_time
        if limits.max_wall_time is not None
        else None
    )
    if budget.deadline is not None:  # the tree's time runs from the top-level start
        deadline = budget.deadline if deadline is None else min(deadline, budget.deadline)
    return _RunState(
        run_id=run_id,
        ctx=ctx,
        limits=limits,
        budget=budget,
        settings=settings,
        request_tools=tuple(f.definition for f in agent.functions.values()),
        output_schema=output_schema,
        price=price,
        started_at=time.time(),
        started=started,
        deadline=deadline,
        messages=messages,
        new_messages=[user] if resuming is None else [],
        usage=usage,
        window=window,
        pinned=[task],
    )


async def _resume(
    agent: Agent,
    decisions: Mapping[str, Decision],
    deps: Any,
    limits: RunLimits | None,
    model_settings: ModelSettings | None,
    budget: RunBudget | None,
) -> tuple[_RunState, list[FunctionCall]]:
    """The state of the agent's paused run, and its calls with ``decisions`` applied."""
    await agent.load()
    record = paused_run(agent)
    if record is None:
        raise UsageError(
            f"agent {agent.name!r} has no paused run to resume: resume() continues a run that "
            "ended with stop_reason='paused'; start a new one with run()"
        )
    first = record.messages[0] if record.messages else None
    user_input: RunInput = first if isinstance(first, UserMessage) else ""
    state = await _start(
        agent, user_input, deps, limits, model_settings, resuming=record, budget=budget
    )
    pending = await _pending_of(agent, state.ctx, record)
    message = record.messages[-1]
    assert isinstance(message, AssistantMessage)
    functions = agent.functions
    calls = [FunctionCall(call, functions.get(call.name)) for call in message.tool_calls]
    apply_decisions(calls, pending, decisions)
    state.calls.extend(calls)
    return state, calls


def _start_turn(state: _RunState) -> None:
    """Count the next model call, or raise ``LimitExceeded`` if it must not start: the tree's
    budget is spent, or this run's own limits are reached."""
    state.budget.check()
    limits, usage = state.limits, state.usage
    if limits.max_turns is not None and state.turn >= limits.max_turns:
        raise LimitExceeded(
            "max_turns", limits.max_turns, f"the model was called {state.turn} times"
        )
    if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
        raise LimitExceeded("max_tokens", limits.max_tokens, f"{usage.total_tokens} tokens used")
    if limits.max_cost is not None and usage.cost is not None and usage.cost >= limits.max_cost:
        raise LimitExceeded("max_cost", limits.max_cost, f"${usage.cost:.4f} spent")
    if (
        limits.max_wall_time is not None
        and time.monotonic() - state.started >= limits.max_wall_time
    ):
        raise LimitExceeded("max_wall_time", limits.max_wall_time, "the run took too long")
    state.budget.start_turn()
    state.turn += 1


async def _within(state: _RunState, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` but no longer than the run's wall-time limit."""
    if state.deadline is None:
        return await awaitable
    scope = asyncio.timeout_at(state.deadline)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            tree = state.budget.deadline
            if tree is not None and tree <= state.deadline:
                raise state.budget.timed_out() from None
            assert state.limits.max_wall_time is not None
            raise LimitExceeded(
                "max_wall_time", state.limits.max_wall_time, "the run took too long"
            ) from None
        raise


async def _with_progress(
    ctx: RunContext[Any], work: Awaitable[None]
) -> AsyncGenerator[ToolProgress, None]:
    """Await ``work`` (the turn's tool calls), yielding what the tools report meanwhile."""
    updates: asyncio.Queue[ToolProgress] = asyncio.Queue()
    ctx.set_progress(lambda source, update: updates.put_nowait(ToolProgress(source, update)))
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            getter = asyncio.ensure_future(updates.get())
            try:
                await asyncio.wait((task, getter), return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():  # the calls finished first (or the run was cancelled)
                    getter.cancel()
                    await asyncio.gather(getter, return_exceptions=True)
            if not getter.cancelled():
                yield getter.result()
        while not updates.empty():
            yield updates.get_nowait()
        await task  # its result or its error
    finally:
        ctx.set_progress(None)
        if not task.done():  # the stream was closed or cancelled mid-turn
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        elif not task.cancelled():  # it failed as the run was cancelled (e.g. the same deadline)
            task.exception()  # seen: the run ends with its own error, not a warning


async def _model_events(
    agent: Agent, state: _RunState, request: ModelRequest, stream: bool
) -> AsyncGenerator[RunEvent | ResponseDone, None]:
    if not stream:
        yield ResponseDone(await _within(state, agent.model.response(request)))
        return
    events = agent.model.response_stream(request)
    try:
        while True:
            try:
                event = await _within(state, anext(events))
            except StopAsyncIteration:
                return
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


async def _request(
    agent: Agent, state: _RunState, slots: list[Message], *, overflow: bool = False
) -> tuple[ModelRequest, Prepared]:
    """The next model request: the conversation repaired and compacted if needed (context
    management, window.py), this turn's slots inserted, the allowed tools offered."""
    tools = state.request_tools
    if state.allowed is not None:
        tools = tuple(t for t in tools if t.name in state.allowed)
    state.messages, prepared = await state.window.prepare(
        state.messages, extra=slots, tools=tools, pinned=state.pinned, overflow=overflow
    )
    if prepared.final_only:
        tools = ()
        state.allowed = frozenset()
        slots = [*slots, SystemMessage(content=FINAL_ANSWER_NOTE)]
    request = ModelRequest(
        messages=_with_slots(state.messages, slots),
        tools=tools,
        settings=state.settings,
        output_schema=state.output_schema,
    )
    return request, prepared


def _compacted(
    state: _RunState, prepared: Prepared, trigger: Literal["soft", "overflow"]
) -> ContextCompacted | None:
    done = prepared.compaction
    if done is None:
        return None
    return ContextCompacted(
        turn=state.turn,
        trigger=trigger,
        before=done.before,
        after=done.after,
        trimmed=done.trimmed,
        summarized=done.summarized,
    )


async def _allowed_tools(agent: Agent, state: _RunState) -> frozenset[str] | None:
    """The tools the capabilities allow for the next call (intersected), or ``None`` for all."""
    allowed: frozenset[str] | None = None
    for capability in agent.capabilities:
        names = await capability.allowed_tools(state.ctx)
        if names is not None:
            allowed = frozenset(names) if allowed is None else allowed & frozenset(names)
    return allowed


async def _slots(agent: Agent, state: _RunState) -> list[Message]:
    """This turn's capability slots (system messages replaced each turn, never stored)."""
    slots: list[Message] = []
    for capability in agent.capabilities:
        text = await capability.system_slot(state.ctx)
        if text:
            slots.append(SystemMessage(content=text))
    return slots


def _with_slots(messages: list[Message], slots: list[Message]) -> list[Message]:
    """The request's messages: ``slots`` after the last message.

    At the end, a slot that changes from turn to turn (the todo list, a checkpoint) leaves the
    rest of the prompt as it was, so a provider's prompt cache (or llama.cpp's KV cache) still
    covers the whole conversation; and the model reads it last, next to what it does now."""
    return [*messages, *slots] if slots else list(messages)


async def _review(
    agent: Agent, state: _RunState, message: AssistantMessage
) -> AnswerSentBack | None:
    """The first capability's request to keep working instead of finishing, if any."""
    for capability in agent.capabilities:
        text = await capability.review_answer(state.ctx, message)
        if text:
            return AnswerSentBack(turn=state.turn, source=capability.name, message=text)
    return None


def _send_back(state: _RunState, text: str) -> None:
    """The model's answer did not end the run: ``text`` is what the model reads next."""
    message = UserMessage(content=text)
    state.messages.append(message)
    state.new_messages.append(message)


async def _check_input(agent: Agent, state: _RunState) -> None:
    """The input guardrails: ``stop`` raises; ``reject`` adds a note the model sees."""
    verdict = await run_guardrails(agent.guardrails.inputs, state.ctx, state.ctx.input)
    if verdict is None:
        return
    if verdict.output.action == "stop":
        raise verdict.error()
    note = SystemMessage(content=f"Note on the user's message: {verdict.output.message}")
    state.messages.append(note)
    state.new_messages.append(note)


async def _check_output(
    agent: Agent, state: _RunState, message: AssistantMessage
) -> AnswerSentBack | None:
    """The output guardrails: ``stop`` raises; ``reject`` sends the model back (bounded)."""
    verdict = await run_guardrails(agent.guardrails.outputs, state.ctx, message.content or "")
    if verdict is None:
        return None
    if verdict.output.action == "stop" or state.output_retries >= state.limits.max_output_retries:
        raise verdict.error()
    state.output_retries += 1
    text = f"Your answer was refused: {verdict.output.message} Answer again."
    return AnswerSentBack(turn=state.turn, source="output_guardrail", message=text)


def _record_reply(state: _RunState, response: ModelResponse) -> AssistantMessage:
    """Charge the reply; keep it in the conversation unless it is empty (see ``_empty_reply``)."""
    message = response.message
    cost = cost_of(response.usage, state.price)
    state.usage.add_request(response.usage, cost)
    state.budget.charge_response(response.usage, cost)
    if not _is_empty(message):
        state.empty_replies = 0  # only empty replies in a row count (see ``_empty_reply``)
        state.messages.append(message)
        state.new_messages.append(message)
    return message


def _is_empty(message: AssistantMessage) -> bool:
    return not message.tool_calls and not (message.content and message.content.strip())


_EMPTY_REPLY = "Your reply was empty. Give your answer to the task, or call a tool."


def _empty_reply(agent: Agent, state: _RunState) -> AnswerSentBack:
    """A reply with no text and no tool calls is no answer: sent back (Claude may end its turn
    with nothing after tool results); a second one in a row raises. The empty reply is left out
    of the conversation (providers reject an empty assistant turn) but was charged."""
    state.empty_replies += 1
    if state.empty_replies > 1:
        raise ModelResponseError(
            f"model {agent.model.id!r} returned two empty replies in a row (no text, no tool "
            "calls), the second after being told its reply was empty; try another model, or "
            "check the instructions and the prompt (a chat template or a stop sequence that "
            "ends the reply at once)",
            provider=agent.model.provider,
            model=agent.model.id,
            retryable=False,
        )
    return AnswerSentBack(turn=state.turn, source="empty_reply", message=_EMPTY_REPLY)


def _prepare_calls(agent: Agent, state: _RunState, message: AssistantMessage) -> list[FunctionCall]:
    """The reply's calls, counted; ``LimitExceeded`` when the tree's tokens, cost or time are
    spent or the calls would pass a tool-call limit (then none of them starts)."""
    state.budget.check()
    limit = state.limits.max_tool_calls
    if limit is not None and state.usage.tool_calls + len(message.tool_calls) > limit:
        raise LimitExceeded(
            "max_tool_calls",
            limit,
            f"{state.usage.tool_calls} calls made and {len(message.tool_calls)} more requested",
        )
    state.budget.charge_tool_calls(len(message.tool_calls))  # no call starts past the budget
    functions = _offered(agent, state)
    calls = [FunctionCall(call, functions.get(call.name)) for call in message.tool_calls]
    state.usage.tool_calls += len(calls)
    state.calls.extend(calls)
    return calls


def _offered(agent: Agent, state: _RunState) -> Mapping[str, Function]:
    """The functions the model may call this turn."""
    if state.allowed is None:
        return agent.functions
    return {n: f for n, f in agent.functions.items() if n in state.allowed}


def _record_results(state: _RunState, calls: Sequence[FunctionCall]) -> StopRun | None:
    stop = None
    for call in calls:
        result = call.to_message()
        state.messages.append(result)
        state.new_messages.append(result)
        if stop is None and isinstance(call.control, StopRun):
            stop = call.control
    return stop


def _parse_output(agent: Agent, state: _RunState, text: str | None) -> tuple[bool, Any]:
    """(True, value) when the answer matches ``output_type``; else (False, retry prompt)."""
    adapter = agent.output_adapter()[0]
    raw = (text or "").strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced.group(1)
    wrapped = (
        state.output_schema is not None
        and "value" in state.output_schema.schema.get("required", ())
        and state.output_schema.schema.get("properties", {}).keys() == {"value"}
    )
    try:
        if wrapped:
            data = json.loads(raw)
            value = adapter.validate_python(data["value"] if isinstance(data, dict) else data)
        else:
            value = adapter.validate_json(raw)
        return True, value
    except (ValidationError, ValueError, KeyError) as exc:
        return False, (
            f"Your final answer does not match the required output schema: {exc}. "
            "Reply again with only a JSON value that matches the schema."
        )


def _tool_records(calls: Sequence[FunctionCall]) -> list[ToolCallRecord]:
    return [
        ToolCallRecord(
            id=c.id, name=c.name, arguments=c.call.arguments, status=c.status,
            content=c.content, duration=c.duration, ref=c.ref,
        )
        for c in calls
    ]  # fmt: skip


def _finish(
    agent: Agent,
    state: _RunState,
    message: AssistantMessage | None,
    stop: StopRun | None,
    output: Any = _UNSET,
) -> tuple[RunResponse, RunRecord]:
    if stop is not None:
        content = None if stop.content is None else render_result(stop.content)
        output = stop.content
        reason: Literal["completed", "stopped"] = "stopped"
    else:
        content = message.content if message is not None else None
        output = content if output is _UNSET else output
        reason = "completed"
    duration = time.monotonic() - state.started
    record = RunRecord(
        run_id=state.run_id,
        messages=state.new_messages,
        usage=state.usage,
        status="completed",
        started_at=state.started_at,
        duration=duration,
        output=content,
        model=agent.model.id,
        tool_calls=_tool_records(state.calls),
    )
    response = RunResponse(
        run_id=state.run_id,
        content=content,
        output=output,
        messages=state.new_messages,
        tool_calls=state.calls,
        usage=state.usage,
        model=agent.model.id,
        stop_reason=reason,
        duration=duration,
    )
    return response, record


def _failure_record(agent: Agent, state: _RunState, exc: BaseException) -> RunRecord:
    cancelled = isinstance(exc, asyncio.CancelledError | GeneratorExit | RunCancelled)
    return RunRecord(
        run_id=state.run_id,
        messages=repair_tool_pairs(
            state.new_messages, reason="cancelled" if cancelled else "interrupted"
        ),
        usage=state.usage,
        status="cancelled" if cancelled else "failed",
        started_at=state.started_at,
        duration=time.monotonic() - state.started,
        error=f"{type(exc).__name__}: {exc}",
        model=agent.model.id,
        tool_calls=_tool_records(state.calls),
    )


async def _end_run(
    agent: Agent, state: _RunState, record: RunRecord, *, hooks: bool = True
) -> None:
    """Remember the run: in memory, through the capabilities' hooks, and in storage."""
    agent.memory.runs.append(record)
    if hooks:  # a paused run is not over: its capabilities' after_run waits for the end
        for capability in agent.capabilities:
            await capability.after_run(state.ctx, record)
    await agent.save(record)


async def _approvals(
    agent: Agent, state: _RunState, calls: Sequence[FunctionCall]
) -> list[PendingCall]:
    """The calls of this turn that must wait for a person's decision."""
    pending = []
    for call in calls:
        request = await _approval_for(agent, state.ctx, call)
        if request is not None:
            pending.append(request)
    return pending


async def _approval_for(
    agent: Agent, ctx: RunContext[Any], call: FunctionCall
) -> PendingCall | None:
    """The first capability's request for a decision on ``call``, if any."""
    for capability in agent.capabilities:
        request = await capability.needs_approval(ctx, call)
        if request is not None:
            return request
    return None


def _pause(
    agent: Agent,
    state: _RunState,
    calls: Sequence[FunctionCall],
    pending: list[PendingCall],
) -> tuple[RunResponse, RunRecord]:
    """End the run as ``paused``: nothing of this turn ran; the record keeps what waits."""
    duration = time.monotonic() - state.started
    record = RunRecord(
        run_id=state.run_id,
        messages=state.new_messages,
        usage=state.usage,
        status="paused",
        started_at=state.started_at,
        duration=duration,
        model=agent.model.id,
        tool_calls=_tool_records(state.calls),
        approvals=[p.call_id for p in pending],
    )
    response = RunResponse(
        run_id=state.run_id,
        content=None,
        output=None,
        messages=state.new_messages,
        tool_calls=list(calls),
        usage=state.usage,
        model=agent.model.id,
        stop_reason="paused",
        duration=duration,
        pending=pending,
    )
    return response, record


def paused_run(agent: Agent) -> RunRecord | None:
    """The agent's last run if it is paused waiting for decisions."""
    runs = agent.memory.runs
    return runs[-1] if runs and runs[-1].status == "paused" else None


async def _pending_of(agent: Agent, ctx: RunContext[Any], record: RunRecord) -> list[PendingCall]:
    """The pending calls of a paused run, with the decisions allowed by today's configuration."""
    message = record.messages[-1] if record.messages else None
    if not isinstance(message, AssistantMessage) or not message.tool_calls:
        raise SessionFormatError(
            f"run {record.run_id} is paused but does not end with the calls it paused on"
        )
    functions = agent.functions
    pending = []
    for tool_call in message.tool_calls:
        if tool_call.id not in record.approvals:
            continue
        call = FunctionCall(tool_call, functions.get(tool_call.name))
        request = await _approval_for(agent, ctx, call)
        pending.append(request or PendingCall(
            call_id=tool_call.id, tool=tool_call.name, arguments=arguments_of(tool_call.arguments)
        ))  # fmt: skip
    return pending


async def pending_calls(agent: Agent) -> list[PendingCall]:
    """The calls the agent's paused run waits on (empty when it is not paused)."""
    await agent.load()
    record = paused_run(agent)
    if record is None:
        return []
    ctx: RunContext[Any] = RunContext(
        run_id=record.run_id, deps=None, usage=RunUsage(), agent=agent,
        user_id=agent.user_id, session_id=agent.session_id, storage=agent.storage,
        input=record.input, model=agent.model, functions=agent.functions,
        session_state=agent.memory.state, toolkits=agent.toolkits,
    )  # fmt: skip
    return await _pending_of(agent, ctx, record)


async def run_events(
    agent: Agent,
    user_input: RunInput | None,
    *,
    deps: Any = None,
    limits: RunLimits | None = None,
    model_settings: ModelSettings | None = None,
    stream: bool = True,
    decisions: Mapping[str, Decision] | None = None,
    budget: RunBudget | None = None,
) -> AsyncGenerator[RunEvent, None]:
    """Run ``agent`` on ``user_input``, yielding events; raises the run's typed error on failure.

    With ``decisions`` (and no input) the agent's paused run resumes instead (approval.py).
    ``budget`` is the run tree's when this run is a subagent's (subagents.py); a top-level run
    creates one from its limits.
    """
    if agent.is_running:
        raise ConcurrentRunError(
            f"agent {agent.name!r} is already running: an agent is one conversation. Await the "
            "running run first, or use agent.clone() for an independent session."
        )
    agent._running = True
    state: _RunState | None = None
    ended = False
    try:
        if decisions is None:
            assert user_input is not None
            state = await _start(agent, user_input, deps, limits, model_settings, budget=budget)
            calls: list[FunctionCall] | None = None
        else:
            state, calls = await _resume(agent, decisions, deps, limits, model_settings, budget)
        yield RunStarted(run_id=state.run_id, agent=agent.name, input=state.ctx.input)
        if calls is None:
            await _check_input(agent, state)
        while True:
            if calls is None:
                _start_turn(state)
                state.allowed = await _allowed_tools(agent, state)
                state.ctx.offered = _offered(agent, state)
                slots = await _slots(agent, state)
                request, prepared = await _request(agent, state, slots)
                compacted = _compacted(state, prepared, "soft")
                if compacted is not None:
                    yield compacted
                window_budget = state.window.budget
                yield ModelRequestStarted(
                    turn=state.turn,
                    context_tokens=prepared.tokens,
                    context_limit=window_budget.usable if window_budget is not None else None,
                    final_only=prepared.final_only,
                )
                response: ModelResponse | None = None
                overflows = 0
                while response is None:
                    try:
                        async with aclosing(
                            _model_events(agent, state, request, stream)
                        ) as model_events:
                            async for event in model_events:
                                if isinstance(event, ResponseDone):
                                    response = event.response
                                else:
                                    yield event
                        break
                    except ContextOverflowError:
                        policy = agent.context
                        if not (policy.overflow_retry and policy.compaction) or (
                            overflows >= policy.max_overflow_retries
                        ):
                            raise
                        overflows += 1
                        request, prepared = await _request(agent, state, slots, overflow=True)
                        compacted = _compacted(state, prepared, "overflow")
                        if compacted is None:
                            raise
                        yield compacted
                if response is None:
                    raise ModelResponseError(
                        f"the stream of model {agent.model.id!r} ended without a final reply",
                        provider=agent.model.provider,
                        model=agent.model.id,
                        retryable=True,
                    )
                message = _record_reply(state, response)
                yield ModelResponseReceived(message=message, turn=state.turn)
                if message.tool_calls:
                    calls = _prepare_calls(agent, state, message)
                    pending = await _approvals(agent, state, calls)
                    if pending:
                        finished = _pause(agent, state, calls, pending)
                        break
                else:
                    review = _empty_reply(agent, state) if _is_empty(message) else None
                    if review is None:
                        review = await _review(agent, state, message)
                    if review is None:
                        review = await _check_output(agent, state, message)
                    if review is not None:
                        _send_back(state, review.message)
                        yield review
                        continue
                    if agent.output_type is None:
                        finished = _finish(agent, state, message, None)
                        break
                    ok, value = _parse_output(agent, state, message.content)
                    if ok:
                        finished = _finish(agent, state, message, None, output=value)
                        break
                    if state.output_retries >= state.limits.max_output_retries:
                        raise OutputValidationError(
                            f"the model's answer did not match {agent.output_type!r} after "
                            f"{state.output_retries} retries: {value}"
                        )
                    state.output_retries += 1
                    _send_back(state, value)
                    yield AnswerSentBack(turn=state.turn, source="output_type", message=value)
                    continue
            for call in calls:  # phase 1: started events, in call order
                yield ToolCallStarted(call=call)
            work = _within(  # phase 2: all calls concurrently (not those already decided)
                state,
                execute_calls(
                    [c for c in calls if c.status == "pending"],
                    state.ctx,
                    agent.tool_settings,
                    known_tools=tuple(_offered(agent, state)),
                    guardrails=agent.guardrails.tools,
                ),
            )
            async with aclosing(_with_progress(state.ctx, work)) as updates:
                async for progress in updates:
                    yield progress
            for capability in agent.capabilities:
                await capability.after_tools(state.ctx, calls)
            state.window.evict(calls)
            stop = _record_results(state, calls)  # phase 3: results, in call order
            for call in calls:
                yield ToolCallCompleted(call=call)
            for call in calls:
                if call.tripped is not None:
                    raise call.tripped
            state.budget.check()  # a subagent of this turn may have spent the tree's budget
            calls = None
            if stop is not None:
                finished = _finish(agent, state, None, stop)
                break
        run_response, record = finished
        ended = True
        await _end_run(agent, state, record, hooks=run_response.stop_reason != "paused")
        yield RunCompleted(response=run_response)
    except BaseException as exc:
        if state is not None and not ended:
            ended = True
            record = _failure_record(agent, state, exc)
            try:
                await asyncio.shield(_end_run(agent, state, record))
            except StorageError as storage_error:  # never hide the run's own error
                exc.add_note(f"and the failed run could not be saved: {storage_error}")
        raise
    finally:
        agent._running = False
