"""Regressions of compaction found by the property tests (tests/test_compaction_properties.py):
each a case where ``compact()`` did less than it could and stayed above its target."""

from __future__ import annotations

from agentica.context import SUMMARY_HEADER, EstimateCounter, MessageSizes, compact, is_summary
from agentica.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

SYSTEM = SystemMessage(content="system")
TASK = UserMessage(content="go")


def text_turn(tokens: int) -> AssistantMessage:
    """An assistant message of ``tokens`` tokens (by the estimate) that compaction cannot cut."""
    return AssistantMessage(content="t" * ((tokens - 4) * 4))


def summary_body(messages: list[Message]) -> str:
    summary = next(m for m in messages if is_summary(m))
    assert isinstance(summary, SystemMessage)
    return summary.content[len(SUMMARY_HEADER) :].strip()


async def verbose(text: str, budget: int) -> str:
    return "summary line. " * len(text)  # far over its budget: cut to it


async def test_the_turns_summarised_pay_for_the_summary_header_too() -> None:
    # the old turns were chosen to free summary_tokens, but the summary message costs its
    # header too: it saved too little and the target was missed
    counter = EstimateCounter()
    sizes = MessageSizes(counter)
    messages: list[Message] = [SYSTEM, TASK, *(text_turn(100) for _ in range(5))]
    assert sizes.total(messages) == 511
    done = await compact(
        messages, target=420, sizes=sizes, pinned=[TASK], keep_recent=1, summary_tokens=100,
        summarizer=verbose,
    )  # fmt: skip
    assert done.reached and done.after <= 420 and done.after == sizes.total(done.messages)
    assert done.summarized == 3 and done.summarizer_calls == 1
    assert counter.count_text(summary_body(done.messages)) <= 100


async def test_a_summary_costs_less_than_the_few_turns_it_replaces() -> None:
    # the only old turn was smaller than a full summary: the summary made of it cost more,
    # was dropped, and nothing was saved; now the summary's budget shrinks to what it replaces
    sizes = MessageSizes(EstimateCounter())
    messages: list[Message] = [SYSTEM, TASK, text_turn(60), text_turn(100)]
    before = sizes.total(messages)
    done = await compact(
        messages, target=before - 10, sizes=sizes, pinned=[TASK], keep_recent=1,
        summary_tokens=100, summarizer=verbose,
    )  # fmt: skip
    assert done.reached and done.summarized == 1
    summary = next(m for m in done.messages if is_summary(m))
    assert sizes.size(summary) < 60


async def test_a_result_just_longer_than_its_preview_is_cut_to_a_shorter_one() -> None:
    # a 441-character result cut to a 300-character preview and its note cost more than it
    # did: it was left whole and the target missed
    sizes = MessageSizes(EstimateCounter())
    call = ToolCall(id="c1", name="probe", arguments="{}")
    result = ToolMessage(tool_call_id="c1", name="probe", content="r" * 441)
    messages: list[Message] = [
        SYSTEM, TASK, AssistantMessage(tool_calls=[call]), result, text_turn(100),
    ]  # fmt: skip
    before = sizes.total(messages)
    done = await compact(messages, target=before - 10, sizes=sizes, keep_recent=1, summarize=False)
    assert done.reached and done.trimmed == 1
    cut = next(m for m in done.messages if isinstance(m, ToolMessage))
    assert cut.content.startswith("r" * 100) and "the rest of the probe result" in cut.content


async def test_a_tiny_summary_budget_is_kept() -> None:
    # a summary cut to a budget smaller than the cut note was the note, over the budget
    counter = EstimateCounter()
    sizes = MessageSizes(counter)
    messages: list[Message] = [SYSTEM, TASK, *(text_turn(100) for _ in range(4))]
    done = await compact(
        messages, target=200, sizes=sizes, pinned=[TASK], keep_recent=1, summary_tokens=5,
        summarizer=verbose,
    )  # fmt: skip
    assert done.summarized
    assert counter.count_text(summary_body(done.messages)) <= 5
