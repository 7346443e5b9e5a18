"""A small MCP server (the official SDK's ``MCPServer``) for the MCP client's tests, run as a
process of its own: ``python tests/mcp_test_server.py [stdio | http PORT]``.

Tools: ``pid`` (which process answers), ``nap`` (sleeps, reporting progress), ``die`` (the
process exits mid-call), ``fail`` (an error result), ``grow`` (adds a tool and says so: both
protocol eras' notifications), and whatever ``grow`` added; one resource and one prompt.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer(
    "agentica-test-server", instructions="A test server: naps and dies.", log_level="WARNING"
)


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
async def nap(seconds: float, ctx: Context) -> str:
    """Sleep for ``seconds``, reporting progress twice."""
    await ctx.report_progress(0, 2, "falling asleep")
    await asyncio.sleep(seconds / 2)
    await ctx.report_progress(1, 2, "half way")
    await asyncio.sleep(seconds / 2)
    return f"slept {seconds:g} s"


@server.tool()
async def die(after: float = 0.2) -> str:
    """Exit the server process in the middle of this call."""
    await asyncio.sleep(after)
    os._exit(3)


@server.tool()
def fail(reason: str) -> str:
    """Always fails with ``reason``."""
    raise ToolError(reason)


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool ``late`` and tell the client the tool list changed."""

    def late(word: str) -> str:
        """Echo a word, from a tool added while the server runs."""
        return f"late {word}"

    server.add_tool(late, name="late")
    await ctx.session.send_tool_list_changed()  # 2025-11-25 connections
    await ctx.notify_tools_changed()  # 2026-07-28 connections (listen streams)
    return "added late"


@server.resource("note://greeting", mime_type="text/plain")
def greeting() -> str:
    """A short note."""
    return "hello from a resource"


@server.prompt()
def review(language: str) -> str:
    """Instructions for a code review."""
    return f"Review the {language} code carefully and answer in one line."


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), log_level="WARNING")
    else:
        server.run("stdio")
