"""Tool groups whose functions come from elsewhere (the seam MCP servers use): ``prepare`` is
awaited when a run starts, a changed ``revision`` is seen from the next turn on, a group with a
``namespace`` gives way on a name collision, and ``Function.from_schema`` offers a schema as
given and checks the model's arguments against it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentica import Agent, Function, RunContext, Tool, tool
from agentica.errors import UsageError
from agentica.testing import ScriptedModel, call, tool_calls

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "depth": {"type": "integer", "minimum": 0}},
    "required": ["path"],
}


class Remote(Tool):
    """A group listing its functions from a 'server' when a run starts."""

    def __init__(self, name: str, names: list[str], *, namespace: str | None = None) -> None:
        super().__init__(name)
        self.namespace = namespace
        self.names = names
        self.prepared = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def prepare(self) -> None:
        await asyncio.sleep(0)
        self.prepared += 1
        self.relist(self.names)

    def relist(self, names: list[str]) -> None:
        self.functions = {n: Function.from_schema(n, SCHEMA, self._caller(n)) for n in names}
        self.revision += 1

    def _caller(self, name: str) -> Any:
        async def run(arguments: dict[str, Any], ctx: RunContext[Any]) -> str:
            assert isinstance(ctx, RunContext)
            self.calls.append((name, arguments))
            return f"{self.name}:{name}({arguments['path']})"

        return run


async def test_a_run_prepares_its_groups_and_offers_their_functions() -> None:
    remote = Remote("srv", ["read"])
    model = ScriptedModel([tool_calls(call("read", path="/a")), "done", "done again"])
    agent = Agent(model=model, tools=[remote])
    result = await agent.run("go")
    assert result.content == "done" and remote.prepared == 1
    assert remote.calls == [("read", {"path": "/a"})]
    assert [t.name for t in model.requests[0].tools] == ["read"]
    assert model.requests[0].tools[0].parameters == SCHEMA  # the schema as the server gave it
    await agent.run("again")  # every run prepares (a group connects once and lists again)
    assert remote.prepared == 2


async def test_a_changed_tool_list_is_offered_from_the_next_turn() -> None:
    remote = Remote("srv", ["read"])

    @tool
    def change() -> str:
        """Change the server's tools."""
        remote.relist(["read", "write"])
        return "changed"

    model = ScriptedModel([tool_calls(call("change")), tool_calls(call("write", path="/b")), "ok"])
    agent = Agent(model=model, tools=[change, remote])
    assert (await agent.run("go")).content == "ok"
    offered = [[t.name for t in r.tools] for r in model.requests]
    assert offered == [["change", "read"], ["change", "read", "write"], ["change", "read", "write"]]
    assert remote.calls == [("write", {"path": "/b"})]


async def test_arguments_are_checked_against_the_schema_before_the_tool_runs() -> None:
    remote = Remote("srv", ["read"])
    model = ScriptedModel(
        [tool_calls(call("read", depth=-1)), tool_calls(call("read", path="/c", depth=2)), "ok"]
    )
    agent = Agent(model=model, tools=[remote])
    await agent.run("go")
    refused = model.requests[1].messages[-1].content
    assert "Invalid arguments for tool 'read'" in refused
    assert "'path' is a required property" in refused and "depth" in refused
    assert remote.calls == [("read", {"path": "/c", "depth": 2})]


async def test_a_namespaced_group_gives_way_on_a_name_collision() -> None:
    @tool
    def read(path: str) -> str:
        """A built-in read."""
        return "builtin"

    first, second = Remote("fs", ["read"], namespace="fs"), Remote("web", ["read"], namespace="web")
    agent = Agent(model=ScriptedModel([]), tools=[second, read, first])
    names = list(await agent.prepare_tools())
    assert names == ["read", "web_read", "fs_read"]  # the built-in keeps its name

    plain = Remote("plain", ["read"])
    with pytest.raises(UsageError, match="two tools are named 'read'"):
        await Agent(model=ScriptedModel([]), tools=[read, plain]).prepare_tools()


async def test_a_group_that_cannot_prepare_fails_the_run_with_its_error() -> None:
    class Broken(Tool):
        async def prepare(self) -> None:
            raise UsageError("the server did not start: no such command 'nope'")

    agent = Agent(model=ScriptedModel(["never"]), tools=[Broken(), Remote("ok", ["read"])])
    with pytest.raises(UsageError, match="no such command 'nope'"):
        await agent.run("go")


def test_from_schema_needs_an_object_schema() -> None:
    async def run(arguments: dict[str, Any], ctx: RunContext[Any]) -> str:
        return ""

    with pytest.raises(UsageError, match="JSON schema of an object"):
        Function.from_schema("bad", {"type": "string"}, run)
    unreadable = Function.from_schema("lax", {"type": "object", "properties": 5}, run)
    assert unreadable.validate_arguments('{"x": 1}') == {"x": 1}  # the server checks


def test_a_schema_with_a_reference_it_cannot_resolve_checks_nothing() -> None:
    async def run(arguments: dict[str, Any], ctx: RunContext[Any]) -> str:
        return ""

    odd = {"type": "object", "properties": {"x": {"$ref": "#/definitions/missing"}}}
    function = Function.from_schema("odd", odd, run)
    assert function.validate_arguments('{"x": 1}') == {"x": 1}  # the server checks


async def test_a_namespaced_name_stays_within_64_characters() -> None:
    long = "t" * 60
    first, second = Remote("a", [long]), Remote("b", [long], namespace="server_with_a_long_name")
    names = list(await Agent(model=ScriptedModel([]), tools=[first, second]).prepare_tools())
    assert names == [long, ("server_with_a_long_name_" + long)[:64]]
