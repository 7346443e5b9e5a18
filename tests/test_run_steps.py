"""``decide``, the pure function that picks a run's next step, tested on plain values: limits,
tool calls and approvals, answers sent back (empty, reviewed, refused, not matching the output
type) and the end of a run. No model, no event loop."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel

from agentica.errors import GuardrailTripped, ModelResponseError, OutputValidationError
from agentica.guardrails import GuardrailOutput, output_guardrail
from agentica.limits import RunLimits
from agentica.messages import AssistantMessage, RunUsage, Usage
from agentica.run.approval import PendingCall
from agentica.run.output import OutputSpec
from agentica.run.steps import (
    EMPTY_REPLY,
    CallModel,
    CheckCalls,
    CheckOutput,
    Fail,
    Finish,
    LimitReached,
    Pause,
    Reply,
    ReviewAnswer,
    RunState,
    RunTools,
    SendBack,
    Step,
    decide,
)
from agentica.testing import call, text, tool_calls
from agentica.tools.call import FunctionCall
from agentica.tools.control import StopRun
from agentica.tools.guardrails import GuardrailVerdict


class Invoice(BaseModel):
    number: str
    total: float


def state(**changes: Any) -> RunState:
    values: dict[str, Any] = {
        "limits": RunLimits(),
        "usage": RunUsage(),
        "model_id": "m",
        "provider": "scripted",
    }
    values.update(changes)
    return RunState(**values)


def decided(state: RunState, reply: Reply | None) -> Step:
    """``decide``, checked to change nothing."""
    before = (copy.copy(state), copy.copy(state.usage), copy.copy(reply))
    step = decide(state, reply)
    assert (state, state.usage, reply) == before
    return step


def answered(content: str | None, **known: Any) -> Reply:
    """A final answer the capabilities and guardrails already passed (unless ``known`` says)."""
    return Reply(text(content) if content is not None else AssistantMessage(), **{
        "reviewed": True, "guarded": True, **known,
    })  # fmt: skip


def counted(message: AssistantMessage, **known: Any) -> Reply:
    """A reply whose calls were counted."""
    calls = [FunctionCall(c, None) for c in message.tool_calls]
    return Reply(message, calls=calls, **{"pending": [], **known})


def verdict(output: GuardrailOutput) -> GuardrailVerdict:
    @output_guardrail
    def judge(text: str) -> GuardrailOutput:
        return output

    return GuardrailVerdict(judge, output)


# ----------------------------------------------------------------------------- turns and limits


def test_between_turns_the_model_is_called() -> None:
    assert decided(state(), None) == CallModel()


@pytest.mark.parametrize(
    ("limits", "counters", "limit", "detail"),
    [
        (RunLimits(max_turns=3), {"turn": 3}, "max_turns", "the model was called 3 times"),
        (RunLimits(max_tokens=100), {"tokens": 100}, "max_tokens", "100 tokens used"),
        (RunLimits(max_cost=0.5), {"cost": 0.5}, "max_cost", "$0.5000 spent"),
        (RunLimits(max_wall_time=10), {"now": 10.0}, "max_wall_time", "the run took too long"),
    ],
)
def test_a_turn_past_a_limit_stops_the_run_with_that_limit(
    limits: RunLimits, counters: dict[str, Any], limit: str, detail: str
) -> None:
    usage = RunUsage()
    usage.add_request(Usage(input_tokens=counters.pop("tokens", 0)), counters.pop("cost", 0.0))
    step = decided(state(limits=limits, usage=usage, **counters), None)
    assert isinstance(step, LimitReached)
    assert step.error.limit == limit
    assert f"reached: {detail}." in str(step.error)


def test_just_under_every_limit_the_model_is_called() -> None:
    limits = RunLimits(max_turns=3, max_tokens=100, max_cost=0.5, max_wall_time=10)
    usage = RunUsage()
    usage.add_request(Usage(input_tokens=99), 0.49)
    assert decided(state(limits=limits, usage=usage, turn=2, now=9.9), None) == CallModel()


def test_an_unknown_cost_never_reaches_the_cost_limit() -> None:
    usage = RunUsage()
    usage.add_request(Usage(input_tokens=10), None)
    assert decided(state(limits=RunLimits(max_cost=0.0), usage=usage), None) == CallModel()


# ----------------------------------------------------------------------------- tool calls


def test_tool_calls_are_counted_and_checked_for_approval_first() -> None:
    reply = Reply(tool_calls(call("a"), call("b")))
    assert decided(state(), reply) == CheckCalls()


def test_calls_that_would_pass_the_tool_call_limit_stop_the_run_before_any_starts() -> None:
    usage = RunUsage(tool_calls=3)
    reply = Reply(tool_calls(call("a"), call("b")))
    step = decided(state(limits=RunLimits(max_tool_calls=4), usage=usage), reply)
    assert isinstance(step, LimitReached)
    assert step.error.limit == "max_tool_calls"
    assert "reached: 3 calls made and 2 more requested." in str(step.error)


def test_a_call_waiting_for_a_person_pauses_the_run_before_any_call_runs() -> None:
    reply = Reply(tool_calls(call("edit", {"path": "a"}), call("ls")))
    calls = [FunctionCall(c, None) for c in reply.message.tool_calls]
    pending = [PendingCall(call_id=calls[0].id, tool="edit", arguments={"path": "a"})]
    reply.calls, reply.pending = calls, pending
    assert decided(state(), reply) == Pause(calls, pending)


def test_counted_calls_with_nothing_pending_run() -> None:
    reply = counted(tool_calls(call("a"), call("b")))
    assert reply.calls is not None
    assert decided(state(), reply) == RunTools(reply.calls)


def test_after_the_calls_ran_the_next_turn_starts_within_the_limits() -> None:
    reply = counted(tool_calls(call("a")), ran=True)
    assert decided(state(), reply) == CallModel()
    step = decided(state(limits=RunLimits(max_turns=1), turn=1), reply)
    assert isinstance(step, LimitReached)
    assert step.error.limit == "max_turns"


def test_a_tools_stop_run_ends_the_run_with_its_content() -> None:
    reply = counted(tool_calls(call("a")), ran=True, stop=StopRun({"done": 1}))
    assert decided(state(), reply) == Finish('{"done":1}', {"done": 1}, "stopped")
    reply.stop = StopRun()
    assert decided(state(), reply) == Finish(None, None, "stopped")


# ----------------------------------------------------------------------------- answers


def test_an_answer_is_reviewed_then_guarded_then_final() -> None:
    reply = Reply(text("42"))
    assert decided(state(), reply) == ReviewAnswer()
    reply.reviewed = True
    assert decided(state(), reply) == CheckOutput()
    reply.guarded = True
    assert decided(state(), reply) == Finish("42", "42", "completed")


def test_a_capability_sending_the_answer_back_wins_over_the_guardrails() -> None:
    back = SendBack("answer_check", "Check your work.")
    reply = Reply(text("42"), reviewed=True, review=back)
    assert decided(state(), reply) is back


def test_an_empty_reply_is_sent_back_once_then_fails_the_run() -> None:
    for empty in (answered(None), answered("  \n")):
        assert decided(state(), empty) == SendBack("empty_reply", EMPTY_REPLY, "empty_replies")
        step = decided(state(empty_replies=1), empty)
        assert isinstance(step, Fail)
        assert isinstance(step.error, ModelResponseError)
        assert "two empty replies in a row" in str(step.error)
        assert not step.error.retryable


CHECKPOINT = (
    "Checkpoint at step 4. Before the next step, ask yourself:\n"
    "- is the task really done? If not, continue with the next step."
)


def test_a_reply_that_only_repeats_a_note_of_the_harness_is_no_answer() -> None:
    echo = answered("Is the task really done? If not, continue with the next step.")
    step = decided(state(notes=(CHECKPOINT,)), echo)
    assert isinstance(step, SendBack) and step.source == "echo_reply"
    assert step.counter == "empty_replies"
    failed = decided(state(notes=(CHECKPOINT,), empty_replies=1), echo)
    assert isinstance(failed, Fail) and "repeat a system note" in str(failed.error)
    # an answer that says more, a short one, or one with calls is an answer
    for reply in (
        answered("The task is done: report.md has the totals, and I checked it."),
        answered("Is the task done?"),
    ):
        assert not isinstance(decided(state(notes=(CHECKPOINT,)), reply), SendBack)
    assert decided(state(), echo) != step  # no notes: nothing to repeat


def test_an_empty_reply_is_not_reviewed() -> None:
    assert decided(state(), Reply(AssistantMessage())) == SendBack(
        "empty_reply", EMPTY_REPLY, "empty_replies"
    )


def test_a_rejecting_output_guardrail_sends_the_answer_back_within_the_retries() -> None:
    rejected = verdict(GuardrailOutput.reject("no numbers"))
    reply = answered("42", verdict=rejected)
    assert decided(state(), reply) == SendBack(
        "output_guardrail", "Your answer was refused: no numbers Answer again.", "output_retries"
    )
    step = decided(state(output_retries=2), reply)
    assert isinstance(step, Fail)
    assert isinstance(step.error, GuardrailTripped)


def test_a_stopping_output_guardrail_fails_the_run_at_once() -> None:
    step = decided(state(), answered("42", verdict=verdict(GuardrailOutput.stop("leak"))))
    assert isinstance(step, Fail)
    assert isinstance(step.error, GuardrailTripped)
    assert str(step.error) == "leak"


# ----------------------------------------------------------------------------- structured output


def test_a_matching_answer_ends_the_run_with_the_validated_value() -> None:
    spec = OutputSpec.of(Invoice)
    step = decided(state(output=spec), answered('{"number": "A1", "total": 9.5}'))
    assert step == Finish('{"number": "A1", "total": 9.5}', Invoice(number="A1", total=9.5),
                          "completed")  # fmt: skip


def test_a_fenced_answer_and_a_wrapped_value_are_accepted() -> None:
    fenced = '```json\n{"number": "A1", "total": 1}\n```'
    step = decided(state(output=OutputSpec.of(Invoice)), answered(fenced))
    assert isinstance(step, Finish)
    assert step.output == Invoice(number="A1", total=1)
    step = decided(state(output=OutputSpec.of(list[int])), answered('{"value": [1, 2]}'))
    assert isinstance(step, Finish)
    assert step.output == [1, 2]


def test_an_answer_not_matching_the_output_type_is_sent_back_then_fails() -> None:
    spec = OutputSpec.of(Invoice)
    step = decided(state(output=spec), answered("about ten euros"))
    assert isinstance(step, SendBack)
    assert (step.source, step.counter) == ("output_type", "output_retries")
    assert step.message.startswith("Your final answer does not match the required output schema")
    step = decided(state(output=spec, output_retries=2), answered("about ten euros"))
    assert isinstance(step, Fail)
    assert isinstance(step.error, OutputValidationError)
    assert "after 2 retries" in str(step.error)
    assert "Invoice" in str(step.error)


def test_an_answer_that_repeats_a_quoted_tool_result_is_no_echo() -> None:
    """As measured on the deep agent: the subagent's report, quoted in the answer check's list
    of calls ("- task(...) -> The oldest ..."), was the answer, and was sent back as an echo
    of the note. A note's own words are still an echo."""
    from agentica.run.steps import echoes

    answer = "The oldest person in people.json is Ines Duarte, born in 1939."
    note = (
        "Before you finish, check your work against the task: Who is the oldest?\n"
        "Your tool calls in this task:\n"
        f'- task({{"description": "Find the oldest"}}) -> {answer}\n'
        "For each thing the task asks for, was it done by one of these calls?"
    )
    assert not echoes(AssistantMessage(content=answer), [note])
    copied = "For each thing the task asks for, was it done by one of these calls?"
    assert echoes(AssistantMessage(content=copied), [note])
