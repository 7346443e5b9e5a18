"""``open_storage``: pick a storage backend from a URL or a path (what a CLI flag or setting
holds)."""

from __future__ import annotations

import os
from pathlib import Path

from agentica.errors import StorageError
from agentica.storage.base import Storage
from agentica.storage.jsonfile import JSONFileStorage
from agentica.storage.memory import InMemoryStorage
from agentica.storage.sql import SQLiteStorage, SQLStorage

__all__ = ["open_storage"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _is_sqlite_file(path: Path) -> bool:
    try:
        with open(path, "rb") as file:
            return file.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def open_storage(url_or_path: str | os.PathLike[str] | None = None) -> Storage:
    """The storage named by ``url_or_path``; nothing is opened yet.

    - ``None``, ``"sqlite"`` or ``"default"``: the default SQLite file (``default_sqlite_path()``)
    - ``"memory"``: ``InMemoryStorage``
    - ``sqlite:///...``, ``sqlite+aiosqlite:///...``, ``postgresql://...``,
      ``postgresql+asyncpg://...``: ``SQLStorage``
    - a path ending in ``.db``, ``.sqlite`` or ``.sqlite3``, or an existing SQLite file:
      ``SQLiteStorage``
    - any other path: a directory of JSON files (``JSONFileStorage``)
    """
    if url_or_path is None:
        return SQLiteStorage()
    text = os.fspath(url_or_path)
    if text == "memory":
        return InMemoryStorage()
    if text in ("sqlite", "default"):
        return SQLiteStorage()
    if "://" in text:
        return SQLStorage(text)  # raises StorageError for other schemes
    if not text:
        raise StorageError("empty storage location: give 'memory', a URL, a .db file or a folder")
    path = Path(text).expanduser()
    if path.suffix.lower() in _SQLITE_SUFFIXES or (path.is_file() and _is_sqlite_file(path)):
        return SQLiteStorage(path)
    if path.exists() and not path.is_dir():
        raise StorageError(
            f"{path} is a file but not a SQLite database: give a .db file, a directory (JSON "
            "files) or a database URL"
        )
    return JSONFileStorage(path)
