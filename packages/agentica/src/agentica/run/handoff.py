"""Handoffs: an agent hands the conversation to another agent, within the same run and session.

``Agent(handoffs=[billing, Handoff(refunds, description=..., input_filter=last_turns(2))])``
offers the model one ``transfer_to_<name>`` tool per target. When the model calls one, the run
goes on with the target's instructions, tools and model (state.py ``hand_over``): the target sees
the history the input filter keeps, then the turn that called the handoff tool (the call and its
result stay paired, so providers accept the history). An input filter is a plain function of the
message list; ``keep_history``, ``drop_tool_calls`` and ``last_turns(n)`` are ready ones. The
stored run records who produced each message; the session's next run starts with the agent that
was active at the end of the last one (``last_active``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

from agentica.context import is_summary, repair_tool_pairs
from agentica.errors import UsageError
from agentica.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from agentica.tools.call import FunctionCall
from agentica.tools.function import Function

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = [
    "Handoff",
    "HistoryFilter",
    "drop_tool_calls",
    "keep_history",
    "last_active",
    "last_turns",
    "reachable",
    "receiver_view",
    "transfer_of",
]

HistoryFilter: TypeAlias = Callable[[list[Message]], list[Message]]
"""What a receiving agent sees of the history before the handoff: messages in, messages out."""


def keep_history(messages: list[Message]) -> list[Message]:
    """Every message: the receiver sees the conversation as the sender saw it (the default)."""
    return list(messages)


def drop_tool_calls(messages: list[Message]) -> list[Message]:
    """The conversation without tool calls and their results (an assistant turn keeps its
    text): the receiver reads what was said, not the sender's tool work."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            continue
        if isinstance(message, AssistantMessage) and message.tool_calls:
            if message.content and message.content.strip():
                out.append(replace(message, tool_calls=[], provider_data=None))
            continue
        out.append(message)
    return out


def last_turns(count: int) -> HistoryFilter:
    """A filter keeping the last ``count`` user turns (each user message and what followed it)."""
    if count < 1:
        raise UsageError(f"last_turns(count) needs a count of at least 1 (got {count})")

    def keep_last_turns(messages: list[Message]) -> list[Message]:
        starts = [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]
        return list(messages[starts[-count] :]) if len(starts) > count else list(messages)

    return keep_last_turns


@dataclass(slots=True, frozen=True)
class Handoff:
    """A handoff target: the agent and how the handoff is offered.

    Attributes:
        agent: the agent that receives the conversation (its instructions, tools and model).
        description: when to hand over (the tool's description); default: from the agent's
            ``description``.
        input_filter: what the receiver sees of the history before the handoff turn
            (``keep_history`` by default; ``drop_tool_calls``, ``last_turns(n)`` or your own
            function of the message list). The turn that called the handoff tool always follows,
            and so does the run's input if the filter left it out.
        tool_name: the tool's name (default ``transfer_to_<agent name>``).
    """

    agent: Agent[Any]
    description: str | None = None
    input_filter: HistoryFilter = keep_history
    tool_name: str | None = None

    @property
    def name(self) -> str:
        """The name of the tool the model calls to hand over."""
        if self.tool_name:
            return self.tool_name
        slug = re.sub(r"[^a-zA-Z0-9_-]", "_", self.agent.name)
        return f"transfer_to_{slug}"[:64]

    def function(self) -> Function:
        """The tool the model calls to hand the conversation over."""
        target = self.agent.name

        def transfer(reason: str = "") -> str:
            """Hand the conversation over.

            Args:
                reason: why, and what the other agent needs to know to go on (the user's
                    request, what was found or decided so far).
            """
            return f"Transferred to {target}: {target} continues the conversation from here."

        about = self.description or self.agent.description
        return Function.from_callable(
            transfer,
            name=self.name,
            description=f"Hand the conversation to the '{target}' agent"
            + (f": {about}" if about else ", which answers from then on."),
        )


def transfer_of(
    handoffs: Sequence[Handoff], calls: Sequence[FunctionCall]
) -> tuple[Handoff, str] | None:
    """The handoff the turn's ``calls`` made and its reason: the first successful handoff call
    in call order. A later handoff call of the same turn is failed (its result tells the model
    that only the first one counted)."""
    table = {h.name: h for h in handoffs}
    chosen: tuple[Handoff, str] | None = None
    for call in calls:
        handoff = table.get(call.name)
        if handoff is None or call.status != "success" or call.function is None:
            continue
        if chosen is not None:
            call.fail(
                f"Not transferred to {handoff.agent.name}: this turn already handed the "
                f"conversation to {chosen[0].agent.name} (one handoff per turn)."
            )
            continue
        try:
            arguments = json.loads(call.call.arguments or "{}")
        except ValueError:  # it ran, so its arguments validated; this is only a guard
            arguments = {}
        reason = arguments.get("reason") if isinstance(arguments, dict) else None
        chosen = (handoff, reason if isinstance(reason, str) else "")
    return chosen


def reachable(agent: Agent[Any]) -> Mapping[str, Agent[Any]]:
    """Every agent ``agent`` can hand over to, directly or through others, by name (itself
    included); ``UsageError`` when two different agents of that graph share a name (names say
    who answers in a stored session)."""
    found: dict[str, Agent[Any]] = {agent.name: agent}
    waiting = [agent]
    while waiting:
        for handoff in waiting.pop().handoffs:
            other = handoff.agent
            known = found.get(other.name)
            if known is None:
                found[other.name] = other
                waiting.append(other)
            elif known is not other:
                raise UsageError(
                    f"two different agents named {other.name!r} are reachable through the "
                    "handoffs: give each agent of a handoff graph its own name"
                )
    return found


def last_active(agent: Agent[Any]) -> Agent[Any]:
    """The agent that answers ``agent``'s next run: the one active when its last run ended
    (a handoff's receiver keeps the conversation), else ``agent`` itself; also ``agent``
    when the session names an agent its handoffs no longer reach."""
    runs = agent.memory.runs
    name = runs[-1].last_agent if runs else None
    if name is None or name == agent.name or not agent.handoffs:
        return agent
    return reachable(agent).get(name, agent)


def receiver_view(
    messages: Sequence[Message], turn: AssistantMessage, keep: HistoryFilter, task: Message
) -> list[Message]:
    """What the receiver of a handoff sees (before its own system prompt): the history before
    ``turn`` (the reply that called the handoff tool) without the sender's system prompt, as
    ``keep`` filters it, with its tool calls and results paired; ``task`` (the run's input) if
    the filter left it out; then ``turn`` and its results."""
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i] is turn), None)
    if start is None:
        raise UsageError("the reply that called the handoff tool is not in the conversation")
    head = 0
    while (
        head < start
        and isinstance(messages[head], SystemMessage)
        and not is_summary(messages[head])
    ):
        head += 1  # the sender's instructions: the receiver brings its own
    kept = keep(list(messages[head:start]))
    if not isinstance(kept, list):
        raise UsageError(
            f"a handoff's input_filter must return a list of messages, not {type(kept).__name__}"
        )
    kept = repair_tool_pairs(kept, reason="left out of the handoff")
    if task not in kept:
        kept.insert(0, task)
    return [*kept, *messages[start:]]
