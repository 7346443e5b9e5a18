"""MCP (the Model Context Protocol), on the official ``mcp`` SDK.

- ``MCPServer``: an MCP server's tools as a tool group of an agent (client.py):
  ``Agent(tools=[MCPServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."])])``
- ``MCPProgress``: a running MCP tool's progress, as a ``ToolProgress`` update of the run's stream
- ``agent_server``, ``serve_stdio``, ``serve_http``: an agent and functions offered to other MCP
  clients (server.py; ``agentica mcp serve`` on the command line)
"""

from agentica.mcp.client import MCPProgress, MCPServer
from agentica.mcp.server import AGENT_TOOL, agent_server, serve_http, serve_stdio

__all__ = ["AGENT_TOOL", "MCPProgress", "MCPServer", "agent_server", "serve_http", "serve_stdio"]
