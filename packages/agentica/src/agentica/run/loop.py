"""The run loop: the one code path every run takes, as an async generator of ``RunEvent``.

``run_events`` starts (or resumes) a run, then repeats one thing: ``decide`` (steps.py, pure)
picks the next step from the run's state, and that step's handler below performs it, yielding
the events it produces and recording what it learned. ``Agent.run()`` consumes this stream;
nothing else drives a model.

A turn is: ``CallModel`` (the run's and its tree's limits, the request within the context
window, the reply charged), then for tool calls ``CheckCalls`` (counted, approvals asked) and
``RunTools`` (the three-phase protocol: started events in call order, concurrent execution,
results in call order), or for an answer ``ReviewAnswer`` and ``CheckOutput`` before it is sent
back (``SendBack``) or ends the run (``Finish``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from agentica.errors import (
    ContextOverflowError,
    LimitExceeded,
    ModelResponseError,
    StorageError,
    UsageError,
)
from agentica.limits import RunBudget, RunLimits
from agentica.messages import AssistantMessage, Message, SystemMessage, UserMessage
from agentica.models.base import ModelRequest, ModelResponse, ModelSettings, ResponseDone
from agentica.run import records, timeline
from agentica.run.approval import Decision, approvals, resumable_run, resumed_calls
from agentica.run.events import (
    AnswerSentBack,
    ContextCompacted,
    HandoffOccurred,
    ModelRequestStarted,
    ModelResponseReceived,
    RunCompleted,
    RunEvent,
    RunStarted,
    ToolCallCompleted,
    ToolCallStarted,
    ToolProgress,
)
from agentica.run.handoff import transfer_of
from agentica.run.state import ActiveRun, RunInput, hand_over, start_run
from agentica.run.steps import (
    CallModel,
    CheckCalls,
    CheckOutput,
    Fail,
    Finish,
    LimitReached,
    Pause,
    Reply,
    ReviewAnswer,
    RunTools,
    SendBack,
    Step,
    Transfer,
    decide,
    echoes,
    is_empty,
)
from agentica.run.window import FINAL_ANSWER_NOTE, Prepared
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.control import StopRun
from agentica.tools.execution import execute_calls
from agentica.tools.guardrails import run_guardrails

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = ["RunInput", "run_events"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Handler: TypeAlias = Callable[["Agent[Any]", ActiveRun, Any], AsyncGenerator[RunEvent, None]]
Quiet: TypeAlias = Callable[["Agent[Any]", ActiveRun, Any], Awaitable[None]]


async def run_events(
    agent: Agent[Any],
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
    ``budget`` is the run tree's when this run is a subagent's (child.py); a top-level run
    creates one from its limits.
    """
    with agent._run_scope():  # one run at a time: ConcurrentRunError otherwise
        run: ActiveRun | None = None
        try:
            run = await _open(
                agent, user_input, decisions, deps=deps, limits=limits,
                model_settings=model_settings, stream=stream, budget=budget,
            )  # fmt: skip
            yield RunStarted(run_id=run.run_id, agent=run.agent.name, input=run.ctx.input)
            if decisions is None:
                await _check_input(run.agent, run)
            while not run.ended:  # each step with the agent active now (handoffs change it)
                run.now = time.monotonic()
                step = decide(run, run.reply)
                quiet = _QUIET.get(type(step))
                if quiet is not None:  # a step that only asks (or raises): no events
                    await quiet(run.agent, run, step)
                else:
                    events = _REPORTING[type(step)](run.agent, run, step)
                    try:
                        async for event in events:
                            yield event
                    finally:  # as aclosing(), a little cheaper: this is the hot path
                        await events.aclose()
        except BaseException as exc:
            if run is not None and not run.ended:
                await _end_failed(agent, run, exc)
            raise


async def _open(
    agent: Agent[Any],
    user_input: RunInput | None,
    decisions: Mapping[str, Decision] | None,
    *,
    deps: Any,
    limits: RunLimits | None,
    model_settings: ModelSettings | None,
    stream: bool,
    budget: RunBudget | None,
) -> ActiveRun:
    """A new run on ``user_input``, or with ``decisions`` the agent's paused run resumed: its
    reply's calls decided, ready to run."""
    if decisions is None:
        assert user_input is not None
        return await start_run(
            agent, user_input, deps=deps, limits=limits, model_settings=model_settings,
            stream=stream, budget=budget,
        )  # fmt: skip
    await agent.load()
    record = resumable_run(agent)
    first = record.messages[0] if record.messages else None
    run = await start_run(
        agent, first if isinstance(first, UserMessage) else "", deps=deps, limits=limits,
        model_settings=model_settings, stream=stream, resuming=record, budget=budget,
    )  # fmt: skip
    message, calls = await resumed_calls(run.agent, run.ctx, record, decisions)
    run.calls.extend(calls)
    run.reply = Reply(message, calls=calls, pending=[])
    return run


async def _end_failed(agent: Agent[Any], run: ActiveRun, exc: BaseException) -> None:
    """Remember the run as failed or cancelled; a storage error is noted on ``exc``, never
    raised instead of it."""
    run.ended = True
    record = records.failed(run, exc)
    try:
        await asyncio.shield(records.remember(agent, run, record))
    except StorageError as storage_error:
        exc.add_note(f"and the failed run could not be saved: {storage_error}")


def _current(run: ActiveRun) -> Reply:
    assert run.reply is not None
    return run.reply


def _add(run: ActiveRun, message: Message) -> None:
    """Add ``message`` to the conversation and to what this run added."""
    run.messages.append(message)
    run.new_messages.append(message)


async def _check_input(agent: Agent[Any], run: ActiveRun) -> None:
    """The input guardrails: ``stop`` raises; ``reject`` adds a note the model sees."""
    verdict = await run_guardrails(agent.guardrails.inputs, run.ctx, run.ctx.input)
    if verdict is None:
        return
    if verdict.output.action == "stop":
        raise verdict.error()
    _add(run, SystemMessage(content=f"Note on the user's message: {verdict.output.message}"))


# ----------------------------------------------------------------------------- CallModel

_KEPT_NOTES = 8


async def _call_model(
    agent: Agent[Any], run: ActiveRun, step: CallModel
) -> AsyncGenerator[RunEvent, None]:
    """One model call: counted in the tree, the request prepared, the reply recorded."""
    run.budget.start_turn()
    run.turn += 1
    model = await run.choose_model(agent.model)
    await _offer(agent, run)
    slots = await _slots(agent, run)
    # this turn's notes, and the last turns' (a model may echo a checkpoint a turn later)
    current = tuple(m.content for m in slots if isinstance(m.content, str))
    run.notes = tuple(dict.fromkeys((*current, *run.notes)))[:_KEPT_NOTES]
    preparing = time.time()
    request, prepared = await _request(run, slots)
    compacted = _compacted(run, prepared, "soft", preparing)
    if compacted is not None:
        yield compacted
    window = run.window.budget
    yield ModelRequestStarted(
        turn=run.turn,
        context_tokens=prepared.tokens,
        context_limit=window.usable if window is not None else None,
        final_only=prepared.final_only,
        model=model.id,
    )
    span = timeline.model_call(run.trace, model.id, model.provider, run.turn, prepared.tokens)
    response: ModelResponse | None = None
    try:
        async with aclosing(_model_reply(agent, run, request, slots)) as model_events:
            async for event in model_events:
                if isinstance(event, ResponseDone):
                    response = event.response
                else:
                    yield event
        if response is None:
            raise ModelResponseError(
                f"the stream of model {model.id!r} ended without a final reply",
                provider=model.provider,
                model=model.id,
                retryable=True,
            )
    except BaseException as exc:
        timeline.model_failed(span, exc)
        raise
    message, cost = _record_reply(run, response)
    timeline.model_replied(span, message, cost)
    yield ModelResponseReceived(message=message, turn=run.turn, model=model.id, cost=cost)


async def _offer(agent: Agent[Any], run: ActiveRun) -> None:
    """Offer this turn the tools the capabilities allow (their restrictions intersect)."""
    try:
        functions = agent.functions
    except UsageError as exc:  # a group's new list cannot be used: keep offering the old one
        log.warning("the agent's changed tools cannot be used (%s); keeping the earlier ones", exc)
        functions = run.ctx.functions
    if functions is not run.ctx.functions:  # a tool group's functions changed
        run.refresh(functions)
    allowed: frozenset[str] | None = None
    for capability in agent.capabilities:
        names = await capability.allowed_tools(run.ctx)
        if names is not None:
            allowed = frozenset(names) if allowed is None else allowed & frozenset(names)
    functions = run.ctx.functions
    if allowed is None:
        run.offer(functions, run.request_tools)
    else:
        run.offer(
            {n: f for n, f in functions.items() if n in allowed},
            tuple(t for t in run.request_tools if t.name in allowed),
        )
    # every capability is asked (a choice is for this turn only, never left for a later one);
    # the first usable one wins
    run.tool_choice = None
    for capability in agent.capabilities:
        choice = await capability.tool_choice(run.ctx)
        usable = choice in run.offered or (choice == "required" and bool(run.offered))
        if run.tool_choice is None and usable:
            run.tool_choice = choice
    run.after_echo = run.require_call and run.tool_choice is None and bool(run.offered)
    if run.after_echo:
        run.tool_choice = "required"  # it echoed a note instead of acting: make it act
    run.require_call = False


async def _slots(agent: Agent[Any], run: ActiveRun) -> list[Message]:
    """This turn's capability slots (system messages replaced each turn, never stored)."""
    slots: list[Message] = []
    for capability in agent.capabilities:
        text = await capability.system_slot(run.ctx)
        if text:
            slots.append(SystemMessage(content=text))
    return slots


def _with_slots(messages: list[Message], slots: list[Message]) -> list[Message]:
    """The request's messages: ``slots`` after the last message.

    At the end, a slot that changes from turn to turn (the todo list, a checkpoint) leaves the
    rest of the prompt as it was, so a provider's prompt cache (or llama.cpp's KV cache) still
    covers the whole conversation; and the model reads it last, next to what it does now."""
    return [*messages, *slots] if slots else list(messages)


async def _request(
    run: ActiveRun, slots: list[Message], *, overflow: bool = False
) -> tuple[ModelRequest, Prepared]:
    """The next model request: the conversation repaired and compacted if needed (context
    management, window.py), this turn's slots inserted, the offered tools (none when only a
    final answer may be given)."""
    # every tool is counted: a model that lists them all in its prompt (listed_tools) sends
    # them whichever are offered, and the count stays the same from turn to turn
    run.messages, prepared = await run.window.prepare(
        run.messages, extra=slots, tools=run.request_tools, pinned=run.pinned, overflow=overflow
    )
    if prepared.final_only:
        run.offer({}, ())
        slots = [*slots, SystemMessage(content=FINAL_ANSWER_NOTE)]
    settings = run.settings
    if run.tool_choice is not None and run.tools:
        settings = settings.merged(ModelSettings(tool_choice=run.tool_choice))
    request = ModelRequest(
        messages=_with_slots(run.messages, slots),
        tools=run.tools,
        listed_tools=run.request_tools if run.tools != run.request_tools else (),
        settings=settings,
        output_schema=run.output.schema if run.output is not None else None,
    )
    return request, prepared


def _compacted(
    run: ActiveRun, prepared: Prepared, trigger: Literal["soft", "overflow"], started: float
) -> ContextCompacted | None:
    """The event of the compaction ``prepared`` did, if it did one (recorded in the timeline
    from ``started``, when the request's preparation began)."""
    done = prepared.compaction
    if done is None:
        return None
    event = ContextCompacted(
        turn=run.turn,
        trigger=trigger,
        before=done.before,
        after=done.after,
        trimmed=done.trimmed,
        summarized=done.summarized,
        summary_error=done.summary_error,
    )
    timeline.compaction(run.trace, event, started)
    return event


async def _model_reply(
    agent: Agent[Any], run: ActiveRun, request: ModelRequest, slots: list[Message]
) -> AsyncGenerator[RunEvent | ResponseDone, None]:
    """The model's events for ``request``, ending with its ``ResponseDone``; when the provider
    rejects the request as too long, the conversation is compacted and the call retried (as
    often as the context policy allows)."""
    overflows = 0
    while True:
        try:
            if not run.stream:
                yield ResponseDone(await _within(run, run.model.response(request)))
                return
            async with aclosing(_streamed(agent, run, request)) as events:
                async for event in events:
                    yield event
            return
        except ContextOverflowError:
            policy = agent.context
            if not (policy.overflow_retry and policy.compaction) or (
                overflows >= policy.max_overflow_retries
            ):
                raise
            overflows += 1
            preparing = time.time()
            request, prepared = await _request(run, slots, overflow=True)
            compacted = _compacted(run, prepared, "overflow", preparing)
            if compacted is None:
                raise
            yield compacted


async def _streamed(
    agent: Agent[Any], run: ActiveRun, request: ModelRequest
) -> AsyncGenerator[RunEvent | ResponseDone, None]:
    """The events of a streamed model call, each awaited within the run's deadline."""
    events = run.model.response_stream(request)
    try:
        while True:
            try:
                event = await _within(run, anext(events))
            except StopAsyncIteration:
                return
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


async def _within(run: ActiveRun, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` but no longer than the run's wall-time limit."""
    if run.deadline is None:
        return await awaitable
    scope = asyncio.timeout_at(run.deadline)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            tree = run.budget.deadline
            if tree is not None and tree <= run.deadline:
                raise run.budget.timed_out() from None
            assert run.limits.max_wall_time is not None
            raise LimitExceeded(
                "max_wall_time", run.limits.max_wall_time, "the run took too long"
            ) from None
        raise


def _record_reply(run: ActiveRun, response: ModelResponse) -> tuple[AssistantMessage, float | None]:
    """Charge the reply to the model that gave it; keep it in the conversation unless it is
    empty (an empty assistant turn is rejected by providers; steps.py sends the model back
    instead). Returns the reply and its cost."""
    message = response.message
    cost = run.charge(response, run.model)
    run.models.append(run.model.id)
    if not is_empty(message):
        if not echoes(message, run.notes) and not run.after_echo:
            # only empty replies (or echoes) in a row count; the call forced after an echo
            # does not end the row (else a model that echoes every other turn never stops)
            run.empty_replies = 0
        _add(run, message)
    run.reply = Reply(message)
    return message, cost


# ----------------------------------------------------------------------------- tool calls


async def _check_calls(agent: Agent[Any], run: ActiveRun, step: CheckCalls) -> None:
    """Count the reply's calls (in the tree too: ``LimitExceeded`` when its budget is spent,
    then none of them starts) and ask which ones wait for a person's decision."""
    reply = _current(run)
    tool_calls = reply.message.tool_calls
    run.budget.charge_tool_calls(len(tool_calls))  # no call starts past the budget
    calls = [FunctionCall(call, run.offered.get(call.name)) for call in tool_calls]
    run.usage.tool_calls += len(calls)
    run.calls.extend(calls)
    reply.calls = calls
    reply.pending = await approvals(agent, run.ctx, calls)


async def _run_tools(
    agent: Agent[Any], run: ActiveRun, step: RunTools
) -> AsyncGenerator[RunEvent, None]:
    """The three-phase protocol; the first ``StopRun`` a call returned is kept on the reply."""
    calls = step.calls
    timeline.tool_calls(run.trace, calls, run.turn)
    for call in calls:  # phase 1: started events, in call order
        yield ToolCallStarted(call=call)
    for call in calls:  # calls a capability refuses fail before anything runs
        for capability in agent.capabilities:
            if call.status != "pending":
                break
            if (reason := await capability.refuse_call(run.ctx, call)) is not None:
                call.fail(reason)
    work = _within(  # phase 2: all calls concurrently (not those already decided)
        run,
        execute_calls(
            [c for c in calls if c.status == "pending"],
            run.ctx,
            agent.tool_settings,
            known_tools=tuple(run.offered),
            guardrails=agent.guardrails.tools,
        ),
    )
    async with aclosing(_with_progress(run.ctx, work)) as updates:
        async for progress in updates:
            yield progress
    for capability in agent.capabilities:
        await capability.after_tools(run.ctx, calls)
    run.window.evict(calls)
    timeline.tools_done(calls)
    handoff = transfer_of(agent.handoffs, calls) if agent.handoffs else None
    stop = _record_results(run, calls)  # phase 3: results, in call order
    for call in calls:
        yield ToolCallCompleted(call=call)
    for call in calls:
        if call.tripped is not None:
            raise call.tripped
    run.budget.check()  # a subagent of this turn may have spent the tree's budget
    reply = _current(run)
    reply.ran, reply.stop = True, stop
    reply.handoff = Transfer(*handoff) if handoff is not None else None


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


def _record_results(run: ActiveRun, calls: Sequence[FunctionCall]) -> StopRun | None:
    stop = None
    for call in calls:
        _add(run, call.to_message())
        if stop is None and isinstance(call.control, StopRun):
            stop = call.control
    return stop


# ----------------------------------------------------------------------------- answers


async def _review_answer(agent: Agent[Any], run: ActiveRun, step: ReviewAnswer) -> None:
    """Ask the capabilities whether the answer ends the run."""
    reply = _current(run)
    reply.review = await _first_review(agent, run.ctx, reply.message)
    reply.reviewed = True


async def _first_review(
    agent: Agent[Any], ctx: RunContext[Any], message: AssistantMessage
) -> SendBack | None:
    """The first capability's request to keep working instead of finishing (a checkpoint:
    "is it really done?"), if any."""
    for capability in agent.capabilities:
        text = await capability.review_answer(ctx, message)
        if text:
            return SendBack(capability.name, text)
    return None


async def _check_output(agent: Agent[Any], run: ActiveRun, step: CheckOutput) -> None:
    """The output guardrails' verdict on the answer."""
    reply = _current(run)
    content = reply.message.content or ""
    reply.verdict = await run_guardrails(agent.guardrails.outputs, run.ctx, content)
    reply.guarded = True


async def _send_back(
    agent: Agent[Any], run: ActiveRun, step: SendBack
) -> AsyncGenerator[RunEvent, None]:
    """The answer did not end the run: ``step.message`` is what the model reads next."""
    if step.counter == "empty_replies":
        run.empty_replies += 1
    elif step.counter == "output_retries":
        run.output_retries += 1
    run.sent_back += 1
    _add(run, UserMessage(content=step.message))
    run.require_call = step.source == "echo_reply"
    run.reply = None
    run.notes = (step.message,)  # (the next turn's slots are added before it)
    yield AnswerSentBack(turn=run.turn, source=step.source, message=step.message)


# ----------------------------------------------------------------------------- the end


async def _finish(
    agent: Agent[Any], run: ActiveRun, step: Finish
) -> AsyncGenerator[RunEvent, None]:
    response, record = records.completed(run, step.content, step.output, step.reason)
    run.ended = True
    await records.remember(run.owner, run, record)
    yield RunCompleted(response=response)


async def _pause(agent: Agent[Any], run: ActiveRun, step: Pause) -> AsyncGenerator[RunEvent, None]:
    """End the run as ``paused``; its capabilities' ``after_run`` waits for the real end."""
    response, record = records.paused(run, step.calls, step.pending)
    run.ended = True
    await records.remember(run.owner, run, record, hooks=False)
    yield RunCompleted(response=response)


async def _transfer(
    agent: Agent[Any], run: ActiveRun, step: Transfer
) -> AsyncGenerator[RunEvent, None]:
    """Go on with the agent the reply handed the conversation to (state.py ``hand_over``)."""
    record = await hand_over(run, step)
    yield HandoffOccurred(
        from_agent=record.source, to_agent=record.target, reason=record.reason, turn=run.turn
    )


async def _stop_on_limit(agent: Agent[Any], run: ActiveRun, step: LimitReached) -> None:
    run.budget.check()  # the tree's budget spent: its error, which stops every run of the tree
    raise step.error


async def _fail(agent: Agent[Any], run: ActiveRun, step: Fail) -> None:
    raise step.error


_REPORTING: dict[type[Step], Handler] = {
    CallModel: _call_model,
    RunTools: _run_tools,
    SendBack: _send_back,
    Transfer: _transfer,
    Finish: _finish,
    Pause: _pause,
}
"""The handlers of the steps that report events: async generators of them."""

_QUIET: dict[type[Step], Quiet] = {
    CheckCalls: _check_calls,
    ReviewAnswer: _review_answer,
    CheckOutput: _check_output,
    LimitReached: _stop_on_limit,
    Fail: _fail,
}
"""The handlers of the steps that report nothing: they ask the capabilities, or raise."""
