"""Agent memory beyond one conversation: workspace memory and the variable space.

- ``Workspace``: an agent's long-term memory as a folder of Markdown files (``AGENTS.md``, one
  folder per user with ``USER.md``, ``MEMORY.md`` and daily notes), no database (workspace.py)
- ``WorkspaceMemory``: the ``Capability`` that puts a workspace in an agent's system prompt and
  gives it the ``save_memory`` and ``read_daily_notes`` tools (capability.py)
- ``VariableSpace``: the variable space and evidence archive, a ``Capability`` that gives the
  agent ``var_*`` tools and archives every tool output as citable evidence (variables.py)
"""

from agentica.memory.capability import WorkspaceMemory
from agentica.memory.variables import VariableSpace
from agentica.memory.workspace import Workspace, WorkspaceError, user_folder

__all__ = ["VariableSpace", "Workspace", "WorkspaceError", "WorkspaceMemory", "user_folder"]
