"""Where agentica keeps its files on this machine: the data directory.

``data_dir()`` is ``$AGENTICA_HOME``, else ``$XDG_DATA_HOME/agentica``, else
``~/.local/share/agentica``: the default SQLite file, the CLI's history and trust lists live there.
Nothing here imports the rest of agentica (the CLI reads it before the agent stack is loaded).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_dir"]


def data_dir() -> Path:
    """The folder for agentica's files (not created here)."""
    home = os.environ.get("AGENTICA_HOME")
    if home:
        return Path(home).expanduser()
    data = os.environ.get("XDG_DATA_HOME")
    base = Path(data).expanduser() if data else Path.home() / ".local" / "share"
    return base / "agentica"
