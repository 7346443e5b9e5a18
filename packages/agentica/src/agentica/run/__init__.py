"""The run: loop, events, limits, responses and the memory of a conversation.

- ``run_events``: the one run loop (loop.py; ``decide`` in steps.py picks each step, state.py,
  records.py, output.py and child.py hold its parts)
- ``RunStream``: the handle of a run (stream.py)
- ``RunEvent`` and its members: what a run yields (events.py)
- ``Handoff`` and its input filters: one agent hands the conversation to another (handoff.py)
- ``HumanApproval``, ``Decision``, ``PendingCall``: pausing before chosen calls (approval.py)
- ``ContextWindow``, ``model_summarizer``: the per-run context management (window.py)
- ``RepetitionGuard``: warns on repeated tool calls and refuses a looping tool (repetition.py)
- ``RunLimits``: turns, tool calls, tokens, cost, time (``agentica.limits``)
- ``RunResponse``, ``RunRecord``, ``AgentMemory``: outcomes and memory (result.py)
"""

from agentica.limits import RunLimits
from agentica.run.approval import Decision, HumanApproval, PendingCall
from agentica.run.events import (
    AnswerSentBack,
    ContextCompacted,
    HandoffOccurred,
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
    ToolProgress,
)
from agentica.run.handoff import Handoff, drop_tool_calls, keep_history, last_turns
from agentica.run.loop import run_events
from agentica.run.output import output_schema_for
from agentica.run.repetition import RepetitionGuard
from agentica.run.result import AgentMemory, RunRecord, RunResponse
from agentica.run.state import RunInput
from agentica.run.stream import RunStream
from agentica.run.window import ContextWindow, model_summarizer

__all__ = [
    "AgentMemory",
    "AnswerSentBack",
    "ContextCompacted",
    "ContextWindow",
    "Decision",
    "Handoff",
    "HandoffOccurred",
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
    "ToolProgress",
    "drop_tool_calls",
    "keep_history",
    "last_turns",
    "model_summarizer",
    "output_schema_for",
    "run_events",
]
