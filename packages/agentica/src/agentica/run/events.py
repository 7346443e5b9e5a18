"""Run events: what ``Agent.run_stream()`` yields, in order (see ``RunEvent``).

Every event has a ``kind`` string, convenient for ``match`` statements and for serialisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from agentica.messages import AssistantMessage, ReasoningDelta, TextDelta, ToolCallDelta
from agentica.tools.call import FunctionCall

if TYPE_CHECKING:
    from agentica.run.result import RunResponse

__all__ = [
    "AnswerSentBack",
    "ContextCompacted",
    "HandoffOccurred",
    "ModelRequestStarted",
    "ModelResponseReceived",
    "ReasoningDelta",
    "RunCompleted",
    "RunEvent",
    "RunStarted",
    "TextDelta",
    "ToolCallCompleted",
    "ToolCallDelta",
    "ToolCallStarted",
    "ToolProgress",
]


@dataclass(slots=True)
class RunStarted:
    run_id: str
    agent: str
    input: str
    kind: Literal["run_started"] = "run_started"


@dataclass(slots=True)
class ModelRequestStarted:
    """A model call is about to be made.

    Attributes:
        turn: the number of the call in this run (1, 2, ...).
        context_tokens: tokens of the request (``None`` when context management is off).
        context_limit: the usable window (window minus reserved output), when known.
        final_only: no tools are offered: the context passed the hard threshold.
        model: the id of the model called (the agent's, or what its ``ModelRule`` chose).
    """

    turn: int
    context_tokens: int | None = None
    context_limit: int | None = None
    final_only: bool = False
    model: str = ""
    kind: Literal["model_request_started"] = "model_request_started"


@dataclass(slots=True)
class ContextCompacted:
    """The conversation was compacted before a model call.

    Attributes:
        turn: the model call it was compacted for.
        trigger: ``"soft"`` (the soft threshold was passed) or ``"overflow"`` (the provider
            rejected the request as too long).
        before, after: tokens of the request before and after.
        trimmed: tool results moved out or cut.
        summarized: messages replaced by a summary.
        summary_error: why the summariser failed (``"ExceptionType: message"``, credentials
            masked), ``None`` when it did not; the summary then holds only its step log.
    """

    turn: int
    trigger: Literal["soft", "overflow"]
    before: int
    after: int
    trimmed: int
    summarized: int
    summary_error: str | None = None
    kind: Literal["context_compacted"] = "context_compacted"


@dataclass(slots=True)
class ModelResponseReceived:
    """A model call's reply.

    Attributes:
        message: the reply (``message.model`` is the model's name as its server gave it).
        turn: the number of the call in this run.
        model: the id of the model that answered (the agent's, or what its ``ModelRule`` chose).
        cost: what the call cost in USD (``None``: the model's price is unknown).
    """

    message: AssistantMessage
    turn: int
    model: str = ""
    cost: float | None = None
    kind: Literal["model_response_received"] = "model_response_received"


@dataclass(slots=True)
class AnswerSentBack:
    """The model answered, but the run goes on: ``source`` sent it back with ``message``.

    Attributes:
        turn: the model call whose answer was sent back.
        source: what sent it back: a capability's name (``"answer_check"``, ``"todos"``,
            ``"heartbeat"``, ...), ``"output_guardrail"``, ``"output_type"`` (the answer did
            not parse as the agent's output type) or ``"empty_reply"`` (no text, no tool calls).
        message: the text the model gets next (a user message in the conversation).
    """

    turn: int
    source: str
    message: str
    kind: Literal["answer_sent_back"] = "answer_sent_back"


@dataclass(slots=True)
class ToolCallStarted:
    call: FunctionCall
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(slots=True)
class ToolCallCompleted:
    call: FunctionCall
    kind: Literal["tool_call_completed"] = "tool_call_completed"


@dataclass(slots=True)
class ToolProgress:
    """An update a running tool reported (``RunContext.report``): ``source`` names the tool or
    subagent (e.g. ``"task:explore"``), ``update`` is what it reported (a subagent sends the
    ``RunEvent``s of its own run)."""

    source: str
    update: object
    kind: Literal["tool_progress"] = "tool_progress"


@dataclass(slots=True)
class HandoffOccurred:
    """The conversation was handed from agent ``from_agent`` to agent ``to_agent`` (names): the
    model of turn ``turn`` called a handoff tool, saying ``reason``; the next turn is the
    receiver's."""

    from_agent: str
    to_agent: str
    reason: str
    turn: int
    kind: Literal["handoff"] = "handoff"


@dataclass(slots=True)
class RunCompleted:
    response: RunResponse
    kind: Literal["run_completed"] = "run_completed"


RunEvent: TypeAlias = (
    RunStarted
    | ContextCompacted
    | ModelRequestStarted
    | TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | ModelResponseReceived
    | AnswerSentBack
    | ToolCallStarted
    | ToolProgress
    | ToolCallCompleted
    | HandoffOccurred
    | RunCompleted
)
"""What ``Agent.run_stream()`` yields, in this order:

```
RunStarted
  ContextCompacted         (only when the conversation was compacted before this call)
  ModelRequestStarted(turn=1, context_tokens=..., context_limit=...)
    TextDelta / ReasoningDelta / ToolCallDelta ...   (only when streaming from the model)
  ModelResponseReceived
  AnswerSentBack           (only when the reply was a final answer that did not end the run)
  ToolCallStarted ...      (phase 1: in call order)
  ToolProgress ...         (while the calls run: updates a tool reports, e.g. a subagent's steps)
  ToolCallCompleted ...    (phase 3: in call order, after all calls of the turn finished)
  HandoffOccurred          (only when a call handed the conversation to another agent)
  ModelRequestStarted(turn=2)
  ...
RunCompleted
```
``ModelRequestStarted`` carries the token accounting of the request about to be sent (messages,
system slots and tool schemas, counted with the model's tokenizer when available) and whether
only a final answer may be given (the context passed the hard threshold). A failed run raises its
typed error from the stream instead of yielding ``RunCompleted``.
"""
