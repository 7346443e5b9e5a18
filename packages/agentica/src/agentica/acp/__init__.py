"""ACP (the Agent Client Protocol): the deep agent inside editors, on the official SDK.

- ``ACPServer``: the agent side of ACP over a session's ``DeepAgent`` (server.py);
  ``serve_stdio`` runs it on this process's stdin and stdout (``agentica acp``)
- ``EditorFiles``, ``EditorCommands``: the editor's files and terminals as the agent's backends
- ``updates``: what the editor is shown of a run (tool kinds, titles, diffs, the plan, replay)
"""

from agentica.acp.editor import EditorCommands, EditorFiles
from agentica.acp.server import GUARDED_TOOLS, MODES, ACPServer, SessionSetup
from agentica.acp.stdio import serve_stdio

__all__ = [
    "GUARDED_TOOLS",
    "MODES",
    "ACPServer",
    "EditorCommands",
    "EditorFiles",
    "SessionSetup",
    "serve_stdio",
]
