"""MCP (the Model Context Protocol), on the official ``mcp`` SDK.

- ``MCPServer``: an MCP server's tools as a tool group of an agent (client.py):
  ``Agent(tools=[MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])])``
- ``MCPProgress``: a running MCP tool's progress, as a ``ToolProgress`` update of the run's stream
"""

from agentica.mcp.client import MCPProgress, MCPServer

__all__ = ["MCPProgress", "MCPServer"]
