"""Teams: route, coordinate and collaborate, nested teams, and one budget for the whole tree."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentica import Agent, ConcurrentRunError, LimitExceeded, RunContext, RunLimits, UsageError
from agentica.messages import Message, UserMessage
from agentica.models import ModelRequest
from agentica.run import RunCompleted, RunEvent, RunStarted, ToolProgress
from agentica.teams import Team
from agentica.testing import FunctionModel, ScriptedModel, call, model_error, tool_calls


class StartLine:
    """Holds every member at its model call until ``count`` members are in one at once: a team
    that ran its members one after another would never get past it (the test's timeout says so)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.waiting = 0
        self.all_in = asyncio.Event()

    async def wait(self) -> None:
        self.waiting += 1
        if self.waiting == self.count:
            self.all_in.set()
        async with asyncio.timeout(10):  # a guard against a hang, not a measurement
            await self.all_in.wait()


def member(name: str, answer: str, line: StartLine | None = None) -> Agent:
    """An agent answering ``answer`` (after ``line`` lets it, if given)."""

    async def reply(messages: list[Message], request: ModelRequest) -> str:
        if line is not None:
            await line.wait()
        return answer

    return Agent(name=name, model=FunctionModel(reply), description=f"The {name} expert.")


def last_user_text(request: ModelRequest) -> str:
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    return users[-1].text


# ----------------------------------------------------------------------------- coordinate


async def test_coordinate_runs_the_members_at_once_and_composes_their_answers() -> None:
    line = StartLine(4)
    members = [member(f"m{i}", f"part {i}", line) for i in range(4)]
    lead_model = ScriptedModel(
        [tool_calls(*(call(f"m{i}", task=f"subtask {i}") for i in range(4))), "all four parts"]
    )
    team = Team(name="desk", coordinator=Agent(name="lead", model=lead_model), members=members)

    events: list[RunEvent] = []
    async with team.run_stream("Write it.") as stream:
        async for event in stream:
            events.append(event)
    response = stream.response

    assert response.content == "all four parts"
    assert response.usage.requests == 6  # the lead's two calls and one per member
    assert [c.content for c in response.tool_calls] == [f"part {i}" for i in range(4)]
    sources = {e.source for e in events if isinstance(e, ToolProgress)}
    assert sources == {"m0", "m1", "m2", "m3"}  # each member's events, under its name
    # the members are offered as tools, with their descriptions; the lead's prompt says how
    first = lead_model.requests[0]
    assert {t.name: t.description for t in first.tools}["m2"] == "The m2 expert."
    assert "You lead a team (m0, m1, m2, m3)" in str(first.messages[0].content)


async def test_a_failing_member_does_not_cancel_its_siblings() -> None:
    broken = Agent(name="broken", model=ScriptedModel([model_error(RuntimeError("boom"))]))
    line = StartLine(2)
    members = [member("a", "from a", line), broken, member("b", "from b", line)]
    lead_model = ScriptedModel(
        [tool_calls(call("a", task="x"), call("broken", task="y"), call("b", task="z")), "done"]
    )
    team = Team(name="desk", coordinator=Agent(name="lead", model=lead_model), members=members)

    response = await team.run("Go.")

    assert response.content == "done"
    outcomes = [(c.status, c.content) for c in response.tool_calls]
    assert outcomes[0] == ("success", "from a") and outcomes[2] == ("success", "from b")
    assert outcomes[1][0] == "error" and "boom" in outcomes[1][1]


# ----------------------------------------------------------------------------- route


async def test_route_gives_the_request_to_one_member_whose_answer_is_the_teams() -> None:
    billing, support = member("billing", "Your invoice is 42 EUR."), member("support", "unused")
    lead_model = ScriptedModel([tool_calls(call("route_to_billing", note="order 7"))])
    team = Team(
        name="desk", coordinator=Agent(name="lead", model=lead_model),
        members=[billing, support], mode="route",
    )  # fmt: skip

    response = await team.run("How much do I owe?")

    assert response.content == "Your invoice is 42 EUR."
    assert response.usage.requests == 2
    first = lead_model.requests[0]
    assert first.settings.tool_choice == "required"  # the first turn must pick a member
    assert sorted(t.name for t in first.tools) == ["route_to_billing", "route_to_support"]
    assert isinstance(billing.model, FunctionModel) and isinstance(support.model, FunctionModel)
    assert not support.model.requests
    asked = last_user_text(billing.model.requests[0])
    assert asked == "How much do I owe?\n\nNote from the coordinator: order 7"


async def test_route_counts_only_the_first_member_called() -> None:
    billing, support = member("billing", "billing answers"), member("support", "unused")
    both = tool_calls(call("route_to_billing"), call("route_to_support"))
    team = Team(
        name="desk", coordinator=Agent(name="lead", model=ScriptedModel([both])),
        members=[billing, support], mode="route",
    )  # fmt: skip

    response = await team.run("?")

    assert response.content == "billing answers"
    assert response.tool_calls[1].content == "Not routed: the request already went to billing."
    assert isinstance(support.model, FunctionModel) and not support.model.requests


# ----------------------------------------------------------------------------- collaborate


async def test_collaborate_asks_every_member_at_once_then_synthesises() -> None:
    line = StartLine(3)
    members = [member(n, f"{n}'s view", line) for n in ("a", "b", "c")]
    lead_model = ScriptedModel(["the synthesis"])
    team = Team(
        name="panel", coordinator=Agent(name="lead", model=lead_model), members=members,
        mode="collaborate",
    )  # fmt: skip

    events: list[RunEvent] = []
    async with team.run_stream("Is it safe?") as stream:
        async for event in stream:
            events.append(event)

    response = stream.response
    assert response.content == "the synthesis"
    assert response.usage.requests == 4  # three members and the synthesis
    asked = last_user_text(lead_model.requests[0])
    assert asked.startswith("Is it safe?")
    assert all(f"## {n}\n{n}'s view" in asked for n in ("a", "b", "c"))
    assert "answered the task independently" in str(lead_model.requests[0].messages[0].content)
    started = next(i for i, e in enumerate(events) if isinstance(e, RunStarted))
    assert {e.source for e in events[:started] if isinstance(e, ToolProgress)} == {"a", "b", "c"}
    assert isinstance(events[-1], RunCompleted)


async def test_a_second_collaborate_run_is_refused_before_any_member_is_asked() -> None:
    line = StartLine(3)  # the first run's members wait here until the third one arrives
    asked: list[str] = []
    both_asked = asyncio.Event()

    async def reply(messages: list[Message], request: ModelRequest) -> str:
        asked.append(last_user_text(request))
        if len(asked) == 2:
            both_asked.set()
        await line.wait()
        return "a view"

    members = [Agent(name=n, model=FunctionModel(reply)) for n in ("a", "b")]
    team = Team(
        name="panel", coordinator=Agent(name="lead", model=ScriptedModel(["one"])),
        members=members, mode="collaborate",
    )  # fmt: skip
    first = asyncio.create_task(team.run("first"))
    async with asyncio.timeout(10):  # both members of the first run are at work
        await both_asked.wait()
    with pytest.raises(ConcurrentRunError, match="already running"):
        await team.run("second")
    assert asked == ["first", "first"]  # nothing was spent on the refused run
    line.all_in.set()
    assert (await first).content == "one"


async def test_collaborate_synthesises_without_a_failed_member_and_fails_if_all_fail() -> None:
    broken = Agent(name="broken", model=ScriptedModel([model_error(RuntimeError("boom"))]))
    lead_model = ScriptedModel(["synthesis"])
    team = Team(
        name="panel", coordinator=Agent(name="lead", model=lead_model),
        members=[member("ok", "fine"), broken], mode="collaborate",
    )  # fmt: skip
    assert (await team.run("?")).content == "synthesis"
    assert "## broken\n(failed: " in last_user_text(lead_model.requests[0])

    all_broken = Team(
        name="panel", coordinator=Agent(name="lead", model=ScriptedModel([])),
        members=[Agent(name="x", model=ScriptedModel([model_error(RuntimeError("boom"))]))],
        mode="collaborate",
    )  # fmt: skip
    with pytest.raises(Exception, match="boom"):
        await all_broken.run("?")


# ----------------------------------------------------------------------------- trees


def _tree(inner_lead: list[Any], outer_lead: list[Any]) -> tuple[Team, list[Agent]]:
    """An outer ``coordinate`` team whose members are an inner ``collaborate`` team (two
    members) and a solo agent."""
    inner_members = [member("x", "x says"), member("y", "y says")]
    inner = Team(
        name="panel", coordinator=Agent(name="panel_lead", model=ScriptedModel(inner_lead)),
        members=inner_members, mode="collaborate", description="A panel of two.",
    )  # fmt: skip
    solo = member("solo", "solo says")
    outer = Team(
        name="org", coordinator=Agent(name="boss", model=ScriptedModel(outer_lead)),
        members=[inner, solo],
    )  # fmt: skip
    return outer, [*inner_members, solo]


async def test_a_team_is_a_member_of_another_team_and_the_usage_of_the_tree_adds_up() -> None:
    delegate = tool_calls(call("panel", task="weigh it"), call("solo", task="check it"))
    outer, _ = _tree(["panel verdict"], [delegate, "final"])

    events: list[RunEvent] = []
    async with outer.run_stream("Decide.") as stream:
        async for event in stream:
            events.append(event)

    response = stream.response
    assert response.content == "final"
    assert [c.content for c in response.tool_calls] == ["panel verdict", "solo says"]
    assert response.usage.requests == 6  # boss 2, panel members 2, panel lead 1, solo 1
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert {e.source for e in progress} == {"panel", "solo"}
    # the panel's members report inside the panel's updates
    inner = [e.update for e in progress if e.source == "panel"]
    assert {u.source for u in inner if isinstance(u, ToolProgress)} == {"x", "y"}
    assert outer.members[0].description == "A panel of two."


async def test_the_top_runs_budget_stops_the_whole_tree() -> None:
    delegate = tool_calls(call("panel", task="weigh it"), call("solo", task="check it"))
    outer, members = _tree(["panel verdict"], [delegate, "final"])

    with pytest.raises(LimitExceeded) as caught:
        await outer.run("Decide.", limits=RunLimits(max_turns=3))

    assert caught.value.limit == "max_turns"
    calls = [len(m.model.requests) for m in members if isinstance(m.model, FunctionModel)]
    assert sum(calls) <= 2  # the boss's call and at most two more, then every run stops


async def test_a_collaborate_team_on_its_own_is_bounded_too() -> None:
    team = Team(
        name="panel", coordinator=Agent(name="lead", model=ScriptedModel(["unused"])),
        members=[member("a", "a"), member("b", "b"), member("c", "c")], mode="collaborate",
    )  # fmt: skip
    with pytest.raises(LimitExceeded, match="max_turns"):
        await team.run("?", limits=RunLimits(max_turns=3))  # the synthesis is the fourth call


async def test_a_team_as_a_tool_of_an_agent_shares_the_callers_run() -> None:
    team = Team(
        name="panel", coordinator=Agent(name="lead", model=ScriptedModel(["verdict"])),
        members=[member("a", "a says")], mode="collaborate",
    )  # fmt: skip
    agent = Agent(
        model=ScriptedModel([tool_calls(call("panel", task="judge")), "the panel said so"]),
        tools=[team.as_tool()],
    )
    response = await agent.run("?")
    assert response.content == "the panel said so"
    assert response.tool_calls[0].content == "verdict"
    assert response.usage.requests == 4


async def test_the_team_is_one_conversation_and_deps_reach_the_members() -> None:
    seen: list[Any] = []

    async def whoami(ctx: RunContext[str]) -> str:
        """Say who asks."""
        seen.append(ctx.deps)
        return "ok"

    helper = Agent(
        name="helper", tools=[whoami],
        model=ScriptedModel([tool_calls(call("whoami")), "helped"] * 2),
    )  # fmt: skip
    lead_model = ScriptedModel([tool_calls(call("helper", task="help")), "one"] * 2)
    team = Team(name="desk", coordinator=Agent(name="lead", model=lead_model), members=[helper])

    await team.run("first", deps="the deps")
    await team.run("second", deps="the deps")

    assert seen == ["the deps", "the deps"]
    texts = [m.text for m in lead_model.requests[-2].messages if isinstance(m, UserMessage)]
    assert texts == ["first", "second"]  # the second run remembers the first


def test_a_team_says_what_is_wrong_with_it() -> None:
    lead = Agent(name="lead", model=ScriptedModel([]))
    with pytest.raises(UsageError, match="mode must be one of"):
        Team(name="t", coordinator=lead, members=[member("a", "")], mode="vote")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="needs members"):
        Team(name="t", coordinator=lead, members=[])
    with pytest.raises(UsageError, match="named 'a'"):
        Team(name="t", coordinator=lead, members=[member("a", ""), member("a", "")])
    with pytest.raises(UsageError, match="coordinator is an Agent"):
        Team(name="t", coordinator="lead", members=[member("a", "")])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="Agent or Team"):
        Team(name="t", coordinator=lead, members=["a"])  # type: ignore[list-item]
