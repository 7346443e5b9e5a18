"""The tool execution engine: isolation, order, concurrency cap, exclusivity, timeouts, cancel."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentica import Agent, RunCancelled, RunContext, ToolSettings, tool
from agentica.messages import AssistantMessage, ToolMessage
from agentica.run.events import ToolCallCompleted, ToolCallStarted
from agentica.testing import ScriptedModel, call, tool_calls


def tool_messages(model: ScriptedModel, request: int = -1) -> list[ToolMessage]:
    return [m for m in model.requests[request].messages if isinstance(m, ToolMessage)]


async def test_one_failing_tool_among_three_keeps_the_others_in_order() -> None:
    finished: list[str] = []

    @tool
    async def first() -> str:
        await asyncio.sleep(0.05)
        finished.append("first")
        return "first ok"

    @tool
    async def broken() -> str:
        await asyncio.sleep(0.01)
        raise ValueError("disk on fire")

    @tool
    async def third() -> str:
        await asyncio.sleep(0.03)
        finished.append("third")
        return "third ok"

    model = ScriptedModel([tool_calls("first", "broken", "third"), "done"])
    response = await Agent(model=model, tools=[first, broken, third]).run("go")

    assert response.content == "done"
    assert sorted(finished) == ["first", "third"]  # neither sibling was cancelled
    results = tool_messages(model)
    assert [m.name for m in results] == ["first", "broken", "third"]  # call order
    assert results[0].content == "first ok" and not results[0].is_error
    assert results[1].is_error and "ValueError: disk on fire" in results[1].content
    assert results[2].content == "third ok" and not results[2].is_error
    assert [c.status for c in response.tool_calls] == ["success", "error", "success"]


async def test_calls_run_concurrently_and_events_keep_call_order() -> None:
    @tool
    async def wait(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    model = ScriptedModel(
        [tool_calls(*(call("wait", seconds=s) for s in (0.2, 0.05, 0.1, 0.15))), "ok"]
    )
    agent = Agent(model=model, tools=[wait])
    started: list[str] = []
    completed: list[str] = []
    begin = time.perf_counter()
    async for event in agent.run_stream("go"):
        if isinstance(event, ToolCallStarted):
            started.append(event.call.call.arguments)
        elif isinstance(event, ToolCallCompleted):
            completed.append(event.call.call.arguments)
    elapsed = time.perf_counter() - begin
    assert elapsed < 0.35  # 0.2 s for the slowest, not 0.5 s for all in sequence
    assert started == completed  # phase 1 and phase 3 both in call order
    assert [m.content for m in tool_messages(model)] == ["0.2", "0.05", "0.1", "0.15"]


async def test_concurrency_cap_holds() -> None:
    running = 0
    peak = 0

    @tool
    async def work(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return i

    model = ScriptedModel([tool_calls(*(call("work", i=i) for i in range(20))), "ok"])
    agent = Agent(model=model, tools=[work], tool_settings=ToolSettings(max_concurrency=3))
    response = await agent.run("go")
    assert peak == 3
    assert [c.result for c in response.tool_calls] == list(range(20))


async def test_exclusive_calls_run_alone_in_call_order() -> None:
    log: list[str] = []
    running = 0

    async def enter(name: str) -> None:
        nonlocal running
        running += 1
        log.append(f"{name}:start:{running}")
        await asyncio.sleep(0.02)
        running -= 1

    @tool
    async def read(i: int) -> int:
        await enter(f"read{i}")
        return i

    @tool(exclusive=True)
    async def write(i: int) -> int:
        await enter(f"write{i}")
        return i

    model = ScriptedModel(
        [
            tool_calls(call("read", i=1), call("read", i=2), call("write", i=3), call("read", i=4)),
            "ok",
        ]
    )
    await Agent(model=model, tools=[read, write]).run("go")
    write_entry = next(e for e in log if e.startswith("write3"))
    assert write_entry == "write3:start:1"  # nothing else ran with it
    assert log.index(write_entry) == 2  # after both earlier reads, before the later one
    assert log[-1] == "read4:start:1"


async def test_per_call_timeout_is_an_error_result() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(5)
        return "never"

    @tool
    async def quick() -> str:
        return "quick"

    model = ScriptedModel([tool_calls("slow", "quick"), "ok"])
    begin = time.perf_counter()
    await Agent(model=model, tools=[slow, quick]).run("go")
    assert time.perf_counter() - begin < 1
    slow_result, quick_result = tool_messages(model)
    assert slow_result.is_error and "timed out after 0.05 s" in slow_result.content
    assert quick_result.content == "quick"


async def test_default_timeout_applies_to_blocking_tools() -> None:
    @tool
    def stuck() -> str:
        time.sleep(0.5)
        return "late"

    model = ScriptedModel([tool_calls("stuck"), "ok"])
    agent = Agent(model=model, tools=[stuck], tool_settings=ToolSettings(timeout=0.05))
    await agent.run("go")
    (result,) = tool_messages(model)
    assert result.is_error and "timed out" in result.content


async def test_blocking_tools_use_a_pool_sized_for_io() -> None:
    @tool
    def block(i: int) -> str:
        time.sleep(0.2)
        return threading.current_thread().name

    model = ScriptedModel([tool_calls(*(call("block", i=i) for i in range(16))), "ok"])
    begin = time.perf_counter()
    response = await Agent(model=model, tools=[block]).run("go")
    elapsed = time.perf_counter() - begin
    assert elapsed < 0.45  # one wave of 16, not three waves of 6
    names = {c.result for c in response.tool_calls}
    assert len(names) == 16
    assert all(name.startswith("agentica-tool") for name in names)


async def test_cancelling_a_run_cancels_its_tools_and_leaves_nothing_running() -> None:
    threads_before = {t.ident for t in threading.enumerate()}
    tasks_before = asyncio.all_tasks()
    cancelled: list[str] = []
    thread_exited = threading.Event()

    @tool
    async def long_async() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append("async")
            raise
        return "never"

    @tool
    def long_blocking(ctx: RunContext) -> str:
        try:
            ctx.wait_cancelled(30)
            return "stopped early"
        finally:
            thread_exited.set()

    model = ScriptedModel([tool_calls("long_async", "long_blocking"), "never reached"])
    agent = Agent(model=model, tools=[long_async, long_blocking])
    stream = agent.run_stream("go")
    seen = 0
    with pytest.raises(RunCancelled):
        async for event in stream:
            if isinstance(event, ToolCallStarted):
                seen += 1
                if seen == 2:
                    asyncio.get_running_loop().call_later(0.1, stream.cancel, "test")
    assert cancelled == ["async"]
    assert thread_exited.wait(2)  # the blocking tool saw the cancellation and its thread returned
    await asyncio.sleep(0.05)
    assert asyncio.all_tasks() - tasks_before - {asyncio.current_task()} == set()
    busy = [
        t
        for t in threading.enumerate()
        if t.ident not in threads_before and t.name.startswith("agentica-tool") and _is_busy(t)
    ]
    assert busy == []
    record = agent.memory.runs[-1]
    assert record.status == "cancelled"
    # the interrupted calls got synthetic results, so the session stays valid for the provider
    calls = [c.id for m in record.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in record.messages if isinstance(m, ToolMessage)]
    assert len(calls) == 2
    assert results == calls


def _is_busy(thread: threading.Thread) -> bool:
    """A pool thread is busy if its stack is inside a tool rather than waiting for work."""
    import sys
    import traceback

    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return False
    return any("long_blocking" in line for line in traceback.format_stack(frame))


async def test_cancelling_the_task_propagates_cancelled_error() -> None:
    @tool
    async def forever() -> str:
        await asyncio.sleep(30)
        return "never"

    agent = Agent(model=ScriptedModel([tool_calls("forever")]), tools=[forever])
    task = asyncio.create_task(agent.run("go"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not agent.is_running
    assert agent.memory.runs[-1].status == "cancelled"


class _Custom(BaseException):
    """A BaseException that is neither an error nor a signal, as some libraries define."""


BASE_EXCEPTIONS: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),  # what argparse or sys.exit in a library raise
    "CancelledError": lambda: asyncio.CancelledError("the tool gave up"),
    "GeneratorExit": GeneratorExit,
    "_Custom": lambda: _Custom("odd"),
}


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "blocking"])
@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
async def test_a_tool_raising_a_base_exception_fails_alone(kind: str, blocking: bool) -> None:
    """SystemExit aborted the whole run and a tool's own CancelledError sent the model ``null``:
    each is that tool's error result, its siblings finish, and the run goes on."""
    make = BASE_EXCEPTIONS[kind]

    @tool
    async def raising_async() -> str:
        await asyncio.sleep(0.01)
        raise make()

    @tool
    def raising_blocking() -> str:
        raise make()

    @tool
    async def sibling() -> str:
        await asyncio.sleep(0.05)
        return "sibling ok"

    raising = raising_blocking if blocking else raising_async
    for turn in (tool_calls(raising.name, "sibling", "sibling"), tool_calls(raising.name)):
        model = ScriptedModel([turn, "done"])
        response = await Agent(model=model, tools=[raising, sibling]).run("go")
        assert response.content == "done"
        first, *rest = tool_messages(model)
        assert first.is_error and f"failed: {kind}" in first.content
        assert [(m.content, m.is_error) for m in rest] == [("sibling ok", False)] * len(rest)
        assert type(response.tool_calls[0].exception) is type(make())


def test_keyboard_interrupt_from_a_tool_still_stops_the_program(tmp_path: Path) -> None:
    """Ctrl-C means stop: a tool's KeyboardInterrupt is not turned into a tool result."""
    script = tmp_path / "interrupted.py"
    script.write_text(
        "import asyncio\n"
        "from agentica import Agent, tool\n"
        "from agentica.testing import ScriptedModel, tool_calls\n"
        "@tool\n"
        "def stop() -> str:\n"
        "    raise KeyboardInterrupt\n"
        "@tool\n"
        "async def sibling() -> str:\n"
        "    return 'ok'\n"
        "model = ScriptedModel([tool_calls('stop', 'sibling'), 'done'])\n"
        "print(asyncio.run(Agent(model=model, tools=[stop, sibling]).run('go')).content)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr
    assert "done" not in done.stdout


async def test_a_blocking_tool_raising_stop_iteration_fails_at_once() -> None:
    """asyncio cannot set StopIteration on a future: the call hung until the tool timeout."""

    @tool(timeout=5)
    def exhausted() -> str:
        raise StopIteration

    model = ScriptedModel([tool_calls("exhausted"), "done"])
    response = await Agent(model=model, tools=[exhausted]).run("go")
    assert response.content == "done"
    (result,) = tool_messages(model)
    assert result.is_error and "failed: StopIteration" in result.content
