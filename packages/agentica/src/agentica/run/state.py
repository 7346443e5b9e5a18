"""The state of one active run (``ActiveRun``) and how a run starts from its agent (``start_run``)
and goes on with another one after a handoff (``hand_over``).

Everything a run changes lives here, never on the agent: the agent object carries only its
configuration and its memory, so the same model and tools serve any number of runs at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentica.context import assemble_history, repair_tool_pairs
from agentica.errors import UsageError
from agentica.limits import RunBudget, RunLimits
from agentica.messages import (
    ContentPart,
    ImagePart,
    Message,
    RunUsage,
    SystemMessage,
    ToolDefinition,
    UserMessage,
)
from agentica.models.base import Model, ModelResponse, ModelSettings, ToolChoice
from agentica.models.pricing import ModelPrice, cost_of, price_for
from agentica.models.rules import ModelRule, TurnFacts, chosen_model
from agentica.run.handoff import last_active, receiver_view
from agentica.run.steps import RunState, Transfer
from agentica.run.window import ContextWindow
from agentica.storage.records import HandoffRecord, RunRecord, SpanRecord
from agentica.tools.call import FunctionCall, running_call
from agentica.tools.context import RunContext
from agentica.tools.function import Function

if TYPE_CHECKING:
    from agentica.agent import Agent

__all__ = ["ActiveRun", "RunInput", "hand_over", "start_run"]

RunInput = str | UserMessage | list[ContentPart]
_UNSET: Any = object()


@dataclass(slots=True, kw_only=True)
class ActiveRun(RunState):
    """One run in progress: ``RunState`` (what ``decide`` reads) plus what the handlers use.

    Attributes:
        run_id: the run's id (a resumed run keeps the paused run's).
        agent: the agent whose instructions, tools and model the run uses now (another one
            after a handoff); ``owner`` the one the run belongs to (its session).
        ctx: the ``RunContext`` handed to tools and capabilities.
        budget: the run tree's ``RunBudget``.
        settings: the model settings of every call; ``overrides`` the run's own (``run(...,
            model_settings=...)``), kept for a handoff's receiver.
        stream: call the model with ``response_stream`` (else ``response``).
        request_tools: the schemas of every function of the agent.
        tools, offered: the schemas and the functions offered in this turn's request.
        tool_choice: this turn's tool choice from a capability (a tool to call now), if any.
        require_call: the last answer only echoed a note: the next call must call a tool.
        after_echo: this turn's call was forced after an echo.
        started_at: wall-clock start (``time.time()``), for the record.
        deadline: the event-loop time the run (or its tree) runs out of time, or ``None``.
        messages: the conversation sent to the model; ``new_messages`` what this run added.
        window: the run's context management.
        pinned: messages compaction never drops (the task).
        model: the model of the current call (the agent's, or what its ``ModelRule`` chose).
        charge: counts a model reply of this run (a summary's too) as the given model's, in the
            run and its tree; returns its cost (``None``: the model's price is unknown).
        sent_back: answers a check sent back in this run (``AnswerSentBack``).
        models: the id of the model that answered each call of the run, in order.
        calls: every tool call of the run, in order.
        trace: the run's timeline (model calls, compactions, tool calls); a run started by a
            tool call is also recorded under that call's span.
        ended: the run's record was built (a failure after that is not recorded twice).
        handoff_log: the run's handoffs so far.
    """

    run_id: str
    agent: Agent[Any]
    owner: Agent[Any]
    ctx: RunContext[Any]
    budget: RunBudget
    settings: ModelSettings
    stream: bool
    request_tools: tuple[ToolDefinition, ...]
    tools: tuple[ToolDefinition, ...]
    offered: Mapping[str, Function]
    started_at: float
    deadline: float | None
    messages: list[Message]
    new_messages: list[Message]
    window: ContextWindow
    pinned: list[Message]
    model: Model
    charge: Callable[[ModelResponse, Model], float | None]
    trace: SpanRecord
    calls: list[FunctionCall] = field(default_factory=list)
    sent_back: int = 0
    models: list[str] = field(default_factory=list)
    ended: bool = False
    tool_choice: ToolChoice | None = None
    require_call: bool = False
    after_echo: bool = False
    overrides: ModelSettings | None = None
    handoff_log: list[HandoffRecord] = field(default_factory=list)

    def refresh(self, functions: Mapping[str, Function]) -> None:
        """The agent's functions changed during the run (an MCP server's tool list): the next
        turns offer these."""
        self.ctx.functions = functions
        self.request_tools = tuple(f.definition for f in functions.values())

    def offer(self, offered: Mapping[str, Function], tools: tuple[ToolDefinition, ...]) -> None:
        """The functions (and their schemas) the model may call in this turn's request."""
        self.offered = offered
        self.tools = tools
        self.ctx.offered = offered

    async def choose_model(self, model: Model) -> Model:
        """The model of this call: ``model`` (the agent's, read before every call: one assigned
        during the run answers from the next call), or the one its ``ModelRule`` chooses from
        what the run knows."""
        if isinstance(model, ModelRule):
            task = self.pinned[0] if self.pinned else None
            content = task.content if isinstance(task, UserMessage) else ""
            parts = [] if isinstance(content, str) else content
            images = sum(isinstance(part, ImagePart) for part in parts)
            facts = TurnFacts(
                turn=self.turn, input=self.ctx.input, images=images,
                sent_back=self.sent_back, tool_errors=sum(c.status == "error" for c in self.calls),
                previous=self.models[-1] if self.models else None,
            )  # fmt: skip
            model = await chosen_model(model, facts)
        self.model, self.model_id, self.provider = model, model.id, model.provider
        return model


def _charger(usage: RunUsage, budget: RunBudget) -> Callable[[ModelResponse, Model], float | None]:
    def charge(response: ModelResponse, model: Model) -> float | None:
        cost = cost_of(response.usage, _price_of(model))
        usage.add_request(response.usage, cost, model.id)
        budget.charge_response(response.usage, cost)
        return cost

    return charge


def _user_message(user_input: RunInput) -> UserMessage:
    if isinstance(user_input, UserMessage):
        return user_input
    if isinstance(user_input, str | list):
        return UserMessage(content=user_input)
    raise UsageError(
        f"agent.run() takes a str, a UserMessage or a list of content parts, "
        f"not {type(user_input).__name__}"
    )


def _price_of(model: Model) -> ModelPrice | None:
    price = getattr(model, "price", _UNSET)
    return price_for(model.id) if price is _UNSET else price


async def _instructions(agent: Agent[Any], ctx: RunContext[Any], summary: str | None) -> str | None:
    """``agent``'s system prompt; ``summary`` is the session's summary of older turns."""
    text = agent.instructions
    if callable(text):
        value = text(ctx)
        text = await value if inspect.isawaitable(value) else value
    parts = [text] if text else []
    parts.extend(t.instructions for t in agent.toolkits if t.instructions)
    for capability in agent.capabilities:
        extra = await capability.instructions(ctx)
        if extra:
            parts.append(extra)
    if summary:
        parts.append(f"Summary of the earlier conversation:\n{summary}")
    return "\n\n".join(str(p) for p in parts) or None


def _history(agent: Agent[Any], runs: list[RunRecord], resuming: RunRecord | None) -> list[Message]:
    """The session's earlier ``runs`` replayed, within ``agent``'s history budget; a paused run
    left behind (the user moved on) has calls without results: they are repaired."""
    window = getattr(agent.model, "context_window", None)
    policy = agent.history
    history_tokens = policy.max_tokens or (window // 2 if isinstance(window, int) else 16_000)
    earlier = runs[:-1] if resuming is not None else runs
    if not earlier:
        return []
    history = assemble_history(
        [r.messages for r in earlier], budget_tokens=history_tokens, policy=policy
    )
    return repair_tool_pairs(history, reason="not approved")


def _context(agent: Agent[Any], owner: Agent[Any], run_id: str, **known: Any) -> RunContext[Any]:
    """The ``RunContext`` of a run of ``owner``'s session that uses ``agent``'s configuration
    (``owner`` itself, or a handoff's receiver): the session's ids, storage and state."""
    ctx = agent._run_context(run_id, **known)
    if owner is not agent:
        ctx.user_id, ctx.session_id, ctx.storage = owner.user_id, owner.session_id, owner.storage
        ctx.session_state = owner.memory.state
    return ctx


def _deadline(limits: RunLimits, budget: RunBudget) -> float | None:
    """When the run must end: its own wall-time limit or its tree's, whichever comes first."""
    deadline = (
        asyncio.get_running_loop().time() + limits.max_wall_time
        if limits.max_wall_time is not None
        else None
    )
    if budget.deadline is not None:  # the tree's time runs from the top-level start
        deadline = budget.deadline if deadline is None else min(deadline, budget.deadline)
    return deadline


async def start_run(
    agent: Agent[Any],
    user_input: RunInput,
    *,
    deps: Any,
    limits: RunLimits | None,
    model_settings: ModelSettings | None,
    stream: bool,
    resuming: RunRecord | None = None,
    budget: RunBudget | None = None,
) -> ActiveRun:
    """The state of a new run of ``agent`` on ``user_input`` (or of the paused run
    ``resuming``); ``budget`` is the run tree's when this run is a subagent's."""
    user = _user_message(user_input)
    limits = limits or agent.limits
    if budget is None:  # a top-level run: its limits are the budget of its whole tree
        budget = RunBudget(limits)
    await agent.load()
    owner, agent = agent, last_active(agent)  # a handoff's receiver keeps the conversation
    usage = RunUsage()
    run_id = resuming.run_id if resuming is not None else uuid.uuid4().hex
    functions = await agent.prepare_tools()
    ctx = _context(agent, owner, run_id, deps=deps, usage=usage, input=user.text, budget=budget)
    system = await _instructions(agent, ctx, owner.memory.summary)
    messages: list[Message] = [SystemMessage(content=system)] if system else []
    messages.extend(_history(agent, owner.memory.runs, resuming))
    messages.extend(resuming.messages if resuming is not None else [user])
    output = owner.output_spec()  # the answer's type is the one the caller asked for
    settings = agent.model_settings.merged(model_settings)
    model = agent.model
    charge = _charger(usage, budget)

    def on_summary(response: ModelResponse) -> None:  # a summary is a model call of this run
        charge(response, model)

    window = await ContextWindow.open(
        agent.context, model, settings, state=owner.memory.state,
        readable="read_file" in functions, on_summary=on_summary,
    )  # fmt: skip
    task = resuming.messages[0] if resuming is not None and resuming.messages else user
    request_tools = tuple(f.definition for f in functions.values())
    started_at = time.time()
    return ActiveRun(
        limits=limits, usage=usage, model_id=model.id, provider=model.provider, model=model,
        output=output, started=time.monotonic(), run_id=run_id, agent=agent, owner=owner,
        ctx=ctx, budget=budget, overrides=model_settings,
        settings=settings, stream=stream, request_tools=request_tools, tools=request_tools,
        offered=functions, started_at=started_at,
        deadline=_deadline(limits, budget), messages=messages,
        new_messages=[user] if resuming is None else [], window=window, pinned=[task],
        charge=charge, trace=_run_span(agent, owner.session_id, run_id, started_at),
    )  # fmt: skip


def _run_span(agent: Agent[Any], session_id: str, run_id: str, started_at: float) -> SpanRecord:
    """The run's span; under the tool call that started the run, if a tool did."""
    span = SpanRecord(
        kind="run", name=agent.name, start=started_at,
        attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.name,
            "gen_ai.request.model": agent.model.id, "gen_ai.provider.name": agent.model.provider,
            "gen_ai.conversation.id": session_id, "agentica.run_id": run_id,
        },
    )  # fmt: skip
    caller = running_call()
    if caller is not None and caller.span is not None:
        span.attributes["agentica.parent_call"] = caller.id
        caller.span.children.append(span)
    return span


async def hand_over(run: ActiveRun, transfer: Transfer) -> HandoffRecord:
    """Go on with the receiver of ``transfer`` (the current reply called its handoff tool): its
    instructions, tools, model and context policy from the next turn, on the history its
    input filter keeps (``receiver_view``), in the same run, session and budget."""
    assert run.reply is not None
    receiver, owner = transfer.handoff.agent, run.owner
    functions = await receiver.prepare_tools()
    ctx = _context(
        receiver, owner, run.run_id, deps=run.ctx.deps, usage=run.usage, input=run.ctx.input,
        budget=run.budget,
    )  # fmt: skip
    ctx.state = run.ctx.state  # the run's private state goes on
    system = await _instructions(receiver, ctx, owner.memory.summary)
    keep = transfer.handoff.input_filter
    view = receiver_view(run.messages, run.reply.message, keep, run.pinned[0])
    settings = receiver.model_settings.merged(run.overrides)
    model, charge = receiver.model, run.charge

    def on_summary(response: ModelResponse) -> None:  # a summary is a model call of this run
        charge(response, model)

    run.window = await ContextWindow.open(
        receiver.context, model, settings, state=owner.memory.state,
        readable="read_file" in functions, on_summary=on_summary,
    )  # fmt: skip
    record = HandoffRecord(
        source=run.agent.name, target=receiver.name, reason=transfer.reason,
        at=len(run.new_messages),
    )  # fmt: skip
    run.agent, run.ctx, run.settings = receiver, ctx, settings
    run.refresh(functions)
    run.offer(functions, run.request_tools)
    run.messages = [SystemMessage(content=system), *view] if system else view
    run.pinned = [m for m in run.pinned if m in view]
    run.notes, run.tool_choice, run.require_call, run.reply = (), None, False, None
    run.handoffs += 1
    run.handoff_log.append(record)
    return record
