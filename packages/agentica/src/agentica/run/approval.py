"""Human approval of tool calls: a run pauses before chosen calls and resumes with decisions.

```python
agent = Agent(tools=[edit_file, execute],
              capabilities=[HumanApproval({"edit_file": True,
                                           "execute": {"decisions": ["approve", "reject"]}})])
response = await agent.run("Fix the bug")
while response.stop_reason == "paused":
    decisions = {p.call_id: Decision.approve() for p in response.pending}
    response = await agent.resume(decisions)
```

Before a turn's calls run, the run asks its capabilities whether any call needs approval. If one
does, no call of that turn runs: the run ends with ``stop_reason="paused"`` and the pending calls
(``PendingCall``: id, tool, arguments, the decisions allowed). The paused run is saved with the
session, so ``resume()`` works from another process too. Each decision approves a call, approves
it with edited arguments, or rejects it with a message the model reads.

This module owns both sides: the ``HumanApproval`` capability, and what the run engine does with
approvals (asking the capabilities, finding the paused run, applying decisions on resume).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentica.errors import SessionFormatError, UsageError
from agentica.messages import AssistantMessage, RunUsage
from agentica.run.capability import Capability
from agentica.run.handoff import last_active
from agentica.storage.records import RunRecord
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = ["Decision", "HumanApproval", "PendingCall"]  # the rest is the run loop's side

DecisionKind = Literal["approve", "edit", "reject"]
_KINDS: tuple[DecisionKind, ...] = ("approve", "edit", "reject")


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer about one pending call: approve, edit (approve other arguments) or
    reject (the model is told ``message``)."""

    kind: DecisionKind
    arguments: dict[str, Any] | None = None
    message: str | None = None

    @classmethod
    def approve(cls) -> Decision:
        return cls("approve")

    @classmethod
    def edit(cls, arguments: Mapping[str, Any]) -> Decision:
        return cls("edit", arguments=dict(arguments))

    @classmethod
    def reject(cls, message: str = "The user did not approve this call.") -> Decision:
        return cls("reject", message=message)


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call waiting for a decision."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    decisions: tuple[DecisionKind, ...] = _KINDS
    description: str | None = None


Rule = bool | Mapping[str, Any] | Callable[[RunContext[Any], FunctionCall], bool]


@dataclass(frozen=True, slots=True)
class _Policy:
    decisions: tuple[DecisionKind, ...]
    description: str | None
    when: Callable[[RunContext[Any], FunctionCall], bool] | None


def _policy(tool: str, rule: Rule) -> _Policy | None:
    if rule is False:
        return None
    if rule is True:
        return _Policy(_KINDS, None, None)
    if callable(rule):
        return _Policy(_KINDS, None, rule)
    if isinstance(rule, Mapping):
        unknown = set(rule) - {"decisions", "description", "when"}
        if unknown:
            raise UsageError(
                f"interrupt_on[{tool!r}] has unknown keys {sorted(unknown)}; use 'decisions', "
                "'description' and 'when'"
            )
        decisions = tuple(rule.get("decisions", _KINDS))
        bad = [d for d in decisions if d not in _KINDS]
        if bad or not decisions:
            raise UsageError(
                f"interrupt_on[{tool!r}]['decisions'] must be a non-empty list of 'approve', "
                f"'edit' and 'reject', not {list(decisions)}"
            )
        return _Policy(decisions, rule.get("description"), rule.get("when"))
    raise UsageError(
        f"interrupt_on[{tool!r}] must be True, False, a dict or a function (ctx, call) -> bool"
    )


def arguments_of(text: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict (unparsable text is kept under ``_raw``)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": value}


class HumanApproval(Capability):
    """Pause the run before calls of the tools in ``interrupt_on`` until a person decides.

    ``interrupt_on`` maps a tool name to ``True`` (every call; any decision), ``False`` (never),
    a function ``(ctx, call) -> bool`` (calls it returns True for), or a dict with
    ``decisions`` (a subset of ``["approve", "edit", "reject"]``), ``description`` (shown to the
    person) and ``when`` (a function as above).
    """

    name = "human_approval"

    def __init__(self, interrupt_on: Mapping[str, Rule]) -> None:
        self.policies = {
            tool: policy
            for tool, rule in interrupt_on.items()
            if (policy := _policy(tool, rule)) is not None
        }

    async def needs_approval(self, ctx: RunContext[Any], call: FunctionCall) -> PendingCall | None:
        policy = self.policies.get(call.name)
        if policy is None or (policy.when is not None and not policy.when(ctx, call)):
            return None
        return PendingCall(
            call_id=call.id,
            tool=call.name,
            arguments=arguments_of(call.call.arguments),
            decisions=policy.decisions,
            description=policy.description,
        )


def apply_decisions(
    calls: Sequence[FunctionCall],
    pending: Sequence[PendingCall],
    decisions: Mapping[str, Decision],
) -> None:
    """Check ``decisions`` against ``pending`` and apply them to ``calls`` (edit arguments, fail
    rejected calls); raises ``UsageError`` naming what is missing or not allowed."""
    expected = {p.call_id: p for p in pending}
    missing = [i for i in expected if i not in decisions]
    unknown = [i for i in decisions if i not in expected]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no decision for the pending calls {missing}")
        if unknown:
            parts.append(f"decisions for calls that are not pending {unknown}")
        raise UsageError(
            "cannot resume: " + " and ".join(parts) + f"; the pending calls are {list(expected)}"
        )
    for call in calls:
        decision = decisions.get(call.id)
        if decision is None:
            continue
        allowed: Collection[str] = expected[call.id].decisions
        if not isinstance(decision, Decision) or decision.kind not in allowed:
            raise UsageError(
                f"cannot resume: the decision for call {call.id} ({call.name}) must be one of "
                f"{list(allowed)} made with Decision.approve(), Decision.edit({{...}}) or "
                f"Decision.reject('why'), not {decision!r}"
            )
        if decision.kind == "edit":
            # in place: the assistant message holding this call shows what really ran
            call.call.arguments = json.dumps(decision.arguments or {})
        elif decision.kind == "reject":
            call.fail(f"The user rejected this call: {decision.message}")


# ----------------------------------------------------------------------------- the engine side


async def _approval_for(
    agent: Agent[Any], ctx: RunContext[Any], call: FunctionCall
) -> PendingCall | None:
    """The first capability's request for a decision on ``call``, if any."""
    for capability in agent.capabilities:
        request = await capability.needs_approval(ctx, call)
        if request is not None:
            return request
    return None


async def approvals(
    agent: Agent[Any], ctx: RunContext[Any], calls: Sequence[FunctionCall]
) -> list[PendingCall]:
    """The calls of a turn that must wait for a person's decision."""
    pending = []
    for call in calls:
        request = await _approval_for(agent, ctx, call)
        if request is not None:
            pending.append(request)
    return pending


def paused_run(agent: Agent[Any]) -> RunRecord | None:
    """The agent's last run if it is paused waiting for decisions."""
    runs = agent.memory.runs
    return runs[-1] if runs and runs[-1].status == "paused" else None


def resumable_run(agent: Agent[Any]) -> RunRecord:
    """The paused run ``resume()`` continues (the session loaded); ``UsageError`` if none."""
    record = paused_run(agent)
    if record is None:
        raise UsageError(
            f"agent {agent.name!r} has no paused run to resume: resume() continues a run that "
            "ended with stop_reason='paused'; start a new one with run()"
        )
    return record


def _paused_message(record: RunRecord) -> AssistantMessage:
    """The reply a paused run stopped at: the one whose calls wait."""
    message = record.messages[-1] if record.messages else None
    if not isinstance(message, AssistantMessage) or not message.tool_calls:
        raise SessionFormatError(
            f"run {record.run_id} is paused but does not end with the calls it paused on"
        )
    return message


async def _pending_of(
    agent: Agent[Any], ctx: RunContext[Any], record: RunRecord
) -> list[PendingCall]:
    """The pending calls of a paused run, with the decisions allowed by today's configuration."""
    message = _paused_message(record)
    functions = agent.functions
    pending = []
    for tool_call in message.tool_calls:
        if tool_call.id not in record.approvals:
            continue
        call = FunctionCall(tool_call, functions.get(tool_call.name))
        request = await _approval_for(agent, ctx, call)
        pending.append(request or PendingCall(
            call_id=tool_call.id, tool=tool_call.name, arguments=arguments_of(tool_call.arguments)
        ))  # fmt: skip
    return pending


async def pending_calls(agent: Agent[Any]) -> list[PendingCall]:
    """The calls the agent's paused run waits on (empty when it is not paused)."""
    await agent.load()
    record = paused_run(agent)
    if record is None:
        return []
    agent = last_active(agent)  # a run paused after a handoff waits on the receiver's tools
    await agent.prepare_tools()  # the paused calls may be of a group's tools (an MCP server)
    ctx = agent._run_context(record.run_id, deps=None, usage=RunUsage(), input=record.input)
    return await _pending_of(agent, ctx, record)


async def resumed_calls(
    agent: Agent[Any],
    ctx: RunContext[Any],
    record: RunRecord,
    decisions: Mapping[str, Decision],
) -> tuple[AssistantMessage, list[FunctionCall]]:
    """The reply the paused run ``record`` stopped at and its calls with ``decisions`` applied
    (``ctx`` is the resumed run's); ``UsageError`` when the decisions do not fit."""
    pending = await _pending_of(agent, ctx, record)
    message = _paused_message(record)
    functions = agent.functions
    calls = [FunctionCall(call, functions.get(call.name)) for call in message.tool_calls]
    apply_decisions(calls, pending, decisions)
    return message, calls
