"""Run events: what ``Agent.run_stream()`` yields, in order.

```
RunStarted
  ModelRequestStarted(turn=1)
    TextDelta / ReasoningDelta / ToolCallDelta ...   (only when streaming from the model)
  ModelResponseReceived
  ToolCallStarted ...      (phase 1: in call order)
  ToolCallCompleted ...    (phase 3: in call order, after all calls of the turn finished)
  ModelRequestStarted(turn=2)
  ...
RunCompleted
```
A failed run raises its typed error from the stream instead of yielding ``RunCompleted``. Every
event has a ``kind`` string, convenient for ``match`` statements and for serialisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from agentica.messages import AssistantMessage, ReasoningDelta, TextDelta, ToolCallDelta
from agentica.tools.call import FunctionCall

if TYPE_CHECKING:
    from agentica.run.result import RunResponse

__all__ = [
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
]


@dataclass(slots=True)
class RunStarted:
    run_id: str
    agent: str
    input: str
    kind: Literal["run_started"] = "run_started"


@dataclass(slots=True)
class ModelRequestStarted:
    turn: int
    kind: Literal["model_request_started"] = "model_request_started"


@dataclass(slots=True)
class ModelResponseReceived:
    message: AssistantMessage
    turn: int
    kind: Literal["model_response_received"] = "model_response_received"


@dataclass(slots=True)
class ToolCallStarted:
    call: FunctionCall
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(slots=True)
class ToolCallCompleted:
    call: FunctionCall
    kind: Literal["tool_call_completed"] = "tool_call_completed"


@dataclass(slots=True)
class RunCompleted:
    response: RunResponse
    kind: Literal["run_completed"] = "run_completed"


RunEvent: TypeAlias = (
    RunStarted
    | ModelRequestStarted
    | TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | ModelResponseReceived
    | ToolCallStarted
    | ToolCallCompleted
    | RunCompleted
)
