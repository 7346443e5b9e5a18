"""The built-in file backends of the deep agent (the interface is ``agentica.tools.files``).

- ``StateBackend``, ``StoreBackend``: files in a session's state dict or in a ``Storage``
  (trees.py)
- ``FilesystemBackend``: a real directory seen as ``/`` (filesystem.py)
- ``CompositeBackend``: path prefixes routed to backends (composite.py)
- ``normalize_path``: the path rules they all share (paths.py)
"""

from agentica.deep.backends.composite import CompositeBackend
from agentica.deep.backends.filesystem import FilesystemBackend
from agentica.deep.backends.paths import normalize_path
from agentica.deep.backends.trees import StateBackend, StoreBackend
from agentica.tools.files import BackendError, FileBackend, FileInfo, GrepLine

__all__ = [
    "BackendError",
    "CompositeBackend",
    "FileBackend",
    "FileInfo",
    "FilesystemBackend",
    "GrepLine",
    "StateBackend",
    "StoreBackend",
    "normalize_path",
]
