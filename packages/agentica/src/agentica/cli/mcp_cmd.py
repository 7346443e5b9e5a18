"""``agentica mcp``: offer an agent to other MCP clients, or look at an MCP server's tools.

```
agentica mcp serve [--http --port 8765] [--tool module:function ...] [--workspace DIR]
agentica mcp list "npx -y @modelcontextprotocol/server-filesystem ."   (or a URL)
```
``server_from_spec`` turns a command line or a URL into an ``MCPServer`` (``agentica run --mcp``).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from typing import Any

from agentica.errors import AgenticaError, UsageError
from agentica.mcp import MCPServer

__all__ = ["add_parser", "run", "server_from_spec"]


def server_from_spec(spec: str) -> MCPServer:
    """An ``MCPServer`` from ``--mcp``: a URL (streamable HTTP; ``.../sse`` for legacy SSE) or a
    command line to start (``npx -y @modelcontextprotocol/server-filesystem DIR``)."""
    spec = spec.strip()
    if spec.startswith(("http://", "https://")):
        return MCPServer.sse(spec) if spec.rstrip("/").endswith("/sse") else MCPServer.http(spec)
    try:
        argv = shlex.split(spec)
    except ValueError as exc:
        raise UsageError(f"--mcp {spec!r} is not a command line: {exc}") from None
    if not argv:
        raise UsageError("--mcp needs a command (e.g. 'npx -y @modelcontextprotocol/server-...')")
    return MCPServer.stdio(argv[0], argv[1:])


def add_parser(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="offer an agent over MCP, or list an MCP server's tools")
    sub = mcp.add_subparsers(dest="mcp_command", required=True)
    serve = sub.add_parser("serve", help="serve an agent (and functions) to MCP clients")
    serve.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--path", default="/mcp", help="the HTTP endpoint's path")
    serve.add_argument("--model", help="model string, e.g. deepseek:deepseek-chat or local")
    serve.add_argument("--base-url", help="OpenAI-compatible API root for --model")
    serve.add_argument("--api-key", help="API key (default: the provider's variable)")
    serve.add_argument("--instructions", help="the agent's system prompt")
    serve.add_argument("--name", default="agentica", help="the server's name")
    serve.add_argument("--tool", action="append", default=[], metavar="MODULE:FUNCTION",
                       help="a function to offer (and to give the agent); repeatable")  # fmt: skip
    serve.add_argument("--workspace", help="serve a DeepAgent working in this folder")
    serve.add_argument("--no-agent", action="store_true", help="offer the functions only")
    listing = sub.add_parser("list", help="connect to an MCP server and list its tools")
    listing.add_argument("server", help="a command line to start it, or its URL")


def run(args: argparse.Namespace) -> int:
    try:
        if args.mcp_command == "list":
            return asyncio.run(_list(args.server))
        return asyncio.run(_serve(args))
    except AgenticaError as exc:
        print(f"agentica mcp: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


async def _list(spec: str) -> int:
    async with server_from_spec(spec) as server:
        for name, function in server.functions.items():
            about = " ".join(function.description.split())
            print(f"{name}: {about[:100]}" if about else name)
    return 0


async def _serve(args: argparse.Namespace) -> int:
    import os

    from agentica.agent import Agent
    from agentica.cli.main import build_model, load_tool
    from agentica.mcp import agent_server, serve_http, serve_stdio

    sys.path.insert(0, os.getcwd())
    tools = [load_tool(spec) for spec in args.tool]
    agent: Agent[Any] | None = None
    if not args.no_agent:
        model = build_model(args.model, args.base_url, args.api_key)
        if args.workspace:
            from agentica.deep import DeepAgent

            agent = DeepAgent(model=model, workspace=args.workspace, tools=tools,
                              instructions=args.instructions)  # fmt: skip
        else:
            agent = Agent(model=model, tools=tools, instructions=args.instructions)
    server = agent_server(agent=agent, tools=tools, name=args.name)
    try:
        if args.http:
            print(f"MCP server {args.name!r} on http://{args.host}:{args.port}{args.path}",
                  file=sys.stderr)  # fmt: skip
            await serve_http(server, host=args.host, port=args.port, path=args.path)
        else:
            await serve_stdio(server)
    finally:
        if agent is not None:
            await agent.model.aclose()
    return 0
