"""Subagents: the ``task`` tool delegates an isolated subtask to a fresh agent.

A subagent starts with a clean context, works with the tools its kind allows (``explore``,
``research``, ``code``, ``general`` or a custom ``SubAgent``) within the tree's run budget, and
returns one report; ``SubAgents`` has the details.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentica.agent import Agent
from agentica.errors import AgenticaError, ToolError, UsageError
from agentica.models.base import Model
from agentica.run.capability import Capability
from agentica.run.child import run_child
from agentica.run.events import RunEvent
from agentica.run.repetition import returned_error
from agentica.run.result import RunResponse
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

__all__ = ["PRIVILEGE_TOOLS", "SubAgent", "SubAgents", "delegated_calls"]

Privilege = Literal["explore", "research", "code", "general"]

_REPORTED = frozenset({"tool_call_started", "tool_call_completed", "tool_progress"})

_READ = frozenset({
    "ls", "read_file", "glob", "grep", "list_skills", "get_skill_info",
    "var_get", "var_list", "list_commands",
})  # fmt: skip
_WEB = frozenset({"fetch_url", "web_search"})
_WRITE = frozenset({"write_file", "edit_file", "var_set", "var_delete"})
_EXECUTE = frozenset({
    "execute", "run_python", "start_command", "wait_command", "stop_command",
})  # fmt: skip

_PARENT_ONLY = frozenset({"task", "write_todos", "read_todos"})

PRIVILEGE_TOOLS: Mapping[str, frozenset[str] | None] = {
    "explore": _READ,
    "research": _READ | _WEB,
    "code": _READ | _WRITE | _EXECUTE,
    "general": None,  # everything the parent has
}

GENERAL_DESCRIPTION = (
    "A general-purpose agent with the same tools as you, for a self-contained subtask."
)
SUBAGENT_INSTRUCTIONS = (
    "You are a subagent doing one subtask for another agent. Look at the files you need "
    "(read_file) before you write code that uses them. Do the subtask with your tools, then "
    "reply with a short final report: what you did, the results your tools printed, and file "
    "paths you changed. Report only what the tools showed; if something failed, say so. The "
    "other agent sees only this report."
)


_CALLS_KEY = "subagents.calls"


def _record(ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
    ctx.state.setdefault(_CALLS_KEY, []).extend(calls)


def delegated_calls(ctx: RunContext[Any]) -> list[FunctionCall]:
    """The tool calls subagents made for the run of ``ctx`` so far, in the order they ended
    (a ``Heartbeat`` counts a subagent's read of a changed file as checking it)."""
    calls: list[FunctionCall] = ctx.state.get(_CALLS_KEY, [])
    return calls


_EVIDENCE_CHARS = 600


def _cut(text: str) -> str:
    if len(text) <= _EVIDENCE_CHARS:
        return text
    return text[:_EVIDENCE_CHARS] + f" ... [{len(text) - _EVIDENCE_CHARS} more characters]"


def _with_evidence(agent: str, report: str, response: RunResponse[Any]) -> str:
    """The report, followed by the subagent's evidence, the result of its last successful tool
    call, unless the report quotes it.

    A small model's report often describes what it did instead of what its tools printed
    ("I ran the code to compute the totals"); the parent then has no numbers to go on and makes
    them up. A subagent whose last call that ran failed, with no call of that tool ever
    succeeding (code that never ran cleanly), did not do the subtask, whatever its report says:
    that is a ``ToolError`` showing the failure, so the parent does not build on invented results.
    """
    ran = [c for c in response.tool_calls if c.status == "success"]  # refused calls show nothing
    if not ran:
        return report
    worked = [c for c in ran if not returned_error(c)]
    last = ran[-1]
    if returned_error(last) and all(c.name != last.name for c in worked):
        raise ToolError(
            f"the {agent} subagent did not finish the subtask: every {last.name} call it made "
            f"failed; the last one returned:\n{_cut(last.content_without_notes.strip())}\n"
            "Do the subtask yourself, avoiding that error."
        )
    evidence = worked[-1]  # there is one: the last call worked, or a call of its tool did
    text = evidence.content_without_notes.strip()
    if not text or text in report:
        return report
    shown = f"The subagent's last successful tool call, {evidence.name}, returned:\n{_cut(text)}"
    return f"{report}\n\n[{shown}]"


@dataclass(frozen=True, slots=True)
class SubAgent:
    """A kind of subagent the ``task`` tool can start.

    Args:
        name: what the parent passes as ``agent`` (letters, digits, ``-`` and ``_``).
        description: when to use it (shown to the parent model in the tool's description).
        privilege: which of the parent's tools it gets (ignored when ``tools`` is given).
        tools: its own tools instead of the parent's.
        model: its model (default: the parent's).
        instructions: its system prompt (default: a short subagent prompt).
        capabilities: its own capabilities (the ``task`` tool is added while depth allows).
    """

    name: str
    description: str
    privilege: Privilege = "general"
    tools: Sequence[ToolLike] | None = None
    model: Model | str | None = None
    instructions: str | None = None
    capabilities: Sequence[Capability] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise UsageError(
                f"subagent name {self.name!r} is not allowed: use letters, digits, '-' and '_'"
            )
        if self.privilege not in PRIVILEGE_TOOLS:
            raise UsageError(
                f"subagent {self.name!r}: privilege must be one of {sorted(PRIVILEGE_TOOLS)}"
            )


class SubAgents(Capability):
    """Gives the agent the ``task`` tool to delegate subtasks to subagents.

    The parent calls ``task(description, agent="general-purpose")``; a subagent starts with a clean
    context (only the description), works with its own tools, and returns one final report, which is
    all the parent sees, with the result of its last tool call appended when the report does not
    quote it (a small model's report often says what it did, not what its tools printed). Several
    ``task`` calls of one turn run in parallel, in the same TaskGroup as the parent's other tool
    calls; each subagent's usage is added to the parent run's usage, and its tool calls reach the
    parent's ``run_stream()`` as ``ToolProgress("task:<kind>", event)``.

    A subagent run shares the parent's run budget (``RunBudget``, ``agentica.limits``): the
    top-level run's limits bound the whole tree, charged as each model call and tool call happens,
    and the subagent is also held to its own agent's limits (the parent agent's, counted over its
    own run). When the tree's budget runs out inside a subagent, its ``task`` call fails and the
    parent stops with the same ``LimitExceeded``.

    Subagents are typed by privilege, which picks their tools from the parent's:

    - ``explore``: read-only tools (list, read, search files; read todos and skills);
    - ``research``: read-only tools plus the web tools;
    - ``code``: read, write and execute;
    - ``general``: every tool of the parent.

    A custom ``SubAgent`` may instead bring its own tools, model and instructions. A subagent gets
    the ``task`` tool itself only while the nesting depth stays below ``max_depth``.

    Args:
        subagents: custom kinds of subagent, besides the general-purpose one.
        general: offer the ``general-purpose`` subagent (the parent's tools and model).
        max_depth: how deep subagents may nest (1: subagents cannot start subagents).
        shared: capabilities every subagent also gets (e.g. a ``RepetitionGuard``); their
            per-run state is the subagent's own.

    The parent's todo list is its own plan: subagents never get ``write_todos`` or
    ``read_todos`` from the parent (a custom ``SubAgent`` can bring a ``Todos`` capability).
    """

    name = "subagents"

    def __init__(
        self,
        subagents: Sequence[SubAgent] = (),
        *,
        general: bool = True,
        max_depth: int = 1,
        shared: Sequence[Capability] = (),
        _depth: int = 0,
    ) -> None:
        if max_depth < 1:
            raise UsageError("SubAgents(max_depth=...) must be at least 1")
        kinds: dict[str, SubAgent] = {}
        if general:
            kinds["general-purpose"] = SubAgent("general-purpose", GENERAL_DESCRIPTION)
        for spec in subagents:
            if spec.name in kinds:
                raise UsageError(f"two subagents are named {spec.name!r}")
            kinds[spec.name] = spec
        if not kinds:
            raise UsageError("SubAgents needs at least one subagent (or general=True)")
        self.kinds = kinds
        self.max_depth = max_depth
        self.shared = tuple(shared)
        self.depth = _depth
        self._function = self._task_function()

    def tools(self) -> Sequence[ToolLike]:
        return (self._function,)

    def _task_function(self) -> Function:
        capability = self

        async def task(
            ctx: RunContext[Any], description: str, agent: str = "general-purpose"
        ) -> str:
            """Give a self-contained subtask to a subagent; returns its final report.

            Args:
                description: the complete subtask with every detail the subagent needs.
                agent: which subagent to use.
            """
            return await capability.delegate(ctx, description, agent)

        listing = "; ".join(f"{k.name}: {k.description}" for k in self.kinds.values())
        return Function.from_callable(
            task,
            description=(
                "Delegate a self-contained subtask to a subagent with a fresh context; it "
                f"returns one report. Subagents: {listing}"
            ),
        )

    def _child(self, parent: Agent[Any], spec: SubAgent) -> Agent[str]:
        if spec.tools is not None:
            tools: list[ToolLike] = list(spec.tools)
        else:
            allowed = PRIVILEGE_TOOLS[spec.privilege]
            tools = [
                f
                for name, f in parent.functions.items()
                if name not in _PARENT_ONLY and (allowed is None or name in allowed)
            ]
        capabilities = [*self.shared, *spec.capabilities]
        if self.depth + 1 < self.max_depth:
            capabilities.append(
                SubAgents(
                    [k for k in self.kinds.values() if k.name != "general-purpose"],
                    general="general-purpose" in self.kinds,
                    max_depth=self.max_depth,
                    shared=self.shared,
                    _depth=self.depth + 1,
                )
            )
        child = Agent(
            model=spec.model if spec.model is not None else parent.model,
            tools=tools,
            instructions=spec.instructions or SUBAGENT_INSTRUCTIONS,
            name=spec.name,
            model_settings=parent.model_settings,
            limits=parent.limits,
            tool_settings=parent.tool_settings,
            capabilities=capabilities,
            user_id=parent.user_id,
            session_id=parent.session_id,  # its operations belong to the parent's session
            guardrails=parent.guardrails.all,
        )
        files = parent.memory.state.get("files")
        if isinstance(files, dict):  # files kept in the session's state are shared
            child.memory.state["files"] = files
        return child

    async def delegate(self, ctx: RunContext[Any], description: str, agent: str) -> str:
        """Run subagent ``agent`` on ``description`` and return its final report."""
        spec = self.kinds.get(agent)
        if spec is None:
            raise ToolError(f"there is no subagent {agent!r}; use one of: {', '.join(self.kinds)}")
        if not description.strip():
            raise ToolError("the task description is empty; describe the whole subtask")
        parent = ctx.agent
        if not isinstance(parent, Agent):
            raise ToolError("the task tool can only be used by an agent's run")
        child = self._child(parent, spec)
        source = f"task:{agent}"

        def report(event: RunEvent) -> None:  # the parent's stream shows the subagent's steps
            if event.kind in _REPORTED:
                ctx.report(source, event)

        try:
            response = await run_child(child, description, ctx, on_event=report)
        except AgenticaError as exc:
            raise ToolError(
                f"the {agent} subagent failed: {type(exc).__name__}: {exc}. Do the subtask "
                "yourself or give a smaller one."
            ) from exc
        _record(ctx, response.tool_calls)
        if response.stop_reason == "paused":
            raise ToolError(
                f"the {agent} subagent needs approval for a call; do this subtask yourself"
            )
        return _with_evidence(agent, response.content or "(the subagent gave no report)", response)
