"""Context management in runs: token accounting, eviction, dual-threshold compaction, forced
answers, repair and the retry after a provider's context-overflow error."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentica import Agent, ContextPolicy, RunLimits, RunUsage
from agentica.context import (
    STEPS_HEADER,
    SUMMARY_HEADER,
    EstimateCounter,
    MessageSizes,
    compact,
    is_summary,
)
from agentica.deep import DeepAgent
from agentica.errors import ContextOverflowError, LimitExceeded, ModelAuthError, UsageError
from agentica.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentica.models import Claude, ModelRequest, OpenAILike
from agentica.run import ContextCompacted, ModelRequestStarted, RunCompleted, RunRecord
from agentica.run.window import FINAL_ANSWER_NOTE, RESULTS_STATE_KEY
from agentica.testing import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    FunctionModel,
    HTTPFault,
    ScriptedModel,
    call,
    tool_calls,
)
from agentica.tools import tool


@tool
def dump(n: int, size: int = 1200) -> str:
    """Return a long report numbered n.

    Args:
        n: which report.
        size: its length in characters.
    """
    line = f"report {n}: " + "lorem ipsum dolor sit amet " * 3
    return (line * (size // len(line) + 1))[:size]


def paired(messages: list[Message]) -> bool:
    """Every tool result follows its call's message; every call has its result."""
    pending: set[str] = set()
    for m in messages:
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in pending:
                return False
            pending.discard(m.tool_call_id)
        else:
            if pending:
                return False
            if isinstance(m, AssistantMessage):
                pending = {c.id for c in m.tool_calls}
    return not pending


def steps_model(steps: int, *, window: int, size: int = 1200) -> FunctionModel:
    """Calls dump(1..steps) one per turn, then answers; answers at once when offered no tools.
    It counts its own calls (compaction removes old ones from the messages)."""
    made = 0

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        nonlocal made
        if not request.tools:
            return f"final answer after {made} calls"
        if made >= steps:
            return f"done after {made} calls"
        made += 1
        return tool_calls(call("dump", n=made, size=size))

    return FunctionModel(reply, context_window=window)


async def summarizer(text: str, budget: int) -> str:
    return f"[summarised {len(text)} characters]"


async def events_of(agent: Agent, prompt: str) -> list[Any]:
    return [event async for event in agent.run_stream(prompt)]


# ----------------------------------------------------------------------------- accounting


async def test_every_model_request_reports_its_tokens_and_the_usable_window() -> None:
    model = steps_model(3, window=100_000)
    agent = Agent(model=model, tools=[dump], model_settings=None)
    events = await events_of(agent, "dump three reports")
    starts = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert len(starts) == 4
    tokens = [e.context_tokens for e in starts]
    assert all(t is not None for t in tokens)
    assert tokens == sorted(tokens) and tokens[-1] - tokens[0] > 3 * 250  # 3 results grew it
    assert all(e.context_limit == 100_000 - 4096 for e in starts)
    assert not any(e.final_only for e in starts)


async def test_without_a_known_window_tokens_are_counted_but_nothing_is_compacted() -> None:
    model = steps_model(3, window=0)
    model.context_window = None
    agent = Agent(model=model, tools=[dump])
    events = await events_of(agent, "go")
    starts = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert all(e.context_tokens and e.context_limit is None for e in starts)
    assert not any(isinstance(e, ContextCompacted) for e in events)


# ----------------------------------------------------------------------------- eviction


async def test_a_huge_result_is_cut_to_a_preview_for_an_agent_without_file_tools() -> None:
    model = ScriptedModel([tool_calls(call("dump", n=1, size=200_000)), "ok"])
    agent = Agent(model=model, tools=[dump], context=ContextPolicy(evict_tokens=2_000))
    response = await agent.run("dump")
    seen = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage)).content
    assert len(seen) < 3_000
    assert seen.startswith("report 1:") and "characters omitted" in seen
    assert "was too long and was cut to this preview" in seen
    assert RESULTS_STATE_KEY not in agent.memory.state  # nowhere to read it back: not stored
    assert response.tool_calls[0].replacement is not None


async def test_a_deep_agent_saves_an_evicted_result_where_read_file_finds_it() -> None:
    big = "\n".join(f"row {i}: value {i * 7}" for i in range(20_000))

    @tool
    def export() -> str:
        """Export the whole table."""
        return big

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return tool_calls(call("export"))
        if len(results) == 1:
            path = results[0].content.split("saved to ")[1].split(";")[0]
            return tool_calls(call("read_file", path=path, offset=12_000, limit=2))
        return results[-1].content

    model = FunctionModel(reply, context_window=32_000)
    agent = DeepAgent(model=model, tools=[export], subagents=False, answer_check=False)
    response = await agent.run("export the table and show rows 12000-12001")
    assert response.content is not None
    assert "row 12000: value 84000" in response.content and "row 12001" in response.content
    first = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage)).content
    assert "/.results/export-" in first and len(first) < 3_000
    saved = agent.memory.state[RESULTS_STATE_KEY]
    assert [entry["content"] for entry in saved.values()] == [big]


async def test_evicted_results_are_capped_per_session_oldest_first() -> None:
    model = ScriptedModel(
        [tool_calls(call("dump", n=i, size=20_000)) for i in range(1, 5)] + ["ok"]
    )

    @tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        return path

    policy = ContextPolicy(evict_tokens=1_000, max_evicted=2)
    agent = Agent(model=model, tools=[dump, read_file], context=policy)
    await agent.run("dump four")
    saved = agent.memory.state[RESULTS_STATE_KEY]
    assert len(saved) == 2
    assert [v["content"][:9] for v in saved.values()] == ["report 3:", "report 4:"]


async def test_a_result_over_the_saved_bytes_cap_is_not_claimed_saved_nor_pushes_others_out() -> (
    None
):
    """A result larger than ``max_evicted_bytes`` was dropped while its note gave its path (and
    it pushed out the results saved before it): every path a note gives must be readable."""

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return tool_calls(call("dump", n=1, size=20_000))  # evicted and saved
        if len(results) == 1:
            return tool_calls(call("dump", n=2, size=200_000))  # over the cap: not saved
        if len(results) == 2:
            path = results[0].content.split("saved to ")[1].split(";")[0]
            return tool_calls(call("read_file", path=path, limit=1))
        return results[-1].content

    model = FunctionModel(reply, context_window=32_000)
    policy = ContextPolicy(evict_tokens=1_000, max_evicted_bytes=50_000)
    agent = DeepAgent(
        model=model, tools=[dump], subagents=False, answer_check=False, context=policy
    )
    response = await agent.run("dump two reports")
    saved = agent.memory.state[RESULTS_STATE_KEY]
    seen = [m.content for m in model.requests[-1].messages if isinstance(m, ToolMessage)]
    assert "/.results/" not in seen[1] and "report 2:" in seen[1]
    assert "not saved" in seen[1] and "50000 bytes" in seen[1]
    named = re.findall(r"/\.results(/[\w.-]+\.txt)", "\n".join(seen))
    assert named and all(path in saved for path in named)  # every path a note gives exists
    assert response.content is not None and "report 1:" in response.content  # read back


async def test_compaction_does_not_repeat_a_note_whose_saved_copy_was_deleted() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        return path

    model = steps_model(12, window=12_000, size=20_000)
    policy = ContextPolicy(evict_tokens=1_000, max_evicted=2, summarizer=summarizer)
    agent = Agent(model=model, tools=[dump, read_file], context=policy)
    await agent.run("dump")
    saved = agent.memory.state[RESULTS_STATE_KEY]
    older = [
        m.content.rsplit("\n", 1)[-1]
        for m in model.requests[-1].messages
        if isinstance(m, ToolMessage) and "an older output" in m.content
    ]
    assert any("was deleted to make room" in line for line in older)
    for line in older:  # a compacted note names a saved path only while it exists
        assert all(path in saved for path in re.findall(r"saved to /\.results(/[\w.-]+)", line))


# ----------------------------------------------------------------------------- compaction


async def test_above_the_soft_threshold_old_results_are_compacted_and_pairs_stay_intact() -> None:
    model = steps_model(30, window=6_000)
    policy = ContextPolicy(summarizer=summarizer, reserve_output=500)
    agent = Agent(model=model, tools=[dump], context=policy, limits=RunLimits(max_turns=40))
    events = await events_of(agent, "dump thirty reports")
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    starts = [e for e in events if isinstance(e, ModelRequestStarted)]
    usable = 6_000 - 500
    assert compactions and all(c.trigger == "soft" for c in compactions)
    assert all(c.after <= int(usable * 0.4) < c.before for c in compactions)
    assert all((e.context_tokens or 0) <= int(usable * 0.8) for e in starts)
    assert all(paired(list(r.messages)) for r in model.requests)
    # the task is pinned: every request still carries it
    assert all(any(getattr(m, "content", None) == "dump thirty reports" for m in r.messages)
               for r in model.requests)  # fmt: skip
    assert events[-1].response.content == "done after 30 calls"
    # hysteresis: after a compaction the context grows for several steps before the next one
    turns = [c.turn for c in compactions]
    assert len(turns) < len(starts) / 2


async def test_summaries_replace_the_oldest_turns_and_roll_up() -> None:
    inputs: list[str] = []

    async def recording(text: str, budget: int) -> str:
        inputs.append(text)
        return f"summary #{len(inputs)}: reports dumped so far"

    model = steps_model(80, window=5_000, size=400)
    policy = ContextPolicy(summarizer=recording, reserve_output=500, keep_recent=1)
    agent = Agent(model=model, tools=[dump], context=policy, limits=RunLimits(max_turns=90))
    events = await events_of(agent, "dump eighty short reports")
    summarized = [e for e in events if isinstance(e, ContextCompacted) and e.summarized]
    assert summarized, "stubs alone never got below the low watermark"
    last = model.requests[-1].messages
    summaries = [m for m in last if is_summary(m)]
    assert len(summaries) == 1  # one summary, rolled up, never a pile of them
    assert summaries[0].content.startswith(SUMMARY_HEADER + "\nsummary #")
    assert any("[summary of earlier steps]" in text for text in inputs[1:])  # rolling
    assert all(paired(list(r.messages)) for r in model.requests)


async def test_summaries_by_the_agents_model_count_in_usage_and_limits() -> None:
    def agent_for(limits: RunLimits) -> tuple[Agent, FunctionModel]:
        model = steps_model(30, window=6_000)
        policy = ContextPolicy(reserve_output=500, keep_recent=1)  # the agent's model summarises
        return Agent(model=model, tools=[dump], context=policy, limits=limits), model

    agent, model = agent_for(RunLimits(max_turns=60))
    response = await agent.run("dump thirty reports")
    summaries = [r for r in model.requests if not r.tools]
    assert summaries, "the run never summarised"
    assert response.usage.requests == len(model.requests)  # every model call is counted
    last = response.messages[-1]
    assert isinstance(last, AssistantMessage) and last.usage is not None
    # the tokens spent before the final call, summaries included: a limit there stops the run
    spent = response.usage.total_tokens - last.usage.input_tokens - last.usage.output_tokens
    again, _ = agent_for(RunLimits(max_turns=60, max_tokens=spent))
    with pytest.raises(LimitExceeded) as error:
        await again.run("dump thirty reports")
    assert error.value.limit == "max_tokens"


async def test_a_failing_summarizer_falls_back_to_a_digest() -> None:
    async def broken(text: str, budget: int) -> str:
        raise RuntimeError("summariser down")

    model = steps_model(40, window=5_000, size=400)
    policy = ContextPolicy(summarizer=broken, reserve_output=500, keep_recent=1)
    agent = Agent(model=model, tools=[dump], context=policy, limits=RunLimits(max_turns=50))
    response = await agent.run("dump forty short reports")
    assert response.content == "done after 40 calls"
    summary = next(m for m in model.requests[-1].messages if is_summary(m))
    assert "- called dump(n=" in summary.content


def report_turns(count: int, size: int = 2_000) -> list[Message]:
    """``count`` tool turns, each result starting with a line that names its finding."""
    messages: list[Message] = []
    for n in range(1, count + 1):
        read = ToolCall(id=f"r{n}", name="read", arguments=json.dumps({"n": n}))
        messages.append(AssistantMessage(tool_calls=[read]))
        body = f"finding {n}: codeword-{n}\n" + "filler text of the report. " * (size // 27)
        messages.append(ToolMessage(tool_call_id=f"r{n}", name="read", content=body))
    return messages


async def test_the_summariser_sees_original_results_and_the_task_a_step_log_keeps_findings() -> (
    None
):
    inputs: list[str] = []

    async def forgetful(text: str, budget: int) -> str:
        inputs.append(text)
        return "The agent read several reports."  # a small model's summary: no findings

    task = UserMessage(content="Collect the codeword of every report.")
    messages: list[Message] = [SystemMessage(content="system"), task, *report_turns(8)]
    sizes = MessageSizes(EstimateCounter())
    done = await compact(
        messages, target=1_200, sizes=sizes, pinned=[task], keep_recent=2, summary_tokens=400,
        summarizer=forgetful, summarizer_input_tokens=3_000,
    )  # fmt: skip
    assert done.summarized and done.after <= 1_200
    # the summariser got the results, not the stubs step (1) left, and the task for context
    assert "finding 1: codeword-1" in inputs[0] and "was removed to save context" not in inputs[0]
    assert "Collect the codeword of every report." in inputs[0]
    summary = next(m for m in done.messages if is_summary(m))
    assert "The agent read several reports." in summary.content
    log = summary.content.split(STEPS_HEADER, 1)[1]
    summarized_calls = done.summarized // 2
    for n in range(1, summarized_calls + 1):  # each summarised call with its result's first line
        assert f"- called read(n={n}) -> finding {n}: codeword-{n}" in log


async def test_recent_results_cut_last_keep_their_start_and_old_ones_a_preview() -> None:
    start: list[Message] = [SystemMessage(content="system"), UserMessage(content="go")]
    messages = [*start, *report_turns(3, size=6_000)]
    sizes = MessageSizes(EstimateCounter())
    done = await compact(messages, target=200, sizes=sizes, keep_recent=2, summarize=False)
    results = [m for m in done.messages if isinstance(m, ToolMessage)]
    assert len(results) == 3 and not done.reached  # nothing is dropped without a summary
    assert all(f"finding {n}: codeword-{n}" in r.content for n, r in enumerate(results, 1))
    assert "the rest of the read result" in results[-1].content
    assert all(len(r.content) < 1_000 for r in results)


async def test_the_agents_own_model_summarises_by_default() -> None:
    made = 0

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        nonlocal made
        if not request.tools and "compress the earlier part" in str(messages[0].content):
            return "the model's summary"
        if made >= 60:
            return "finished"
        made += 1
        return tool_calls(call("dump", n=made, size=400))

    model = FunctionModel(reply, context_window=5_000)
    policy = ContextPolicy(reserve_output=500, keep_recent=1)
    agent = Agent(model=model, tools=[dump], context=policy, limits=RunLimits(max_turns=70))
    await agent.run("dump")
    summary = next(m for m in model.requests[-1].messages if is_summary(m))
    assert "the model's summary" in summary.content


async def test_above_the_hard_threshold_no_tools_are_offered_and_the_model_answers() -> None:
    task = "Process this input:\n" + "data " * 3_000  # ~3,750 tokens: more than 0.8 of 4,000
    model = steps_model(10, window=4_600)
    policy = ContextPolicy(summarizer=summarizer, reserve_output=600)
    agent = Agent(model=model, tools=[dump], context=policy)
    events = await events_of(agent, task)
    starts = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert starts[0].final_only
    assert model.requests[0].tools == ()
    assert any(
        isinstance(m, SystemMessage) and m.content == FINAL_ANSWER_NOTE
        for m in model.requests[0].messages
    )
    assert events[-1].response.content == "final answer after 0 calls"


async def test_single_threshold_compacts_far_more_often_than_two() -> None:
    counts = {}
    for name, policy in {
        "dual": ContextPolicy(summarizer=summarizer, reserve_output=500),
        "single": ContextPolicy.single(0.6, summarizer=summarizer, reserve_output=500),
    }.items():
        model = steps_model(40, window=8_000, size=800)
        agent = Agent(model=model, tools=[dump], context=policy, limits=RunLimits(max_turns=50))
        events = await events_of(agent, "dump forty reports")
        counts[name] = sum(isinstance(e, ContextCompacted) for e in events)
    assert counts["dual"] >= 1
    assert counts["single"] >= 3 * counts["dual"]


async def test_with_management_off_the_context_just_grows() -> None:
    model = steps_model(20, window=6_000)
    agent = Agent(
        model=model, tools=[dump], context=ContextPolicy.off(), limits=RunLimits(max_turns=30)
    )
    events = await events_of(agent, "go")
    starts = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert not any(isinstance(e, ContextCompacted) for e in events)
    assert (starts[-1].context_tokens or 0) > 6_000


def test_policy_validation_explains_the_fix() -> None:
    with pytest.raises(UsageError, match=r"soft=0\.8 must be below hard=0\.7"):
        ContextPolicy(soft=0.8, hard=0.7)
    with pytest.raises(UsageError, match=r"ContextPolicy.single\(0.6\)"):
        ContextPolicy(soft=0.6, hard=0.8, hysteresis=False)
    with pytest.raises(UsageError, match=r"low=0\.7 must be in"):
        ContextPolicy(low=0.7)
    with pytest.raises(UsageError, match="give a fraction"):
        ContextPolicy(soft=0.0)
    assert ContextPolicy().low_watermark == pytest.approx(0.4)
    assert ContextPolicy(soft=0.4, hard=0.9).low_watermark == pytest.approx(0.2)
    assert ContextPolicy.single(0.7).low_watermark == 0.7


# ----------------------------------------------------------------------------- repair


async def test_a_history_with_a_dangling_call_and_a_stray_result_is_repaired() -> None:
    model = ScriptedModel(["fine"])
    agent = Agent(model=model)
    broken: list[Message] = [
        UserMessage(content="earlier"),
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="dump", arguments="{}")]),
        ToolMessage(tool_call_id="zz", name="dump", content="stray"),
        AssistantMessage(content="hm"),
    ]
    agent.memory.runs.append(
        RunRecord(run_id="old", messages=broken, usage=RunUsage(), status="completed",
                  started_at=0.0, duration=0.0)
    )  # fmt: skip
    await agent.run("next")
    sent = list(model.requests[0].messages)
    assert paired(sent)
    assert not any(isinstance(m, ToolMessage) and m.tool_call_id == "zz" for m in sent)
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c1" for m in sent)


# ----------------------------------------------------------------------------- providers

OPENAI_OVERFLOW = HTTPFault(
    400,
    {
        "error": {
            "message": "This model's maximum context length is 6000 tokens. However, your "
            "messages resulted in 7012 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)
ANTHROPIC_OVERFLOW = HTTPFault(
    400,
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210344 tokens > 200000 maximum",
        },
    },
)


def wire_size(body: dict[str, Any]) -> int:
    return len(json.dumps(body.get("messages", [])))


def server_replies(limit_chars: int, fault: HTTPFault) -> Callable[[dict[str, Any]], Any]:
    """A provider with a small window: too long a request gets its overflow error."""
    calls = 0  # requests answered with a call (the history may be summarised, so not counted)

    def respond(body: dict[str, Any]) -> Any:
        nonlocal calls
        if wire_size(body) > limit_chars:
            return fault
        if calls >= 12:
            return "all reports read"
        calls += 1
        return AssistantMessage(
            tool_calls=[ToolCall(id="", name="dump", arguments=json.dumps({"n": calls}))]
        )

    return respond


async def test_an_openai_overflow_error_triggers_compaction_and_a_successful_retry(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(server_replies(12_000, OPENAI_OVERFLOW))
    model = OpenAILike(id="small", base_url=server.base_url, api_key="k")  # window unknown
    agent = Agent(model=model, tools=[dump], context=ContextPolicy(summarizer=summarizer))
    events = await events_of(agent, "read twelve reports")
    overflows = [e for e in events if isinstance(e, ContextCompacted)]
    assert overflows and all(e.trigger == "overflow" for e in overflows)
    assert events[-1].response.content == "all reports read"
    statuses = [wire_size(b) > 12_000 for b in server.requests]
    assert statuses.count(True) == len(overflows)  # each rejected request was retried smaller
    await model.aclose()


async def test_an_anthropic_overflow_error_is_retried_and_tool_results_stay_in_user_turns(
    fake_anthropic: Callable[..., Awaitable[FakeAnthropicServer]],
) -> None:
    server = await fake_anthropic(server_replies(12_000, ANTHROPIC_OVERFLOW))
    model = Claude(id="claude-test", base_url=server.base_url, api_key="k", context_window=None)
    agent = Agent(model=model, tools=[dump], context=ContextPolicy(summarizer=summarizer))
    events = await events_of(agent, "read twelve reports")
    assert any(isinstance(e, ContextCompacted) and e.trigger == "overflow" for e in events)
    assert events[-1].response.content == "all reports read"
    for body in server.requests:
        uses: set[str] = set()
        for turn in body["messages"]:
            for block in turn["content"] if isinstance(turn["content"], list) else ():
                if block["type"] == "tool_use":
                    uses.add(block["id"])
                if block["type"] == "tool_result":
                    assert turn["role"] == "user" and block["tool_use_id"] in uses
    await model.aclose()


async def test_overflow_without_retry_raises_the_typed_error(
    fake_openai: Callable[..., Awaitable[FakeOpenAIServer]],
) -> None:
    server = await fake_openai(server_replies(3_000, OPENAI_OVERFLOW))
    model = OpenAILike(id="small", base_url=server.base_url, api_key="k")
    policy = ContextPolicy(overflow_retry=False)
    agent = Agent(model=model, tools=[dump], context=policy)
    with pytest.raises(ContextOverflowError, match="context window"):
        await agent.run("read twelve reports")
    await model.aclose()


async def test_a_failing_summary_call_is_reported_in_the_runs_context_compacted_event() -> None:
    made = 0

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        nonlocal made
        if not request.tools and "compress the earlier part" in str(messages[0].content):
            raise ModelAuthError("the summary model's key was rejected", status=401)
        if made >= 40:
            return "finished"
        made += 1
        return tool_calls(call("dump", n=made, size=400))

    model = FunctionModel(reply, context_window=5_000)
    policy = ContextPolicy(reserve_output=500, keep_recent=1)  # the agent's model summarises
    agent = Agent(model=model, tools=[dump], context=policy, limits=RunLimits(max_turns=50))
    events = [event async for event in agent.run_stream("dump forty short reports")]
    compactions = [e for e in events if isinstance(e, ContextCompacted)]
    failed = [e for e in compactions if e.summary_error is not None]
    assert failed, "no compaction reported the failing summary call"
    assert all(e.summarized for e in failed)
    assert {e.summary_error for e in failed} == {
        "ModelAuthError: the summary model's key was rejected"
    }
    assert isinstance(events[-1], RunCompleted)
    assert events[-1].response.content == "finished"  # the run went on with the step log
