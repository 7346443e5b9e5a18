"""The run: loop, events, limits, responses and the memory of a conversation.

- ``run_events``: the one run loop (loop.py)
- ``RunStream``: the handle of a run (stream.py)
- ``RunEvent`` and its members: what a run yields (events.py)
- ``HumanApproval``, ``Decision``, ``PendingCall``: pausing before chosen calls (approval.py)
- ``RepetitionGuard``: warns on repeated tool calls and refuses a looping tool (repetition.py)
- ``RunLimits``: turns, tool calls, tokens, cost, time (limits.py)
- ``RunResponse``, ``RunRecord``, ``AgentMemory``: outcomes and memory (result.py)
"""

from agentica.run.approval import Decision, HumanApproval, PendingCall
from agentica.run.events import (
    ModelRequestStarted,
    ModelResponseReceived,
    ReasoningDelta,
    RunCompleted,
    RunEvent,
    RunStarted,
    TextDelta,
    ToolCallCompleted,
    ToolCallDelta,
    ToolCallStarted,
)
from agentica.run.limits import RunLimits
from agentica.run.loop import RunInput, output_schema_for, run_events
from agentica.run.repetition import RepetitionGuard
from agentica.run.result import AgentMemory, RunRecord, RunResponse
from agentica.run.stream import RunStream

__all__ = [
    "AgentMemory",
    "Decision",
    "HumanApproval",
    "ModelRequestStarted",
    "ModelResponseReceived",
    "PendingCall",
    "ReasoningDelta",
    "RepetitionGuard",
    "RunCompleted",
    "RunEvent",
    "RunInput",
    "RunLimits",
    "RunRecord",
    "RunResponse",
    "RunStarted",
    "RunStream",
    "TextDelta",
    "ToolCallCompleted",
    "ToolCallDelta",
    "ToolCallStarted",
    "output_schema_for",
    "run_events",
]
