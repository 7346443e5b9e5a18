"""Token-budgeted history assembly and tool-call pairing repair.

``assemble_history`` builds the part of the prompt that replays earlier runs of a conversation
(the agent-as-session memory) within a token budget, ``HistoryPolicy`` says how much of them;
``repair_tool_pairs`` makes any message list valid for providers (every tool call with its result).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentica.context.tokens import EstimateCounter, TokenCounter
from agentica.messages import AssistantMessage, Message, ToolMessage

__all__ = [
    "HistoryPolicy",
    "assemble_history",
    "repair_tool_pairs",
    "tool_pairs_ok",
    "truncate_text",
]


@dataclass(slots=True, frozen=True, kw_only=True)
class HistoryPolicy:
    """How much of earlier runs is replayed to the model.

    Attributes:
        max_tokens: the token budget for replayed history; ``None`` derives it from the model's
            context window (half of it) or uses 16,000.
        max_runs: replay at most this many earlier runs (``None``: no count limit).
        tool_result_max_chars: the longest tool result kept from the most recent earlier run;
            each older run keeps half as much (never less than ``min_tool_result_chars``).
        min_tool_result_chars: the floor of that progressive truncation.
    """

    max_tokens: int | None = None
    max_runs: int | None = None
    tool_result_max_chars: int = 8000
    min_tool_result_chars: int = 500


def truncate_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a note saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n...[{len(text) - limit} more characters truncated]"


def _groups(messages: Sequence[Message]) -> list[list[Message]]:
    groups: list[list[Message]] = []
    for message in messages:
        if (
            isinstance(message, ToolMessage)
            and groups
            and isinstance(groups[-1][0], AssistantMessage)
        ):
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def _shrink(message: Message, limit: int) -> Message:
    if isinstance(message, ToolMessage) and len(message.content) > limit:
        return ToolMessage(
            tool_call_id=message.tool_call_id,
            name=message.name,
            content=truncate_text(message.content, limit),
            is_error=message.is_error,
        )
    return message


def assemble_history(
    runs: Sequence[Sequence[Message]],
    *,
    budget_tokens: int,
    policy: HistoryPolicy = HistoryPolicy(),
    counter: TokenCounter | None = None,
) -> list[Message]:
    """The messages of earlier ``runs`` (oldest first) that fit ``budget_tokens``.

    Newest runs are taken first, tool results of older runs truncated more aggressively (the full
    limit for the last run, half of it for the one before, and so on), stopping when the token
    budget is spent. Messages are taken in groups (an assistant message together with the
    results of its tool calls), so a tool call is never separated from its result.
    """
    count = counter or EstimateCounter()
    # count_messages includes the request's fixed part (reply priming, a default system prompt);
    # a group's share of the budget is what it adds on top of that.
    fixed = count.count_messages(())
    selected: list[list[Message]] = []
    spent = 0
    recent = runs if policy.max_runs is None else runs[len(runs) - policy.max_runs :]
    limit = policy.tool_result_max_chars
    for messages in reversed(recent):
        full = True
        for group in reversed(_groups(messages)):
            shrunk = [_shrink(m, limit) for m in group]
            cost = count.count_messages(shrunk) - fixed
            if spent + cost > budget_tokens:
                full = False
                break
            spent += cost
            selected.append(shrunk)
        if not full:
            break
        limit = max(limit // 2, policy.min_tool_result_chars)
    selected.reverse()
    history = [m for group in selected for m in group]
    while history and isinstance(history[0], ToolMessage):  # never start with orphaned results
        history.pop(0)
    return history


def tool_pairs_ok(messages: Sequence[Message]) -> bool:
    """Whether every tool call's results follow its message and no result is without its call
    (``repair_tool_pairs`` would return the same messages)."""
    pending: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                return False
            pending.discard(message.tool_call_id)
            continue
        if pending:
            return False
        if isinstance(message, AssistantMessage) and message.tool_calls:
            pending = {c.id for c in message.tool_calls}
    return not pending


def repair_tool_pairs(messages: Sequence[Message], *, reason: str = "cancelled") -> list[Message]:
    """A copy of ``messages`` in which every tool call has a result and every result its call:
    a tool call without a result gets a synthetic result saying ``reason`` ("cancelled"), and a
    result without its call is dropped."""
    out: list[Message] = []
    pending: dict[str, str] = {}

    def close_pending() -> None:
        for call_id, name in pending.items():
            out.append(
                ToolMessage(
                    tool_call_id=call_id,
                    name=name,
                    content=f"The tool call was {reason} before it returned a result.",
                    is_error=True,
                )
            )
        pending.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in pending:
                del pending[message.tool_call_id]
                out.append(message)
            continue
        close_pending()
        out.append(message)
        if isinstance(message, AssistantMessage):
            pending = {call.id: call.name for call in message.tool_calls}
    close_pending()
    return out
