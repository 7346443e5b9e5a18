"""Subagents through the ``task`` tool: fresh context, one report, parallel runs, privileges,
depth limit, usage added to the parent's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentica import Agent, UsageError, tool
from agentica.deep.subagents import SubAgent, SubAgents
from agentica.messages import Message, SystemMessage, ToolMessage, UserMessage
from agentica.models.base import ModelRequest
from agentica.testing import FunctionModel, ScriptedModel, call, tool_calls


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {path}"


@tool
def execute(command: str) -> str:
    """Run a command."""
    return f"ran {command}"


def reporter(seen: list[tuple[str, list[str]]], delay: float = 0.0) -> FunctionModel:
    """A subagent model: records its first request (task text, offered tools) and reports."""

    async def reply(messages: list[Message], request: ModelRequest) -> Any:
        user = next(m for m in messages if isinstance(m, UserMessage))
        seen.append((user.text, sorted(t.name for t in request.tools)))
        await asyncio.sleep(delay)
        return f"report on: {user.text}"

    return FunctionModel(reply)


async def test_a_subagent_gets_a_fresh_context_and_returns_one_report() -> None:
    seen: list[tuple[str, list[str]]] = []
    worker = SubAgent("worker", "does things", model=reporter(seen))
    parent_model = ScriptedModel([
        tool_calls(call("task", description="count lines in a.py", agent="worker")),
        "The worker reported.",
    ])  # fmt: skip
    agent = Agent(model=parent_model, tools=[read_file], instructions="PARENT PROMPT",
                  capabilities=[SubAgents([worker])])  # fmt: skip
    await agent.run("secret parent conversation")
    result = next(m for m in parent_model.requests[1].messages if isinstance(m, ToolMessage))
    assert result.content == "report on: count lines in a.py"
    task_text, tools = seen[0]
    assert task_text == "count lines in a.py"
    assert tools == ["read_file"]  # the parent's tools, without task (depth 1)
    child_request = worker.model.requests[0]  # type: ignore[union-attr]
    texts = " ".join(str(getattr(m, "content", "")) for m in child_request.messages)
    assert "secret parent conversation" not in texts and "PARENT PROMPT" not in texts
    assert isinstance(child_request.messages[0], SystemMessage)


async def test_subagents_run_in_parallel_and_their_usage_is_added() -> None:
    seen: list[tuple[str, list[str]]] = []
    worker = SubAgent("worker", "does things", model=reporter(seen, delay=0.3))
    parent_model = ScriptedModel([
        tool_calls(*(call("task", description=f"part {i}", agent="worker") for i in range(3))),
        "merged",
    ])  # fmt: skip
    agent = Agent(model=parent_model, capabilities=[SubAgents([worker], general=False)])
    started = time.perf_counter()
    response = await agent.run("do three parts")
    assert time.perf_counter() - started < 0.8  # 3 x 0.3 s at once, not one after another
    assert sorted(t for t, _ in seen) == ["part 0", "part 1", "part 2"]
    assert response.usage.requests == 2 + 3  # the parent's two calls and one per subagent


async def test_privileges_pick_the_parents_tools() -> None:
    seen: list[tuple[str, list[str]]] = []
    kinds = [
        SubAgent("explorer", "reads", privilege="explore", model=reporter(seen)),
        SubAgent("coder", "writes", privilege="code", model=reporter(seen)),
        SubAgent("own", "own tools", tools=[execute], model=reporter(seen)),
    ]
    parent_model = ScriptedModel([
        tool_calls(call("task", description="a", agent="explorer")),
        tool_calls(call("task", description="b", agent="coder")),
        tool_calls(call("task", description="c", agent="own")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=parent_model, tools=[read_file, write_file, execute],
                  capabilities=[SubAgents(kinds)])  # fmt: skip
    await agent.run("go")
    assert dict(seen) == {
        "a": ["read_file"],
        "b": ["execute", "read_file", "write_file"],
        "c": ["execute"],
    }


async def test_depth_limits_nesting() -> None:
    seen: list[tuple[str, list[str]]] = []
    deep = SubAgent("deep", "nests", model=reporter(seen))
    for depth, has_task in ((1, False), (2, True)):
        seen.clear()
        parent_model = ScriptedModel(
            [tool_calls(call("task", description="x", agent="deep")), "ok"]
        )
        agent = Agent(model=parent_model, tools=[read_file],
                      capabilities=[SubAgents([deep], max_depth=depth)])  # fmt: skip
        await agent.run("go")
        assert ("task" in seen[0][1]) is has_task


async def test_errors_are_told_to_the_model() -> None:
    failing = SubAgent("failing", "fails", model=ScriptedModel([]))  # runs out of replies
    parent_model = ScriptedModel([
        tool_calls(call("task", description="x", agent="nobody"), call("task", description=" "),
                   call("task", description="y", agent="failing")),
        "ok",
    ])  # fmt: skip
    agent = Agent(model=parent_model, capabilities=[SubAgents([failing])])
    response = await agent.run("go")
    unknown, empty, failed = (c.content for c in response.tool_calls)
    assert "there is no subagent 'nobody'; use one of: general-purpose, failing" in unknown
    assert "description is empty" in empty
    assert failed.startswith("the failing subagent failed:")


def test_configuration_errors() -> None:
    with pytest.raises(UsageError, match="not allowed"):
        SubAgent("bad name", "x")
    with pytest.raises(UsageError, match="privilege"):
        SubAgent("x", "y", privilege="admin")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="at least one"):
        SubAgents(general=False)
    with pytest.raises(UsageError, match="two subagents"):
        SubAgents([SubAgent("a", "x"), SubAgent("a", "y")])
    with pytest.raises(UsageError, match="max_depth"):
        SubAgents(max_depth=0)


async def test_a_subagents_calls_stream_to_the_parent_as_they_happen() -> None:
    from agentica.run import ToolCallCompleted, ToolCallStarted, ToolProgress

    child_model = ScriptedModel([
        tool_calls(call("read_file", path="a.py")),
        tool_calls(call("read_file", path="b.py")),
        "a.py and b.py read",
    ])  # fmt: skip
    worker = SubAgent("worker", "reads files", model=child_model)
    parent_model = ScriptedModel([
        tool_calls(call("task", description="read two files", agent="worker")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=parent_model, tools=[read_file], capabilities=[SubAgents([worker])])
    kinds: list[str] = []
    progress: list[ToolProgress] = []
    async with agent.run_stream("delegate the reading") as stream:
        async for event in stream:
            kinds.append(event.kind)
            if isinstance(event, ToolProgress):
                progress.append(event)
    assert {p.source for p in progress} == {"task:worker"}
    updates = [p.update for p in progress]
    assert [type(u) for u in updates] == [ToolCallStarted, ToolCallCompleted] * 2
    assert [u.call.call.arguments for u in updates if isinstance(u, ToolCallCompleted)] == [
        '{"path": "a.py"}',
        '{"path": "b.py"}',
    ]
    # the subagent's steps arrive between the task call's start and its completion
    first, last = kinds.index("tool_progress"), len(kinds) - 1 - kinds[::-1].index("tool_progress")
    assert kinds.index("tool_call_started") < first and last < kinds.index("tool_call_completed")
    assert stream.response.content == "done"


async def test_closing_the_stream_while_a_subagent_works_cancels_it() -> None:
    finished: list[str] = []

    @tool
    async def slow_search(query: str) -> str:
        """Search slowly."""
        await asyncio.sleep(30)
        finished.append(query)
        return "found"

    child_model = ScriptedModel([tool_calls(call("slow_search", query="x")), "never"])
    worker = SubAgent("worker", "slow", model=child_model, tools=[slow_search])
    parent_model = ScriptedModel([tool_calls(call("task", description="wait", agent="worker"))])
    agent = Agent(model=parent_model, capabilities=[SubAgents([worker], general=False)])
    stream = agent.run_stream("go")
    t0 = time.perf_counter()
    async for event in stream:
        if event.kind == "tool_progress":  # the subagent's slow call has started
            break
    await stream.__aexit__(None, None, None)  # the caller gives up on the run
    assert time.perf_counter() - t0 < 5 and not finished
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert not others


async def test_the_cli_shows_a_subagents_calls_indented_under_its_task() -> None:
    from rich.console import Console

    from agentica.cli.render import EventPrinter

    child_model = ScriptedModel([tool_calls(call("read_file", path="notes.md")), "read it"])
    worker = SubAgent("worker", "reads files", model=child_model)
    parent_model = ScriptedModel([
        tool_calls(call("task", description="read notes.md", agent="worker")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=parent_model, tools=[read_file], capabilities=[SubAgents([worker])])
    console = Console(record=True, width=160, color_system=None)
    printer = EventPrinter(console)
    async for event in agent.run_stream("delegate"):
        printer(event)
    lines = console.export_text().splitlines()
    task_start = next(i for i, ln in enumerate(lines) if ln.startswith("→ task"))
    task_end = next(i for i, ln in enumerate(lines) if ln.startswith("✓ task"))
    inner = lines[task_start + 1 : task_end]
    assert inner[0].startswith('  [task:worker] → read_file {"path": "notes.md"}')
    assert inner[1].startswith("  [task:worker] ✓ read_file") and "contents of notes.md" in inner[1]


@pytest.mark.parametrize(
    ("printed", "report", "shown"),
    [
        ("north 165", "The totals are north 165.", None),  # the report quotes it: nothing added
        ("north 165", "I ran the code to compute the totals.", "north 165"),
        ("x" * 2000, "Done.", "x" * 600 + " ... [1400 more characters]"),
    ],
    ids=["quoted", "described", "long"],
)
async def test_the_subagents_last_tool_result_backs_its_report(
    printed: str, report: str, shown: str | None
) -> None:
    @tool
    def compute() -> str:
        """Compute the totals."""
        return printed

    helper = ScriptedModel([tool_calls(call("compute")), report])
    worker = SubAgent("worker", "computes", tools=[compute], model=helper)
    model = ScriptedModel([tool_calls(call("task", description="compute", agent="worker")), "ok"])
    response = await Agent(model=model, capabilities=[SubAgents([worker])]).run("go")
    content = response.tool_calls[0].content
    if shown is None:
        assert content == report
    else:
        evidence = f"[The subagent's last successful tool call, compute, returned:\n{shown}]"
        assert content == f"{report}\n\n{evidence}"


async def test_a_subagent_whose_code_never_ran_cleanly_did_not_do_the_subtask() -> None:
    @tool
    def run(code: str) -> str:
        """Run code."""
        return "exit code 1\nTypeError: list indices must be integers or slices, not str"

    attempt = call("run", code="print(row['amount'])")
    helper = ScriptedModel([tool_calls(attempt), tool_calls(attempt), "The totals are 123."])
    worker = SubAgent("worker", "computes", tools=[run], model=helper)
    model = ScriptedModel([tool_calls(call("task", description="compute", agent="worker")), "ok"])
    response = await Agent(model=model, capabilities=[SubAgents([worker])]).run("go")
    result = response.tool_calls[0]
    assert result.status == "error"
    assert "did not finish the subtask: every run call it made failed" in result.content
    assert "TypeError: list indices" in result.content
    assert "123" not in result.content  # the invented report is not passed on


async def test_a_failure_after_the_tool_worked_keeps_the_report_with_the_result_that_worked() -> (
    None
):
    outputs = iter(["north 165", "exit code 1\nNameError: name 'x' is not defined"])

    @tool
    def run(code: str) -> str:
        """Run code."""
        return next(outputs)

    helper = ScriptedModel(
        [tool_calls(call("run", code="a")), tool_calls(call("run", code="x")), "Totals computed."]
    )
    worker = SubAgent("worker", "computes", tools=[run], model=helper)
    model = ScriptedModel([tool_calls(call("task", description="compute", agent="worker")), "ok"])
    response = await Agent(model=model, capabilities=[SubAgents([worker])]).run("go")
    result = response.tool_calls[0]
    assert result.status == "success"
    assert result.content == (
        "Totals computed.\n\n[The subagent's last successful tool call, run, returned:\nnorth 165]"
    )
