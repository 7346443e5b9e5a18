"""``Shell``: shell commands in the workspace (``capability.py``), run through a
``CommandBackend`` (``agentica.tools.commands``): the built-in ones run them on this computer
(``local.py``: processes under ``supervisor.py``, ``process.py``), in bubblewrap when asked
(``sandbox.py``). ``hints.py`` holds what the model is told about its commands, and
``header_row.py`` puts right code that read a data file's header row as data."""

from agentica.deep.shell.capability import CodeNotRun, Shell
from agentica.deep.shell.hints import COMMON_PACKAGES as COMMON_PACKAGES
from agentica.deep.shell.hints import repair_brackets as repair_brackets
from agentica.deep.shell.local import BwrapCommands, LocalCommand, LocalCommands

__all__ = ["BwrapCommands", "CodeNotRun", "LocalCommand", "LocalCommands", "Shell"]
