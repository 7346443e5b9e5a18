"""RepetitionGuard: repeated and cyclic tool calls are noticed, warned about, then refused."""

from __future__ import annotations

import sys

import pytest

from agentica import Agent, RunLimits
from agentica.errors import UsageError
from agentica.messages import ToolMessage
from agentica.models import ModelRequest
from agentica.run import RepetitionGuard
from agentica.testing import ScriptedModel, call, tool_calls
from agentica.tools import tool

BROKEN = "print('a'"  # a SyntaxError every time


@tool
def run_code(code: str) -> str:
    """Run Python code and return its exit code and output.

    Args:
        code: Python source.
    """
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    return f"exit code {done.returncode}\n{done.stdout}{done.stderr}"


@tool
def look(path: str) -> str:
    """Return a fixed text for a path.

    Args:
        path: any path.
    """
    return f"contents of {path}"


def results(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolMessage)]


def offered(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


async def test_a_code_call_that_returns_a_syntax_error_three_times_gets_a_warning() -> None:
    model = ScriptedModel([tool_calls(call("run_code", code=BROKEN))] * 3 + ["I give up."])
    agent = Agent(model=model, tools=[run_code], capabilities=[RepetitionGuard()])
    await agent.run("print a")
    seen = results(model.requests[3])
    assert "SyntaxError" in seen[0] and "[repetition" not in seen[0]
    # a failure repeated exactly is pointed out at once: the same input fails the same way
    assert "[repetition warning] This exact run_code call already failed earlier" in seen[1]
    assert "[repetition warning] You made this exact run_code call 3 times" in seen[2]
    assert "failed every time" in seen[2] and "change the input" in seen[2]


async def test_whitespace_and_key_order_do_not_hide_a_repeat() -> None:
    model = ScriptedModel(
        [
            tool_calls(call("look", path="a.txt")),
            tool_calls(call("look", path="a.txt")),
            tool_calls(call("look", path=" a.txt")),  # differs in value: a different call
            "done",
        ]
    )
    agent = Agent(model=model, tools=[look], capabilities=[RepetitionGuard()])
    await agent.run("look")
    assert not any("[repetition" in r for r in results(model.requests[3]))


async def test_2k_identical_calls_refuse_the_tool_for_the_cooldown() -> None:
    model = ScriptedModel([tool_calls(call("run_code", code=BROKEN))] * 6 + ["x", "y", "z"])
    guard = RepetitionGuard(k=3, cooldown=2)
    agent = Agent(model=model, tools=[run_code, look], capabilities=[guard])
    response = await agent.run("print a", limits=RunLimits(max_turns=12))
    last = results(model.requests[6])[-1]
    assert "[repetition stop]" in last and "run_code is refused for your next 2 steps" in last
    assert offered(model.requests[5]) == ["run_code", "look"]
    assert offered(model.requests[6]) == ["look"]  # refused while the cooldown lasts
    assert response.content == "x"
    warnings = [r for r in results(model.requests[6]) if "[repetition warning]" in r]
    assert len(warnings) == 4  # the 2nd (a failure repeated), 3rd, 4th and 5th; the 6th refused
    assert len([r for r in results(model.requests[6]) if "[repetition" in r]) == 5


async def test_refusal_ends_after_the_cooldown() -> None:
    script = [tool_calls(call("look", path="p"))] * 4 + [
        tool_calls(call("run_code", code="print(2)")),
        tool_calls(call("run_code", code="print(3)")),
        tool_calls(call("look", path="r")),
        "done",
    ]
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[look, run_code], capabilities=[RepetitionGuard(k=2)])
    await agent.run("look", limits=RunLimits(max_turns=10))
    assert offered(model.requests[4]) == ["run_code"]
    assert offered(model.requests[5]) == ["run_code"]
    assert offered(model.requests[6]) == ["look", "run_code"]
    assert results(model.requests[7])[-1] == "contents of r"


async def test_calling_a_refused_tool_anyway_leaves_no_tools_for_the_next_call() -> None:
    script = [tool_calls(call("look", path="p"))] * 4 + [
        tool_calls(call("look", path="q")),
        "what I know",
    ]
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[look, run_code], capabilities=[RepetitionGuard(k=2)])
    response = await agent.run("look", limits=RunLimits(max_turns=10))
    assert offered(model.requests[5]) == []
    assert "you called it anyway" in results(model.requests[5])[-1]
    assert response.content == "what I know"


async def test_an_a_b_a_b_cycle_is_warned_about_once_and_refused_after_k_rounds() -> None:
    a, b = call("look", path="a"), call("run_code", code="print(1)")
    model = ScriptedModel([tool_calls(a), tool_calls(b)] * 3 + ["done"])
    agent = Agent(model=model, tools=[look, run_code], capabilities=[RepetitionGuard(k=3)])
    await agent.run("loop", limits=RunLimits(max_turns=10))
    seen = results(model.requests[6])
    assert "[repetition" not in " ".join(seen[:3])
    assert "repeat the same 2 calls (look, run_code) in a cycle" in seen[3]
    assert "[repetition" not in seen[4]
    assert "[repetition stop] the same 2 calls (look, run_code) were repeated 3" in seen[5]
    assert offered(model.requests[6]) == []


async def test_two_runs_do_not_share_the_window() -> None:
    guard = RepetitionGuard(k=2)
    model = ScriptedModel([tool_calls(call("look", path="a")), "one"] * 2)
    first = Agent(model=model, tools=[look], capabilities=[guard])
    second = Agent(model=model, tools=[look], capabilities=[guard])
    await first.run("a")
    await second.run("a")
    assert not any("[repetition" in r for r in results(model.requests[3]))


def test_bad_settings_are_explained() -> None:
    with pytest.raises(UsageError, match="at least 2"):
        RepetitionGuard(k=1)
    with pytest.raises(UsageError, match="window"):
        RepetitionGuard(k=3, window=4)
    with pytest.raises(UsageError, match="cooldown"):
        RepetitionGuard(cooldown=0)


async def test_a_failed_call_repeated_after_other_calls_is_pointed_out() -> None:
    broken = call("run_code", code=BROKEN)
    model = ScriptedModel([
        tool_calls(broken), tool_calls(call("look", path="a")), tool_calls(broken),
        tool_calls(call("look", path="b")), "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[run_code, look], capabilities=[RepetitionGuard()])
    await agent.run("print a")
    seen = results(model.requests[4])
    assert "[repetition" not in seen[0] and "[repetition" not in seen[1]
    assert "already failed earlier in this run" in seen[2]
    assert "[repetition" not in seen[3]
