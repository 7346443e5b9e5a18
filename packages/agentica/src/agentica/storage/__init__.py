"""Storage: durable sessions and variable spaces, keyed by (user, session).

- ``Storage``: the async protocol every backend implements; ``merge_state`` (base.py)
- ``RunRecord`` (its ``ToolCallRecord``s, ``HandoffRecord``s, ``SpanRecord`` timeline),
  ``SessionInfo``, ``SessionData``: what is stored (records.py), as versioned JSON (``encode_run``
  / ``decode_run``, codec.py); ``SessionTree``, ``Branch``: a session's branches (branching.py)
- backends: ``InMemoryStorage`` (memory.py), ``SQLStorage`` / ``SQLiteStorage`` (sql.py, schema
  managed by alembic), ``JSONFileStorage`` (jsonfile.py, for debugging)
- ``open_storage``: a backend from ``"memory"``, a URL, a ``.db`` path or a directory (factory.py)

SQLAlchemy and alembic are imported on a storage's first use, in a worker thread: importing this
package stays cheap.
"""

from agentica.storage.base import (
    MAX_VARIABLE_BYTES,
    SessionNotFound,
    Storage,
    Variable,
    VariableInfo,
)
from agentica.storage.branching import Branch, SessionTree
from agentica.storage.codec import RUN_FORMAT_VERSION, decode_run, dump_run, encode_run, load_run
from agentica.storage.factory import open_storage
from agentica.storage.jsonfile import JSONFileStorage
from agentica.storage.memory import InMemoryStorage
from agentica.storage.records import (
    HandoffRecord,
    RunRecord,
    SessionData,
    SessionInfo,
    SpanRecord,
    ToolCallRecord,
)
from agentica.storage.sql import SQLiteStorage, SQLStorage, default_sqlite_path

__all__ = [
    "MAX_VARIABLE_BYTES",
    "RUN_FORMAT_VERSION",
    "Branch",
    "HandoffRecord",
    "InMemoryStorage",
    "JSONFileStorage",
    "RunRecord",
    "SQLStorage",
    "SQLiteStorage",
    "SessionData",
    "SessionInfo",
    "SessionNotFound",
    "SessionTree",
    "SpanRecord",
    "Storage",
    "ToolCallRecord",
    "Variable",
    "VariableInfo",
    "decode_run",
    "default_sqlite_path",
    "dump_run",
    "encode_run",
    "load_run",
    "open_storage",
]
