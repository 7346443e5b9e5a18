"""Property tests of compaction: whatever the conversation, compaction keeps it valid and small.

After any sequence of appends and compactions: the context stays below the hard threshold,
every tool result has its call, the system prompt and the task are kept, summaries never exceed
their budget, the summariser never gets more than its input budget, and compaction terminates.
"""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from agentica.context import (
    SUMMARY_HEADER,
    ContextPolicy,
    EstimateCounter,
    MessageSizes,
    compact,
    is_summary,
    repair_tool_pairs,
    tool_pairs_ok,
)
from agentica.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

SYSTEM = SystemMessage(content="You are a careful agent. " * 10)
TASK = UserMessage(content="Do the long task, step by step.")

# one step: (kind, sizes of the tool results); kind 0 = a tool turn, 1 = text, 2 = user nudge
steps = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.lists(st.integers(0, 6000), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=80,
)


def run_steps(
    plan: list[tuple[int, list[int]]],
    policy: ContextPolicy,
    usable: int,
    summary_reply_factor: int,
) -> None:
    counter = EstimateCounter()
    sizes = MessageSizes(counter)
    budget = policy.budget(usable, 0)
    assert budget is not None
    ids = itertools.count()
    inputs: list[str] = []
    input_budget = max(usable // 3, 256)

    async def summarizer(text: str, budget_tokens: int) -> str:
        inputs.append(text)
        return "summary line. " * (len(text) // summary_reply_factor)  # often over budget

    async def scenario() -> None:
        messages: list[Message] = [SYSTEM, TASK]
        for kind, results in plan:
            if kind == 0:
                calls = [ToolCall(id=f"c{next(ids)}", name="probe", arguments='{"x": 1}')
                         for _ in results]  # fmt: skip
                messages.append(AssistantMessage(tool_calls=calls))
                messages.extend(
                    ToolMessage(tool_call_id=c.id, name="probe", content="r" * n)
                    for c, n in zip(calls, results, strict=True)
                )
            elif kind == 1:
                messages.append(AssistantMessage(content="thinking " * (results[0] // 50)))
            else:
                messages.append(UserMessage(content="keep going"))
            if sizes.total(messages) > budget.soft:
                done = await compact(
                    messages,
                    target=budget.low,
                    sizes=sizes,
                    pinned=[TASK],
                    keep_recent=policy.keep_recent,
                    summary_tokens=policy.summary_tokens,
                    summarizer=summarizer,
                    summarizer_input_tokens=input_budget,
                )
                messages = done.messages
                event("compacted" if not done.summarized else "summarized")
                assert done.after == sizes.total(messages)
                assert done.after <= budget.hard, (done.before, done.after, budget)
            assert tool_pairs_ok(messages) and repair_tool_pairs(messages) == messages
            assert messages[0] is SYSTEM and TASK in messages
            summaries = [m for m in messages if is_summary(m)]
            assert len(summaries) <= 1
            for summary in summaries:
                assert isinstance(summary, SystemMessage)
                body = summary.content[len(SUMMARY_HEADER) :]
                assert counter.count_text(body.strip()) <= policy.summary_tokens
        # the summariser's input (its transcript plus the running summary) stays in budget
        for text in inputs:
            assert counter.count_text(text) <= input_budget + 16

    asyncio.run(scenario())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=steps,
    soft=st.sampled_from([0.4, 0.5, 0.6, 0.7]),
    gap=st.sampled_from([0.1, 0.2, 0.3]),
    keep_recent=st.integers(0, 3),
    usable=st.integers(3_000, 12_000),
    factor=st.sampled_from([2, 8, 40]),
)
def test_compaction_keeps_any_conversation_valid_and_below_the_hard_threshold(
    plan: list[tuple[int, list[int]]],
    soft: float,
    gap: float,
    keep_recent: int,
    usable: int,
    factor: int,
) -> None:
    policy = ContextPolicy(
        soft=soft, hard=min(soft + gap, 1.0), keep_recent=keep_recent, summary_tokens=300
    )
    run_steps(plan, policy, usable, factor)


@settings(max_examples=50, deadline=None)
@given(plan=steps, usable=st.integers(3_000, 8_000))
@example(  # the old turns freed less than the summary message cost (its header uncounted)
    plan=[(0, [0, 0, 0]), (0, [433, 441]), (0, [129, 441, 441]), (0, [193]), (0, [193, 437]),
          (0, [53, 405, 441]), (1, [100]), (1, [4700]), (1, [6000]), (0, [0, 0, 49])],
    usable=3_000,
)  # fmt: skip
def test_a_single_threshold_also_stays_valid(
    plan: list[tuple[int, list[int]]], usable: int
) -> None:
    run_steps(plan, ContextPolicy.single(0.6, summary_tokens=300), usable, 8)
