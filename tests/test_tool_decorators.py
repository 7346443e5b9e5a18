"""Every way to make a tool, run through a real agent: ``def`` and ``async def`` behind every
decorator path reach the model as results (never as "<coroutine object ...>"); where tools run
(thread pool, contextvars); how results and control values are rendered; the RunContext; and
that tools never keep their agent alive."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from agentica import (
    Agent,
    Function,
    Retry,
    RunContext,
    RunResponse,
    StopRun,
    Tool,
    ToolError,
    UsageError,
    tool,
)
from agentica.messages import ToolMessage
from agentica.testing import ScriptedModel, call, tool_calls
from agentica.tools import render_result

# --------------------------------------------------------------------------- helpers


def tool_messages(model: ScriptedModel, request: int = -1) -> list[ToolMessage]:
    return [m for m in model.requests[request].messages if isinstance(m, ToolMessage)]


async def run_calls(
    tools: list[Any], *calls: Any, deps: Any = None
) -> tuple[list[ToolMessage], RunResponse]:
    """Run one turn of ``calls`` then a final answer; the tool messages the model saw next."""
    model = ScriptedModel([tool_calls(*calls), "done"])
    response = await Agent(model=model, tools=tools).run("go", deps=deps)
    assert response.content == "done"
    assert len(model.requests) == 2
    messages = tool_messages(model, 1)
    assert len(messages) == len(calls)
    for message in messages:
        assert "<coroutine object" not in message.content
    return messages, response


# --------------------------------------------------------------------------- the decorator paths


def add(a: int, b: int = 1) -> int:
    """Add b to a."""
    return a + b


async def aadd(a: int, b: int = 1) -> int:
    """Add b to a, asynchronously."""
    await asyncio.sleep(0)
    return a + b


@tool
def bare_sync(a: int, b: int = 1) -> int:
    return a + b


@tool
async def bare_async(a: int, b: int = 1) -> int:
    await asyncio.sleep(0)
    return a + b


@tool(name="opt_sync", description="Add.", timeout=5, exclusive=True, strict=True)
def options_sync(a: int, b: int = 1) -> int:
    return a + b


@tool(name="opt_async", description="Add.", timeout=5, exclusive=True, strict=True)
async def options_async(a: int, b: int = 1) -> int:
    await asyncio.sleep(0)
    return a + b


class Calculator(Tool):
    """A toolkit whose methods use instance state."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.calls: list[str] = []
        super().__init__(instructions="Use the calculator.")

    @tool
    def shift(self, a: int) -> int:
        """Add the offset."""
        self.calls.append("shift")
        return a + self.offset

    @tool
    async def ashift(self, a: int) -> int:
        """Add the offset, asynchronously."""
        await asyncio.sleep(0)
        self.calls.append("ashift")
        return a + self.offset


class Counter:
    """A plain class whose bound methods are passed as tools."""

    def __init__(self, start: int) -> None:
        self.value = start

    def bump(self, by: int) -> int:
        self.value += by
        return self.value

    async def abump(self, by: int) -> int:
        await asyncio.sleep(0)
        self.value += by
        return self.value


class AsyncAdder:
    """A callable object with ``async def __call__``."""

    def __init__(self, base: int) -> None:
        self.base = base

    async def __call__(self, a: int) -> int:
        await asyncio.sleep(0)
        return self.base + a


class SyncAdder:
    def __init__(self, base: int) -> None:
        self.base = base

    def __call__(self, a: int) -> int:
        return self.base + a


def sync_wrapper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator that is a plain ``def`` returning whatever ``fn`` returns (a coroutine)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


@dataclasses.dataclass
class Case:
    """One way to make a tool: the tools list, the call to make and the expected result."""

    tools: Callable[[], list[Any]]
    name: str
    arguments: dict[str, Any]
    expected: str


def _sub_agent_tool() -> list[Any]:
    sub = Agent(model=ScriptedModel(["sub-agent answer"]), name="helper")
    return [sub.as_tool()]


CASES = {
    "bare-def": Case(lambda: [bare_sync], "bare_sync", {"a": 2}, "3"),
    "bare-async": Case(lambda: [bare_async], "bare_async", {"a": 2}, "3"),
    "options-def": Case(lambda: [options_sync], "opt_sync", {"a": 2, "b": 5}, "7"),
    "options-async": Case(lambda: [options_async], "opt_async", {"a": 2, "b": 5}, "7"),
    "call-form-def": Case(lambda: [tool(add)], "add", {"a": 4}, "5"),
    "call-form-async": Case(lambda: [tool(aadd)], "aadd", {"a": 4}, "5"),
    "call-form-options-async": Case(lambda: [tool(name="plus")(aadd)], "plus", {"a": 4}, "5"),
    "from-callable-def": Case(lambda: [Function.from_callable(add)], "add", {"a": 1}, "2"),
    "from-callable-async": Case(lambda: [Function.from_callable(aadd)], "aadd", {"a": 1}, "2"),
    "plain-def": Case(lambda: [add], "add", {"a": 10, "b": 10}, "20"),
    "plain-async": Case(lambda: [aadd], "aadd", {"a": 10, "b": 10}, "20"),
    "toolkit-method-def": Case(lambda: [Calculator(100)], "shift", {"a": 1}, "101"),
    "toolkit-method-async": Case(lambda: [Calculator(100)], "ashift", {"a": 1}, "101"),
    "container-def": Case(lambda: [Tool("math", [add, aadd])], "add", {"a": 3}, "4"),
    "container-async": Case(lambda: [Tool("math", [add, aadd])], "aadd", {"a": 3}, "4"),
    "bound-method-def": Case(lambda: [Counter(40).bump], "bump", {"by": 2}, "42"),
    "bound-method-async": Case(lambda: [Counter(40).abump], "abump", {"by": 2}, "42"),
    "callable-object-async": Case(lambda: [AsyncAdder(7)], "AsyncAdder", {"a": 1}, "8"),
    "callable-object-def": Case(lambda: [SyncAdder(7)], "SyncAdder", {"a": 1}, "8"),
    "partial-async": Case(lambda: [functools.partial(aadd, b=100)], "aadd", {"a": 1}, "101"),
    "partial-def": Case(lambda: [functools.partial(add, b=100)], "add", {"a": 1}, "101"),
    "sync-wrapper-of-async": Case(lambda: [sync_wrapper(aadd)], "aadd", {"a": 5}, "6"),
    "tool-of-sync-wrapper": Case(lambda: [tool(sync_wrapper(aadd))], "aadd", {"a": 5}, "6"),
    "agent-as-tool": Case(_sub_agent_tool, "helper", {"task": "do it"}, "sub-agent answer"),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_every_decorator_path_reaches_the_model_as_a_result(case: Case) -> None:
    messages, response = await run_calls(case.tools(), call(case.name, **case.arguments))

    assert messages[0].name == case.name
    assert messages[0].content == case.expected
    assert not messages[0].is_error
    executed = response.tool_calls[0]
    assert executed.status == "success"
    assert not asyncio.iscoroutine(executed.result)


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_every_decorator_path_works_when_streaming(case: Case) -> None:
    model = ScriptedModel([tool_calls(call(case.name, **case.arguments)), "done"])
    stream = Agent(model=model, tools=case.tools()).run_stream("go")
    async with stream:
        async for _ in stream:
            pass
    assert stream.response.content == "done"
    assert tool_messages(model, 1)[0].content == case.expected


@pytest.mark.parametrize(
    ("fn", "is_async"),
    [
        (aadd, True),
        (add, False),
        (AsyncAdder(1), True),
        (SyncAdder(1), False),
        (functools.partial(aadd, b=1), True),
        (Counter(0).abump, True),
        (Counter(0).bump, False),
        (sync_wrapper(aadd), False),  # a def: it runs in a thread, its coroutine is awaited after
    ],
    ids=[
        "async-def",
        "def",
        "async-callable",
        "sync-callable",
        "partial",
        "bound-async",
        "bound-def",
        "sync-wrapper",
    ],
)
def test_is_async_detection(fn: Any, is_async: bool) -> None:
    assert Function.from_callable(fn).is_async is is_async


def test_signatures_through_the_wrapping_paths() -> None:
    # partial: the bound keyword stays optional with its new default
    partial_schema = Function.from_callable(functools.partial(aadd, b=100)).parameters
    assert partial_schema["properties"]["b"]["default"] == 100
    assert partial_schema["required"] == ["a"]
    # functools.wraps: the wrapped function's signature and docstring
    wrapped = Function.from_callable(sync_wrapper(aadd))
    assert wrapped.parameters["required"] == ["a"]
    assert wrapped.description == "Add b to a, asynchronously."
    # bound methods and toolkit methods: no "self" in the schema
    assert set(Function.from_callable(Counter(0).bump).parameters["properties"]) == {"by"}
    assert set(Calculator(0).functions["shift"].parameters["properties"]) == {"a"}
    # callable objects: named after their class, no "self"
    adder = Function.from_callable(AsyncAdder(1))
    assert (adder.name, list(adder.parameters["properties"])) == ("AsyncAdder", ["a"])


async def test_agent_as_tool_schema_describes_the_task_and_passes_deps_and_usage() -> None:
    seen: list[Any] = []

    @tool
    def read_deps(ctx: RunContext[str]) -> str:
        seen.append(ctx.deps)
        return "read"

    sub_model = ScriptedModel([tool_calls("read_deps"), "sub done"])
    sub = Agent(model=sub_model, tools=[read_deps], name="research team", description="Research.")
    delegate = sub.as_tool()

    assert delegate.name == "research_team"
    assert delegate.description == "Research."
    assert delegate.context_param == "ctx"
    assert delegate.parameters["required"] == ["task"]
    assert "complete task" in delegate.parameters["properties"]["task"]["description"]

    messages, response = await run_calls([delegate], call("research_team", task="t"), deps="D")
    assert messages[0].content == "sub done"
    assert seen == ["D"]
    assert sub_model.requests[0].messages[-1].text == "t"  # type: ignore[union-attr]
    assert len(sub.memory.runs) == 0  # each call runs in a fresh clone
    assert response.usage.requests == 2 + 2  # the sub-agent's two requests are counted
    assert response.usage.tool_calls == 1 + 1


def test_toolkit_collects_methods_and_binds_them_to_the_instance() -> None:
    first, second = Calculator(1), Calculator(1000)
    assert list(first.functions) == ["shift", "ashift"]
    assert first.name == "Calculator"
    assert repr(first) == "<Tool Calculator: shift, ashift>"
    assert first.functions["shift"](1) == 2
    assert second.functions["shift"](1) == 1001
    assert first.calls == ["shift"]
    assert second.calls == ["shift"]
    # attribute access on an instance binds too; on the class it is the unbound Function
    assert first.shift(5) == 6  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="is a method"):
        Calculator.shift(5)  # type: ignore[call-arg]


async def test_toolkit_instructions_reach_the_model() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model=model, tools=[Calculator(0)], instructions="Be brief.").run("go")
    system = model.requests[0].messages[0]
    assert system.role == "system"
    assert system.content == "Be brief.\n\nUse the calculator."  # type: ignore[union-attr]


async def test_toolkit_state_is_shared_across_calls_of_one_turn() -> None:
    calculator = Calculator(10)
    messages, _ = await run_calls([calculator], call("shift", a=1), call("ashift", a=2))
    assert [m.content for m in messages] == ["11", "12"]
    assert sorted(calculator.calls) == ["ashift", "shift"]


async def test_calling_a_function_calls_the_underlying_function_unchanged() -> None:
    assert bare_sync(1, b=2) == 3
    coroutine = bare_async(1, 2)
    assert asyncio.iscoroutine(coroutine)
    assert await coroutine == 3
    assert repr(bare_async) == "<Function async bare_async(a, b)>"
    assert repr(bare_sync) == "<Function bare_sync(a, b)>"


# --------------------------------------------------------------------------- where tools run

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def test_sync_tools_run_on_the_tool_thread_pool_and_async_tools_on_the_loop() -> None:
    @tool
    def where_sync() -> str:
        return threading.current_thread().name

    @tool
    async def where_async() -> str:
        return threading.current_thread().name

    class Where(Tool):
        @tool
        def where_method(self) -> str:
            return threading.current_thread().name

    loop_thread = threading.current_thread().name
    messages, _ = await run_calls(
        [where_sync, where_async, Where()],
        call("where_sync"),
        call("where_async"),
        call("where_method"),
    )
    sync_thread, async_thread, method_thread = (m.content for m in messages)
    assert sync_thread.startswith("agentica-tool")
    assert method_thread.startswith("agentica-tool")
    assert async_thread == loop_thread
    assert not loop_thread.startswith("agentica-tool")


async def test_sync_tools_of_one_turn_run_concurrently_on_separate_threads() -> None:
    barrier = threading.Barrier(3)

    @tool
    def meet(i: int) -> str:
        barrier.wait(timeout=5)  # only passes if all three run at the same time
        return threading.current_thread().name

    messages, _ = await run_calls([meet], *(call("meet", i=i) for i in range(3)))
    names = [m.content for m in messages]
    assert all(name.startswith("agentica-tool") for name in names)
    assert len(set(names)) == 3


async def test_contextvars_propagate_into_sync_tools_and_changes_stay_there() -> None:
    @tool
    def read_and_change() -> str:
        value = REQUEST_ID.get()
        REQUEST_ID.set("changed in the tool")
        return value

    @tool
    async def read_async() -> str:
        return REQUEST_ID.get()

    token = REQUEST_ID.set("req-42")
    try:
        messages, _ = await run_calls(
            [read_and_change, read_async], call("read_and_change"), call("read_async")
        )
        assert [m.content for m in messages] == ["req-42", "req-42"]
        assert REQUEST_ID.get() == "req-42"  # the tool's change did not leak out
    finally:
        REQUEST_ID.reset(token)


# --------------------------------------------------------------------------- results


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque 7>"


class Reading(pydantic.BaseModel):
    sensor: str
    value: float


@dataclasses.dataclass
class Pair:
    left: int
    right: str


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ("", ""),
        ('{"already": "json"}', '{"already": "json"}'),
        ({"a": 1, "b": [1, 2]}, '{"a":1,"b":[1,2]}'),
        ([1, "x", None], '[1,"x",null]'),
        (None, "null"),
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        ({"city": "Zürich"}, '{"city":"Zürich"}'),
        (Reading(sensor="t1", value=20.5), '{"sensor":"t1","value":20.5}'),
        (Pair(1, "r"), '{"left":1,"right":"r"}'),
        ([Reading(sensor="a", value=1)], '[{"sensor":"a","value":1.0}]'),
        (Opaque(), '"<Opaque 7>"'),
        ({"inner": Opaque()}, '{"inner":"<Opaque 7>"}'),
    ],
    ids=lambda v: type(v).__name__,
)
def test_render_result(value: Any, expected: str) -> None:
    assert render_result(value) == expected


async def test_results_reach_the_model_rendered() -> None:
    @tool
    def as_dict() -> dict[str, Any]:
        return {"ok": True, "items": [1, 2]}

    @tool
    async def as_model() -> Reading:
        return Reading(sensor="s", value=2.0)

    @tool
    def as_none() -> None:
        return None

    @tool
    async def as_opaque() -> Opaque:
        return Opaque()

    messages, response = await run_calls(
        [as_dict, as_model, as_none, as_opaque],
        call("as_dict"),
        call("as_model"),
        call("as_none"),
        call("as_opaque"),
    )
    assert [m.content for m in messages] == [
        '{"ok":true,"items":[1,2]}',
        '{"sensor":"s","value":2.0}',
        "null",
        '"<Opaque 7>"',
    ]
    # the run keeps the original values
    assert response.tool_calls[1].result == Reading(sensor="s", value=2.0)
    assert isinstance(response.tool_calls[3].result, Opaque)


# --------------------------------------------------------------------------- control values


async def test_stop_run_ends_the_run_without_another_model_call() -> None:
    @tool
    def finish(answer: str) -> StopRun:
        return StopRun(answer)

    model = ScriptedModel([tool_calls(call("finish", answer="x"))])  # no reply after it
    response = await Agent(model=model, tools=[finish]).run("go")

    assert response.content == "x"
    assert response.output == "x"
    assert response.stop_reason == "stopped"
    assert len(model.requests) == 1
    assert model.remaining == 0
    assert response.tool_calls[0].status == "success"
    assert isinstance(response.tool_calls[0].control, StopRun)
    # the tool result is recorded in the conversation (tool pairs stay complete)
    assert isinstance(response.messages[-1], ToolMessage)
    assert response.messages[-1].content == "x"


async def test_stop_run_with_structured_content_from_an_async_tool_among_siblings() -> None:
    ran: list[str] = []

    @tool
    async def stop() -> StopRun:
        return StopRun({"answer": 42})

    @tool
    def sibling() -> str:
        ran.append("sibling")
        return "sibling ok"

    model = ScriptedModel([tool_calls("sibling", "stop")])
    response = await Agent(model=model, tools=[stop, sibling]).run("go")

    assert response.stop_reason == "stopped"
    assert response.content == '{"answer":42}'
    assert response.output == {"answer": 42}
    assert ran == ["sibling"]  # the other call of the turn still completed
    assert [c.status for c in response.tool_calls] == ["success", "success"]
    assert len(model.requests) == 1


async def test_retry_sends_its_message_as_an_error_and_the_run_continues() -> None:
    attempts: list[str] = []

    @tool
    async def lookup(key: str) -> str | Retry:
        attempts.append(key)
        if key != "exact":
            return Retry(f"No key {key!r}; use 'exact'.")
        return "found"

    model = ScriptedModel(
        [tool_calls(call("lookup", key="fuzzy")), tool_calls(call("lookup", key="exact")), "ok"]
    )
    response = await Agent(model=model, tools=[lookup]).run("go")

    retry = tool_messages(model, 1)[0]
    assert retry.content == "No key 'fuzzy'; use 'exact'."
    assert retry.is_error
    assert tool_messages(model, 2)[-1].content == "found"
    assert response.content == "ok"
    assert response.stop_reason == "completed"
    assert attempts == ["fuzzy", "exact"]
    assert isinstance(response.tool_calls[0].control, Retry)
    assert response.tool_calls[0].status == "error"


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
async def test_tool_error_message_goes_to_the_model_as_is(is_async: bool) -> None:
    def fail(path: str) -> str:
        raise ToolError(f"{path} does not exist; list the directory first.")

    async def afail(path: str) -> str:
        raise ToolError(f"{path} does not exist; list the directory first.")

    fn = Function.from_callable(afail if is_async else fail, name="read_file")
    messages, response = await run_calls([fn], call("read_file", path="/x"))

    assert messages[0].content == "/x does not exist; list the directory first."
    assert messages[0].is_error
    assert isinstance(response.tool_calls[0].exception, ToolError)


async def test_empty_tool_error_gets_a_generic_message() -> None:
    @tool
    def silent() -> str:
        raise ToolError()

    messages, _ = await run_calls([silent], call("silent"))
    assert messages[0].content == "tool 'silent' failed"
    assert messages[0].is_error


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
async def test_other_exceptions_become_a_failed_message_with_the_type_name(
    is_async: bool,
) -> None:
    def boom(n: int) -> int:
        raise ValueError(f"bad input {n}")

    async def aboom(n: int) -> int:
        await asyncio.sleep(0)
        raise KeyError("missing")

    fn = Function.from_callable(aboom if is_async else boom, name="boom")
    messages, response = await run_calls([fn], call("boom", n=3))

    expected = (
        "Tool 'boom' failed: KeyError: 'missing'"
        if is_async
        else ("Tool 'boom' failed: ValueError: bad input 3")
    )
    assert messages[0].content == expected
    assert messages[0].is_error
    assert response.tool_calls[0].status == "error"
    assert isinstance(response.tool_calls[0].exception, KeyError if is_async else ValueError)


# --------------------------------------------------------------------------- RunContext


@dataclasses.dataclass
class MyDeps:
    user: str
    db: dict[str, str]


class ContextTools(Tool):
    @tool
    def method_with_context(self, ctx: RunContext[MyDeps], key: str) -> str:
        return ctx.deps.db[key]


async def test_run_context_is_passed_at_call_time() -> None:
    seen: list[tuple[str, Any, Any, Any]] = []

    @tool
    def sync_ctx(ctx: RunContext[MyDeps], key: str) -> str:
        seen.append(("sync", ctx.deps, ctx.run_id, ctx.agent))
        return ctx.deps.db[key]

    @tool
    async def async_ctx(key: str, context: RunContext[MyDeps]) -> str:
        seen.append(("async", context.deps, context.run_id, context.agent))
        return f"{context.deps.user}:{key}"

    deps = MyDeps(user="ann", db={"k": "v"})
    model = ScriptedModel(
        [
            tool_calls(
                call("sync_ctx", key="k"),
                call("async_ctx", key="q"),
                call("method_with_context", key="k"),
            ),
            "done",
        ]
    )
    agent = Agent(model=model, tools=[sync_ctx, async_ctx, ContextTools()], user_id="u1")
    response = await agent.run("go", deps=deps)

    assert [m.content for m in tool_messages(model, 1)] == ["v", "ann:q", "v"]
    assert sorted(kind for kind, *_ in seen) == ["async", "sync"]
    for _, seen_deps, run_id, seen_agent in seen:
        assert seen_deps is deps
        assert run_id == response.run_id
        assert seen_agent is agent
    # every run has its own id
    second = await agent.clone(model=ScriptedModel(["x"])).run("again")
    assert second.run_id != response.run_id


# --------------------------------------------------------------------------- no strong references


async def test_tools_never_keep_their_agent_alive() -> None:
    contexts: list[RunContext[Any]] = []

    @tool
    def probe(ctx: RunContext) -> str:  # type: ignore[type-arg]
        contexts.append(ctx)
        return "agent" if ctx.agent is not None else "no agent"

    @tool
    async def aprobe(ctx: RunContext) -> str:  # type: ignore[type-arg]
        contexts.append(ctx)
        return ctx.agent.name  # type: ignore[no-any-return]

    calculator = Calculator(1)
    model = ScriptedModel([tool_calls("probe", "aprobe", call("shift", a=1)), "done"])
    agent = Agent(model=model, tools=[probe, aprobe, calculator], name="mortal")
    response = await agent.run("go")
    assert [m.content for m in tool_messages(model, 1)] == ["agent", "mortal", "2"]

    functions = list(agent.functions.values())
    function_refs = [weakref.ref(f) for f in functions]
    agent_ref = weakref.ref(agent)
    del agent
    gc.collect()

    assert agent_ref() is None
    assert all(ref() is not None for ref in function_refs)
    assert all(ctx.agent is None for ctx in contexts)
    # the tools still work after their agent is gone
    assert probe(contexts[0]) == "no agent"
    assert calculator.functions["shift"](1) == 2
    assert response.tool_calls[0].function is functions[0]
