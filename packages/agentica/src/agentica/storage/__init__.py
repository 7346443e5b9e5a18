"""Storage: durable sessions and variable spaces, keyed by (user, session).

- ``Storage``: the async protocol every backend implements (base.py)
- ``RunRecord``, ``ToolCallRecord``, ``SessionInfo``, ``SessionData``: what is stored (records.py)
- ``encode_run`` / ``decode_run``: the versioned JSON format (codec.py)
- ``InMemoryStorage``: a dict, for tests and throw-away sessions (memory.py)
"""

from agentica.storage.base import (
    MAX_VARIABLE_BYTES,
    SessionNotFound,
    Storage,
    Variable,
    VariableInfo,
)
from agentica.storage.codec import RUN_FORMAT_VERSION, decode_run, dump_run, encode_run, load_run
from agentica.storage.memory import InMemoryStorage
from agentica.storage.records import RunRecord, SessionData, SessionInfo, ToolCallRecord

__all__ = [
    "MAX_VARIABLE_BYTES",
    "RUN_FORMAT_VERSION",
    "InMemoryStorage",
    "RunRecord",
    "SessionData",
    "SessionInfo",
    "SessionNotFound",
    "Storage",
    "ToolCallRecord",
    "Variable",
    "VariableInfo",
    "decode_run",
    "dump_run",
    "encode_run",
    "load_run",
]
