"""Workspace memory: an agent's long-term memory as a folder of Markdown files.

Global files (``AGENTS.md`` instructions, ``PERSONA.md``, ``TOOLS.md``) and one folder per user
(``users/{user_id}/USER.md``, ``MEMORY.md``, daily notes in ``memory/YYYY-MM-DD.md``): readable,
editable and versioned with git, no database. All file I/O runs in worker threads; users are
isolated (a user id cannot leave its folder, symbolic links pointing outside are refused).

- ``Workspace``: read the files, build the prompt within a token budget, save memories
  (workspace.py)
- ``WorkspaceMemory``: the ``Capability`` that puts a workspace in an agent's system prompt and
  gives it the ``save_memory`` and ``read_daily_notes`` tools (capability.py)

- ``VariableSpace``: the variable space and evidence archive, a ``Capability`` that gives the
  agent ``var_*`` tools and archives every tool output as citable evidence (variables.py)
"""

from agentica.memory.capability import WorkspaceMemory
from agentica.memory.variables import VariableSpace
from agentica.memory.workspace import Workspace, WorkspaceError, user_folder

__all__ = ["VariableSpace", "Workspace", "WorkspaceError", "WorkspaceMemory", "user_folder"]
