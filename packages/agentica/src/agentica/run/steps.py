"""The steps of a run and ``decide``, the pure function that picks the next one.

A run is a sequence of steps. ``decide(state, reply)`` reads the run's counters and limits
(``RunState``) and what is known about the model's latest reply (``Reply``) and returns the next
``Step``; it does no I/O and changes nothing, so every rule of the loop (limits, approvals,
answers sent back, output validation) is testable with plain values. The run loop (loop.py)
performs each step with one small handler, which records what it learned in the state or the
reply, and asks again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from agentica.errors import LimitExceeded, ModelResponseError, OutputValidationError
from agentica.limits import RunLimits
from agentica.messages import AssistantMessage, RunUsage
from agentica.run.approval import PendingCall
from agentica.run.output import OutputMismatch, OutputSpec
from agentica.tools.call import FunctionCall, render_result
from agentica.tools.control import StopRun
from agentica.tools.guardrails import GuardrailVerdict

if TYPE_CHECKING:
    from agentica.run.handoff import Handoff

__all__ = [
    "EMPTY_REPLY",
    "CallModel",
    "CheckCalls",
    "CheckOutput",
    "Fail",
    "Finish",
    "LimitReached",
    "Pause",
    "Reply",
    "ReviewAnswer",
    "RunState",
    "RunTools",
    "SendBack",
    "Step",
    "Transfer",
    "decide",
    "echoes",
    "is_empty",
]

EMPTY_REPLY = "Your reply was empty. Give your answer to the task, or call a tool."
ECHO_REPLY = (
    "Your reply repeated a note from the system instead of answering. Give your own answer to "
    "the task, or call a tool."
)


# ----------------------------------------------------------------------------- the steps


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class CallModel:
    """Start the next turn: count it, build the request and call the model."""


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class CheckCalls:
    """Count the reply's tool calls against the tree's budget and ask the capabilities which of
    them wait for a person's decision."""


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class RunTools:
    """Run the turn's calls (three phases: started events, concurrent run, results in order)."""

    calls: Sequence[FunctionCall]


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class Pause:
    """End the run as ``paused``: ``pending`` calls wait for decisions; none of ``calls`` ran."""

    calls: Sequence[FunctionCall]
    pending: Sequence[PendingCall]


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class ReviewAnswer:
    """Ask the capabilities whether the final answer really ends the run."""


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class CheckOutput:
    """Run the output guardrails on the final answer."""


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class SendBack:
    """The answer does not end the run: the model reads ``message`` next.

    ``source`` says why (see ``AnswerSentBack``); ``counter`` is the state counter this counts
    against (an empty reply, or one of the bounded output retries)."""

    source: str
    message: str
    counter: Literal["empty_replies", "output_retries"] | None = None


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class Transfer:
    """Go on with another agent: the reply called ``handoff``'s tool, saying ``reason``."""

    handoff: Handoff
    reason: str


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class Finish:
    """End the run: ``reason`` ``"completed"`` (the model answered) or ``"stopped"`` (a tool
    returned ``StopRun``)."""

    content: str | None
    output: Any
    reason: Literal["completed", "stopped"]


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class LimitReached:
    """Stop on one of the run's own limits (unless its tree's budget is spent: that error wins,
    as the tree stops every run in it)."""

    error: LimitExceeded


@dataclass(slots=True)  # not frozen: a frozen dataclass costs ~1 ms of import time
class Fail:
    """End the run with ``error`` (a model that keeps replying nothing, a refused answer, an
    answer that never matches the output type)."""

    error: Exception


Step: TypeAlias = (
    CallModel
    | CheckCalls
    | RunTools
    | Pause
    | ReviewAnswer
    | CheckOutput
    | SendBack
    | Transfer
    | Finish
    | LimitReached
    | Fail
)


# ----------------------------------------------------------------------------- the state


@dataclass(slots=True)
class Reply:
    """The model's latest reply and what the run learned about it so far.

    Attributes:
        message: the reply.
        calls: its tool calls, once counted (``CheckCalls``).
        pending: the calls waiting for a person's decision (``CheckCalls``).
        ran: the calls ran (``RunTools``); ``stop`` is the first ``StopRun`` a call returned,
            ``handoff`` the handoff the calls made.
        reviewed: the capabilities reviewed the answer; ``review`` is the first that sends it
            back.
        guarded: the output guardrails ran; ``verdict`` is theirs (``None``: allowed).
    """

    message: AssistantMessage
    calls: list[FunctionCall] | None = None
    pending: list[PendingCall] | None = None
    ran: bool = False
    stop: StopRun | None = None
    handoff: Transfer | None = None
    reviewed: bool = False
    review: SendBack | None = None
    guarded: bool = False
    verdict: GuardrailVerdict | None = None


@dataclass(slots=True, kw_only=True)
class RunState:
    """What ``decide`` reads: the run's limits and counters, plain values.

    Attributes:
        limits: the run's own limits.
        usage: the run's usage so far.
        model_id, provider: the model's, for error messages.
        output: the agent's output type, or ``None`` for a text answer.
        started: ``time.monotonic()`` at the start; ``now`` is the time the loop read before
            it asked ``decide`` (for ``max_wall_time``).
        turn: model calls made.
        output_retries: answers sent back for not matching the output type or a guardrail.
        empty_replies: empty replies (or echoes of ``notes``) in a row.
        notes: what the harness said to the model last (this turn's capability slots, the
            last message that sent an answer back): a reply that only repeats one is no answer.
        handoffs: handoffs made in this run.
        reply: the reply being handled, ``None`` between turns.
    """

    limits: RunLimits
    usage: RunUsage
    model_id: str
    provider: str
    output: OutputSpec | None = None
    started: float = 0.0
    now: float = 0.0
    turn: int = 0
    output_retries: int = 0
    empty_replies: int = 0
    notes: tuple[str, ...] = ()
    handoffs: int = 0
    reply: Reply | None = None


def is_empty(message: AssistantMessage) -> bool:
    """No text and no tool calls."""
    return not message.tool_calls and not (message.content and message.content.strip())


def _words(text: str) -> str:
    return " ".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def echoes(message: AssistantMessage, notes: Sequence[str]) -> bool:
    """A reply without tool calls whose text only repeats one of the harness's ``notes`` (or a
    line of one): a small model copying its checkpoint note instead of answering."""
    if message.tool_calls or not message.content or not notes:
        return False
    said = _words(str(message.content))
    if len(said) < 40:  # a short answer may well be words of a note (a todo's name)
        return False
    for note in notes:
        # (a line quoting a call and its result, "- task(...) -> Tom is 63.", is the tool's
        # output: an answer that repeats it answers; seen, a subagent's report sent back)
        lines = [line for line in note.splitlines() if not _QUOTED_CALL.match(line)]
        for part in ("\n".join(lines), *lines):
            if said in _words(part):
                return True
    return False


_QUOTED_CALL = re.compile(r"\s*- [\w.-]+\(.*\) -> ")


# ----------------------------------------------------------------------------- deciding


def decide(state: RunState, reply: Reply | None) -> Step:
    """The next step of the run in ``state``, whose latest reply is ``reply`` (``None`` between
    turns). Pure: the handler of the step it returns does the work and records the outcome."""
    if reply is None:
        return _next_turn(state)
    if reply.message.tool_calls:
        return _after_calls(state, reply)
    return _after_answer(state, reply)


def _next_turn(state: RunState) -> Step:
    """Call the model again, unless one of the run's own limits is reached."""
    limits, usage = state.limits, state.usage
    if limits.max_turns is not None and state.turn >= limits.max_turns:
        return LimitReached(
            LimitExceeded("max_turns", limits.max_turns, f"the model was called {state.turn} times")
        )
    if limits.max_tokens is not None and usage.total_tokens >= limits.max_tokens:
        return LimitReached(
            LimitExceeded("max_tokens", limits.max_tokens, f"{usage.total_tokens} tokens used")
        )
    if limits.max_cost is not None and usage.cost is not None and usage.cost >= limits.max_cost:
        return LimitReached(LimitExceeded("max_cost", limits.max_cost, f"${usage.cost:.4f} spent"))
    if limits.max_wall_time is not None and state.now - state.started >= limits.max_wall_time:
        return LimitReached(
            LimitExceeded("max_wall_time", limits.max_wall_time, "the run took too long")
        )
    return CallModel()


def _after_calls(state: RunState, reply: Reply) -> Step:
    """A reply with tool calls: count them, pause for approvals, run them, then go on (finish
    on a ``StopRun``, hand over to another agent, or call the model again)."""
    if reply.calls is None:
        limit, asked = state.limits.max_tool_calls, len(reply.message.tool_calls)
        if limit is not None and state.usage.tool_calls + asked > limit:
            detail = f"{state.usage.tool_calls} calls made and {asked} more requested"
            return LimitReached(LimitExceeded("max_tool_calls", limit, detail))
        return CheckCalls()
    if reply.pending:
        return Pause(reply.calls, reply.pending)
    if not reply.ran:
        return RunTools(reply.calls)
    if reply.stop is not None:
        content = reply.stop.content
        text = None if content is None else render_result(content)
        return Finish(text, content, "stopped")
    if reply.handoff is not None:
        limit = state.limits.max_handoffs
        if limit is not None and state.handoffs >= limit:
            detail = f"{state.handoffs} handoffs made and another requested"
            return LimitReached(LimitExceeded("max_handoffs", limit, detail))
        return reply.handoff
    return _next_turn(state)


def _after_answer(state: RunState, reply: Reply) -> Step:
    """A final answer: empty, reviewed by the capabilities, guarded, then parsed."""
    if is_empty(reply.message):
        return _empty(state)
    if echoes(reply.message, state.notes):
        return _empty(state, echo=True)
    if not reply.reviewed:
        return ReviewAnswer()
    if reply.review is not None:
        return reply.review
    if not reply.guarded:
        return CheckOutput()
    if reply.verdict is not None:
        return _refused(state, reply.verdict)
    return _answer(state, reply.message)


def _empty(state: RunState, *, echo: bool = False) -> Step:
    """A reply with no text and no tool calls (or one that only repeats a note of the harness,
    ``echo``) is no answer: sent back (Claude may end its turn with nothing after tool results);
    a second one in a row fails the run."""
    if state.empty_replies >= 1:
        what = "replies that only repeat a system note" if echo else "empty replies"
        return Fail(
            ModelResponseError(
                f"model {state.model_id!r} returned two {what} in a row (no answer, no tool "
                "calls), the second after being told so; try another model, or check the "
                "instructions and the prompt (a chat template or a stop sequence that ends the "
                "reply at once)",
                provider=state.provider,
                model=state.model_id,
                retryable=False,
            )
        )
    if echo:
        return SendBack("echo_reply", ECHO_REPLY, "empty_replies")
    return SendBack("empty_reply", EMPTY_REPLY, "empty_replies")


def _refused(state: RunState, verdict: GuardrailVerdict) -> Step:
    """An output guardrail's verdict: ``stop`` fails the run; ``reject`` sends the model back
    (bounded by ``max_output_retries``)."""
    if verdict.output.action == "stop" or state.output_retries >= state.limits.max_output_retries:
        return Fail(verdict.error())
    text = f"Your answer was refused: {verdict.output.message} Answer again."
    return SendBack("output_guardrail", text, "output_retries")


def _answer(state: RunState, message: AssistantMessage) -> Step:
    """The final answer, validated against the output type when there is one."""
    if state.output is None:
        return Finish(message.content, message.content, "completed")
    try:
        value = state.output.parse(message.content)
    except OutputMismatch as mismatch:
        if state.output_retries >= state.limits.max_output_retries:
            return Fail(
                OutputValidationError(
                    f"the model's answer did not match {state.output.type!r} after "
                    f"{state.output_retries} retries: {mismatch}"
                )
            )
        return SendBack("output_type", str(mismatch), "output_retries")
    return Finish(message.content, value, "completed")
