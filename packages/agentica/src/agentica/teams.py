"""Teams: a coordinator agent and members (agents or other teams) that answer a task together.

```python
team = Team(name="desk", coordinator=lead, members=[researcher, writer], mode="coordinate")
print((await team.run("Write a note on Oslo's population.")).content)
```

Three modes: ``route`` (the coordinator picks one member and that member's answer is the
team's), ``coordinate`` (the coordinator delegates subtasks to several members at once, as tools
in the same TaskGroup as its other tools, and composes the answer) and ``collaborate`` (every
member answers the task concurrently, then the coordinator synthesises). A team can be a member
of another team; the limits of the top run bound the whole tree (one ``RunBudget``), and the
usage of every run of the tree adds up in the team's response.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal, TypeAlias

from agentica.agent import Agent
from agentica.errors import ConcurrentRunError, UsageError
from agentica.limits import RunBudget, RunLimits
from agentica.messages import RunUsage
from agentica.run.capability import Capability
from agentica.run.child import run_child
from agentica.run.events import RunCompleted, RunEvent, ToolProgress
from agentica.run.loop import run_events
from agentica.run.result import RunResponse
from agentica.run.stream import RunStream
from agentica.tools.context import RunContext
from agentica.tools.control import StopRun
from agentica.tools.function import Function

__all__ = ["Team", "TeamMode"]

TeamMode: TypeAlias = Literal["route", "coordinate", "collaborate"]
Member: TypeAlias = "Agent[Any] | Team"

_MODES = ("route", "coordinate", "collaborate")
_ROUTED = "team:routed"  # ctx.state key: the member a route team's run went to


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "member"


Report: TypeAlias = Callable[[str, object], None]


async def _delegate(
    member: Member, task: str, ctx: RunContext[Any], report: Report | None = None
) -> RunResponse[Any]:
    """Run ``member`` on ``task`` inside the run tree of ``ctx`` (its budget, its deps; the
    usage added to ``ctx.usage``), reporting its events under the member's name to ``report``
    (default: ``ctx.report``, the calling run's stream)."""
    to = ctx.report if report is None else report

    def on_event(event: RunEvent) -> None:
        to(member.name, event)

    if isinstance(member, Team):
        return await member._run_in(task, ctx, on_event)
    return await run_child(member.clone(), task, ctx, on_event=on_event)


class _Lead(Capability):
    """What makes the coordinator a team's lead: the members as tools (``route``,
    ``coordinate``) and a note on how to use them."""

    name = "team"

    def __init__(self, team: Team) -> None:
        self._team = team
        members = team.members
        if team.mode == "coordinate":
            self._tools = tuple(_ask_tool(m) for m in members)
        elif team.mode == "route":
            self._tools = tuple(_route_tool(m) for m in members)
        else:
            self._tools = ()

    def tools(self) -> Sequence[Function]:
        return self._tools

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        names = ", ".join(m.name for m in self._team.members)
        if self._team.mode == "coordinate":
            return (
                f"You lead a team ({names}). Give each member a self-contained subtask with its "
                "tool; call several at once when their subtasks are independent. Then compose "
                "the final answer from their results."
            )
        if self._team.mode == "route":
            return (
                f"You route requests to one member of your team ({names}): call the tool of the "
                "member best placed to answer; its answer is the reply."
            )
        return (
            f"The members of your team ({names}) answered the task independently. Synthesise "
            "one final answer from their answers: keep what they agree on, resolve or flag "
            "where they differ."
        )

    async def tool_choice(self, ctx: RunContext[Any]) -> Literal["required"] | None:
        """A route team's first turn must pick a member."""
        first = "team:asked" not in ctx.state
        ctx.state["team:asked"] = True
        return "required" if first and self._team.mode == "route" else None


def _ask_tool(member: Member) -> Function:
    """``coordinate``: a tool giving ``member`` a subtask (run in the caller's tree)."""

    async def ask(ctx: RunContext[Any], task: str) -> str:
        """Give a subtask to this team member and get its answer.

        Args:
            task: the complete subtask, with every detail the member needs to do it alone.
        """
        return (await _delegate(member, task, ctx)).content or ""

    return Function.from_callable(
        ask,
        name=_slug(member.name),
        description=member.description
        or f"Give a self-contained subtask to team member '{member.name}' and get its answer.",
    )


def _route_tool(member: Member) -> Function:
    """``route``: a tool handing the run's task to ``member``, whose answer ends the run. Route
    tools are exclusive (they run one at a time, in call order): only the first one routes."""

    async def route(ctx: RunContext[Any], note: str = "") -> StopRun | str:
        """Let this team member answer the request.

        Args:
            note: anything the member should know beyond the request itself (optional).
        """
        routed = ctx.state.setdefault(_ROUTED, member.name)
        if routed != member.name:
            return f"Not routed: the request already went to {routed}."
        task = f"{ctx.input}\n\nNote from the coordinator: {note}" if note else ctx.input
        try:
            response = await _delegate(member, task, ctx)
        except BaseException:
            del ctx.state[_ROUTED]  # the coordinator may try another member
            raise
        return StopRun(response.content)

    about = f": {member.description}" if member.description else ""
    return Function.from_callable(
        route,
        name=f"route_to_{_slug(member.name)}"[:64],
        description=f"Let team member '{member.name}' answer the request{about}.",
        exclusive=True,
    )


def _synthesis_input(task: str, members: Sequence[Member], answers: Sequence[str]) -> str:
    parts = [task, "", "The members of the team answered this task independently:"]
    for member, answer in zip(members, answers, strict=True):
        parts += ["", f"## {member.name}", answer or "(no answer)"]
    parts += ["", "Give the final answer."]
    return "\n".join(parts)


class Team:
    """A coordinator agent and its members, answering a task together (see the module).

    A team is used like an agent: ``await team.run(task)`` returns a ``RunResponse``,
    ``team.run_stream(task)`` a ``RunStream`` of its events (the members' events come as
    ``ToolProgress`` with the member's name as ``source``), ``team.as_tool()`` offers it to
    another agent, and a team is a member of another team. The team's conversation is its
    lead's: a clone of the coordinator (same session id and storage) given the members.

    Members run as fresh conversations in the run tree of the team's run: the top run's limits
    and budget bound them all (``LimitExceeded`` stops the whole tree), and their usage adds up
    in the response. A member failing does not cancel its siblings: the coordinator sees the
    error as that member's result.

    Args:
        name: the team's name (its tool name as a member of another team).
        coordinator: the agent that routes, delegates or synthesises.
        members: ``Agent`` and ``Team`` objects with distinct names.
        mode: ``"route"``, ``"coordinate"`` (default) or ``"collaborate"``.
        description: what the team does (its tool description as a member).
    """

    __slots__ = ("_asking", "_lead", "coordinator", "description", "members", "mode", "name")

    def __init__(
        self,
        *,
        name: str,
        coordinator: Agent[Any],
        members: Sequence[Member],
        mode: TeamMode = "coordinate",
        description: str | None = None,
    ) -> None:
        if mode not in _MODES:
            raise UsageError(f"Team mode must be one of {', '.join(_MODES)} (got {mode!r})")
        if not isinstance(coordinator, Agent):
            raise UsageError(f"a Team's coordinator is an Agent, not {type(coordinator).__name__}")
        if not isinstance(members, list | tuple) or not members:
            raise UsageError("a Team needs members: a non-empty list of Agent or Team objects")
        names: set[str] = set()
        for member in members:
            if not isinstance(member, Agent | Team):
                raise UsageError(f"team members are Agent or Team objects, not {type(member)!r}")
            if _slug(member.name) in names:
                raise UsageError(
                    f"two members of team {name!r} are named {member.name!r}: names are their "
                    "tool names, give each member its own"
                )
            names.add(_slug(member.name))
        self.name: str = name
        self.description: str | None = description
        self.coordinator: Agent[Any] = coordinator
        self.members: tuple[Member, ...] = tuple(members)
        self.mode: TeamMode = mode
        self._asking = False  # a top-level collaborate run is asking its members
        self._lead: Agent[Any] = coordinator.clone(
            capabilities=[*coordinator.capabilities, _Lead(self)],
            session_id=coordinator.session_id,
        )
        _ = self._lead.functions  # a member named like one of the coordinator's tools: now

    # ----------------------------------------------------------------- running

    def run_stream(
        self,
        task: str,
        *,
        deps: Any = None,
        limits: RunLimits | None = None,
        stream_model: bool = True,
    ) -> RunStream[Any]:
        """Start the team on ``task``; its ``RunStream`` of events (the coordinator's run, the
        members' events as ``ToolProgress``). ``limits`` (default: the coordinator's) bound the
        whole tree."""
        if self.mode == "collaborate":
            return RunStream(self._collaborate(task, deps=deps, limits=limits, stream=stream_model))
        return self._lead.run_stream(task, deps=deps, limits=limits, stream_model=stream_model)

    async def run(
        self, task: str, /, *, deps: Any = None, limits: RunLimits | None = None
    ) -> RunResponse[Any]:
        """Run the team on ``task`` to its answer (consumes ``run_stream``)."""
        stream = self.run_stream(task, deps=deps, limits=limits, stream_model=False)
        async with stream:
            async for _ in stream:
                pass
        return stream.response

    def clone(self, *, session_id: str | None = None) -> Team:
        """The same team on a fresh conversation: its coordinator's clone (a new session id
        unless ``session_id`` is given, the same storage), as ``Agent.clone``. A workflow step
        runs a team so: each run has its own conversation, and runs go on at the same time."""
        changes = {} if session_id is None else {"session_id": session_id}
        return Team(
            name=self.name, coordinator=self.coordinator.clone(**changes), members=self.members,
            mode=self.mode, description=self.description,
        )  # fmt: skip

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Function:
        """This team as a tool another agent can call; each call runs the team afresh in the
        caller's run tree (its budget; the usage added to the caller's)."""
        team = self

        async def delegate(ctx: RunContext[Any], task: str) -> str:
            """Give a task to the team.

            Args:
                task: the complete task, with every detail the team needs to do it alone.
            """
            return (await _delegate(team, task, ctx)).content or ""

        return Function.from_callable(
            delegate,
            name=name or _slug(self.name),
            description=description
            or self.description
            or f"Give a self-contained task to the '{self.name}' team and get its answer.",
        )

    # ----------------------------------------------------------------- inside a tree

    async def _run_in(
        self, task: str, ctx: RunContext[Any], on_event: Callable[[RunEvent], None]
    ) -> RunResponse[Any]:
        """Run afresh (a clone of the lead) on ``task`` as part of the run tree of ``ctx``."""
        if self.mode != "collaborate":
            return await run_child(self._lead.clone(), task, ctx, on_event=on_event)

        def report(source: str, update: object) -> None:  # nested under this team's name
            on_event(ToolProgress(source, update))

        answers = await self._answers(task, ctx, report)
        synthesis = _synthesis_input(task, self.members, answers)
        return await run_child(self._lead.clone(), synthesis, ctx, on_event=on_event)

    async def _answers(self, task: str, ctx: RunContext[Any], report: Report) -> list[str]:
        """Every member's answer to ``task``, concurrently (a failed member's error as its
        answer; all failed: the first error). ``LimitExceeded`` when the tree's budget is spent."""

        async def answer(member: Member) -> str | BaseException:
            try:
                return (await _delegate(member, task, ctx, report)).content or ""
            except Exception as exc:  # one failure does not cancel the siblings
                return exc

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(answer(m)) for m in self.members]
        if ctx.budget is not None:
            ctx.budget.check()
        outcomes = [t.result() for t in tasks]
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if len(failures) == len(outcomes):
            raise failures[0]
        return [
            f"(failed: {type(o).__name__}: {o})" if isinstance(o, BaseException) else o
            for o in outcomes
        ]

    async def _collaborate(
        self, task: str, *, deps: Any, limits: RunLimits | None, stream: bool
    ) -> AsyncGenerator[RunEvent, None]:
        """A top-level ``collaborate`` run: the members' answers (their events as
        ``ToolProgress``), then the lead's run on them; the response's usage is the tree's."""
        if self._asking or self._lead.is_running:  # before any member is asked (and paid)
            raise ConcurrentRunError(
                f"team {self.name!r} is already running: a team is one conversation. Await the "
                "running run first, or use team.clone() for an independent one."
            )
        self._asking = True
        try:
            budget = RunBudget(limits or self.coordinator.limits)
            ctx: RunContext[Any] = RunContext(
                run_id=uuid.uuid4().hex, deps=deps, usage=RunUsage(), input=task, budget=budget
            )
            updates: asyncio.Queue[ToolProgress | None] = asyncio.Queue()
            ctx.set_progress(
                lambda source, update: updates.put_nowait(ToolProgress(source, update))
            )
            gathering = asyncio.ensure_future(self._answers(task, ctx, ctx.report))
            gathering.add_done_callback(lambda _: updates.put_nowait(None))
            try:
                while (update := await updates.get()) is not None:
                    yield update
                answers = await gathering
            finally:
                if not gathering.done():  # the stream was closed early, or cancelled
                    gathering.cancel()
                    await asyncio.gather(gathering, return_exceptions=True)
        finally:
            self._asking = False
        synthesis = _synthesis_input(task, self.members, answers)
        events = run_events(self._lead, synthesis, deps=deps, stream=stream, budget=budget)
        async with RunStream(events) as lead:
            async for event in lead:
                if isinstance(event, RunCompleted):
                    usage = RunUsage()
                    usage.merge(ctx.usage)
                    usage.merge(event.response.usage)
                    event = RunCompleted(response=replace(event.response, usage=usage))
                yield event

    def __repr__(self) -> str:
        members = ", ".join(m.name for m in self.members)
        return f"Team(name={self.name!r}, mode={self.mode!r}, members=[{members}])"
