"""Compaction when the summariser fails: the run goes on with the step log, and the failure is
recorded in the result (``Compaction.summary_error``) and logged, credentials masked."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentica.context import (
    STEPS_HEADER,
    SUMMARY_HEADER,
    ContextPolicy,
    EstimateCounter,
    MessageSizes,
    compact,
    is_summary,
)
from agentica.errors import ModelAuthError
from agentica.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentica.models import ModelRequest, ModelSettings
from agentica.run.window import ContextWindow, model_summarizer
from agentica.testing import FunctionModel

LOGGER = "agentica.context.compaction"
TASK = UserMessage(content="Collect the codeword of every report.")


def report_turns(count: int, size: int = 2_000) -> list[Message]:
    """``count`` tool turns, each result starting with a line that names its finding."""
    messages: list[Message] = []
    for n in range(1, count + 1):
        read = ToolCall(id=f"r{n}", name="read", arguments=json.dumps({"n": n}))
        messages.append(AssistantMessage(tool_calls=[read]))
        body = f"finding {n}: codeword-{n}\n" + "filler text of the report. " * (size // 27)
        messages.append(ToolMessage(tool_call_id=f"r{n}", name="read", content=body))
    return messages


def conversation(turns: int = 8) -> list[Message]:
    return [SystemMessage(content="system"), TASK, *report_turns(turns)]


async def broken(text: str, budget: int) -> str:
    raise RuntimeError("summariser down")


async def compact_with(summarizer: Any, messages: list[Message] | None = None) -> Any:
    return await compact(
        messages or conversation(), target=1_200, sizes=MessageSizes(EstimateCounter()),
        pinned=[TASK], keep_recent=2, summary_tokens=400, summarizer=summarizer,
        summarizer_input_tokens=3_000,
    )  # fmt: skip


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING
    ]


async def test_a_failing_summariser_is_recorded_and_logged_and_the_step_log_stays(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentica")
    done = await compact_with(broken)
    assert done.summary_error == "RuntimeError: summariser down"
    assert done.summarized and done.summarizer_calls == 0
    summary = next(m for m in done.messages if is_summary(m))
    assert summary.content.startswith(f"{SUMMARY_HEADER}\n{STEPS_HEADER}\n")  # no prose
    assert "- called read(n=1) -> finding 1: codeword-1" in summary.content
    [line] = warnings_of(caplog)
    assert "broken" in line  # which summariser
    assert "RuntimeError: summariser down" in line  # why
    assert "keeps only the step log" in line  # what was done instead


async def test_a_working_summariser_records_no_error_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def working(text: str, budget: int) -> str:
        return "The agent read several reports."

    caplog.set_level(logging.DEBUG, logger="agentica")
    done = await compact_with(working)
    assert done.summarized and done.summarizer_calls >= 1
    assert done.summary_error is None
    assert warnings_of(caplog) == []


async def test_credentials_in_the_error_never_reach_the_result_or_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secrets = ["sk-proj-abcdef0123456789", "tok_9f8e7d6c5b", "hunter2hunter2", "s3cr3tvalue"]

    async def leaky(text: str, budget: int) -> str:
        raise ModelAuthError(
            f"401 from https://api.example.com/v1?api_key={secrets[3]} with key {secrets[0]}; "
            f"headers: Authorization: Bearer {secrets[1]}, password={secrets[2]}",
            status=401,
        )

    caplog.set_level(logging.WARNING, logger="agentica")
    done = await compact_with(leaky)
    assert done.summary_error is not None
    assert done.summary_error.startswith("ModelAuthError: 401 from https://api.example.com/v1")
    [line] = warnings_of(caplog)
    for secret in secrets:
        assert secret not in done.summary_error and secret not in line
    assert "api_key=***" in done.summary_error and "Bearer ***" in done.summary_error


async def test_a_long_error_message_is_one_cut_line() -> None:
    async def verbose(text: str, budget: int) -> str:
        raise ValueError("line one\n" + "detail " * 500)

    done = await compact_with(verbose)
    assert done.summary_error is not None
    assert "\n" not in done.summary_error and len(done.summary_error) <= 300
    assert done.summary_error.startswith("ValueError: line one detail")


async def test_the_context_window_reports_its_model_summarisers_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The default summariser (the agent's model) fails: ``prepare`` carries the error and the
    log line names the model."""

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        raise ModelAuthError("the key was rejected", status=401, provider="scripted")

    model = FunctionModel(reply, id="tiny-model", context_window=5_000)
    window = await ContextWindow.open(
        ContextPolicy(reserve_output=500, keep_recent=1),
        model,
        ModelSettings(),
        state=None,
        readable=False,
    )
    caplog.set_level(logging.WARNING, logger="agentica")
    messages = conversation(12)
    kept, prepared = await window.prepare(messages, extra=(), tools=(), pinned=[TASK])
    assert model.requests, "the summariser was never asked"
    assert prepared.compaction is not None and prepared.compaction.summarized
    assert prepared.compaction.summary_error == "ModelAuthError: the key was rejected"
    assert any(is_summary(m) for m in kept)
    [line] = warnings_of(caplog)
    assert "model_summarizer(scripted:tiny-model)" in line


async def test_a_failing_model_summariser_raises_to_its_caller() -> None:
    """``model_summarizer`` itself does not swallow the error: compaction decides."""

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        raise ModelAuthError("the key was rejected", status=401)

    summarize = model_summarizer(FunctionModel(reply))
    with pytest.raises(ModelAuthError):
        await summarize("a transcript", 100)


async def test_a_re_made_summary_replaces_the_previous_one_when_only_recent_turns_are_left() -> (
    None
):
    """Nothing old is left to summarise, so the earlier summary is rolled up on its own; the
    smaller new summary is what the conversation carries and what ``after`` counts."""

    async def short(text: str, budget: int) -> str:
        return "the short summary"

    previous = SystemMessage(content=f"{SUMMARY_HEADER}\n" + "long prose of the past. " * 60)
    messages: list[Message] = [SystemMessage(content="system"), previous, TASK]
    messages += report_turns(2, size=8_000)
    sizes = MessageSizes(EstimateCounter())
    done = await compact(
        messages, target=50, sizes=sizes, pinned=[TASK], keep_recent=2, summary_tokens=400,
        summarizer=short,
    )  # fmt: skip
    [summary] = [m for m in done.messages if is_summary(m)]
    assert isinstance(summary, SystemMessage) and summary is not previous
    assert "the short summary" in summary.content
    assert done.after == sizes.total(done.messages)
    assert done.messages[0].content == "system" and TASK in done.messages
