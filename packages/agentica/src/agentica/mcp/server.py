"""An agent and chosen functions as an MCP server (``agentica mcp serve``), on the official SDK.

```python
server = agent_server(agent=Agent(tools=[search]), tools=[add])
await serve_stdio(server)                     # or: serve_http(server, port=8765)
```

Other MCP clients (editors, other frameworks) see a ``run_agent`` tool (a task in, the answer
out, with a progress notification per model call and tool call; each call is a new
conversation of a clone of the agent) and each function under its own name and schema. The
SDK's low-level ``Server`` serves the framework's own schemas as they are; arguments are checked
by the framework (``Function.validate_arguments``) and an error is an ``isError`` result whose
text says what was wrong.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentica.agent import Agent
from agentica.errors import AgenticaError, UsageError
from agentica.messages import RunUsage, ToolCall
from agentica.run.events import ModelRequestStarted, ToolCallStarted
from agentica.tools.call import FunctionCall, render_result
from agentica.tools.context import RunContext
from agentica.tools.execution import ToolSettings, tool_thread_pool
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike, resolve_functions

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext
    from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult

__all__ = ["AGENT_TOOL", "agent_server", "serve_http", "serve_stdio"]

AGENT_TOOL = "run_agent"
_PROMPT_SCHEMA = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "description": "The task or question."}},
    "required": ["prompt"],
}


def agent_server(
    *,
    agent: Agent[Any] | None = None,
    tools: Sequence[ToolLike] = (),
    name: str = "agentica",
    agent_tool: str = AGENT_TOOL,
    tool_settings: ToolSettings | None = None,
) -> Server[Any]:
    """An MCP server offering ``agent`` as the tool ``agent_tool`` and ``tools`` as themselves
    (at least one of the two)."""
    from mcp.server import Server

    functions = dict(resolve_functions(tools))
    if agent is None and not functions:
        raise UsageError("an MCP server needs an agent or some tools to offer")
    if agent is not None and agent_tool in functions:
        raise UsageError(f"a tool is named {agent_tool!r} like the agent's: rename one of them")
    offered = _Offered(agent, agent_tool, functions, tool_settings or ToolSettings())
    return Server(
        name,
        version=_version(),
        instructions=agent.description if agent is not None else None,
        on_list_tools=offered.list_tools,
        on_call_tool=offered.call_tool,
    )


class _Offered:
    """What the server offers, and how one call of it runs."""

    def __init__(
        self,
        agent: Agent[Any] | None,
        agent_tool: str,
        functions: dict[str, Function],
        settings: ToolSettings,
    ) -> None:
        self.agent = agent
        self.agent_tool = agent_tool
        self.functions = functions
        self.settings = settings

    async def list_tools(self, ctx: ServerRequestContext, params: Any) -> ListToolsResult:
        from mcp_types import ListToolsResult
        from mcp_types import Tool as MCPTool

        tools = [
            MCPTool(name=f.name, description=f.description, input_schema=f.parameters)
            for f in self.functions.values()
        ]
        if self.agent is not None:
            about = self.agent.description or "Give the agent a task; it works on it with its "
            about += " tools and answers when done. Each call is a new conversation."
            tools.insert(
                0, MCPTool(name=self.agent_tool, description=about, input_schema=_PROMPT_SCHEMA)
            )
        return ListToolsResult(tools=tools, next_cursor=None)

    async def call_tool(
        self, ctx: ServerRequestContext, params: CallToolRequestParams
    ) -> CallToolResult:
        arguments = dict(params.arguments or {})
        if self.agent is not None and params.name == self.agent_tool:
            return await self._run_agent(ctx, self.agent, arguments)
        function = self.functions.get(params.name)
        if function is None:
            known = ", ".join([self.agent_tool] * (self.agent is not None) + list(self.functions))
            return _result(f"Unknown tool {params.name!r}; this server offers: {known}", True)
        wire = ToolCall(id=uuid.uuid4().hex, name=function.name, arguments=json.dumps(arguments))
        call = FunctionCall(wire, function)
        run = RunContext(run_id=uuid.uuid4().hex, deps=None, usage=RunUsage())
        await call.execute(
            run,
            executor=tool_thread_pool(self.settings.thread_pool_size),
            default_timeout=self.settings.timeout,
        )
        if call.status == "error":
            return _result(call.error or "the tool failed", True)
        return _result(render_result(call.result), False)

    async def _run_agent(
        self, ctx: ServerRequestContext, agent: Agent[Any], arguments: dict[str, Any]
    ) -> CallToolResult:
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return _result(f"{self.agent_tool} needs a non-empty 'prompt' (a string)", True)
        steps = 0
        try:
            async with agent.clone().run_stream(prompt) as stream:
                async for event in stream:
                    note = _progress_note(event)
                    if note is not None:
                        steps += 1
                        await ctx.session.report_progress(steps, None, note)
            response = stream.response
        except AgenticaError as exc:
            return _result(f"{type(exc).__name__}: {exc}", True)
        if response.stop_reason == "paused":
            waiting = ", ".join(p.tool for p in response.pending)
            why = f"the agent paused for a person's approval of {waiting}, which cannot be "
            return _result(why + "given over MCP; serve an agent without approval", True)
        content = response.content
        return _result(content if isinstance(content, str) else render_result(content), False)


def _progress_note(event: object) -> str | None:
    if isinstance(event, ModelRequestStarted):
        return f"model call {event.turn}"
    if isinstance(event, ToolCallStarted):
        return f"calling {event.call.name}"
    return None


def _result(text: str, error: bool) -> CallToolResult:
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=text)], is_error=error)


def _version() -> str:
    from agentica import __version__

    return __version__


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin and stdout until stdin closes (the SDK points fd 1 at
    stderr meanwhile, so stray prints cannot corrupt the protocol)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(
    server: Server[Any], *, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp"
) -> None:
    """Serve over streamable HTTP at ``http://host:port/path`` until cancelled."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
