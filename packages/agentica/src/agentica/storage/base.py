"""The storage protocol: durable sessions and variable spaces, keyed by (user, session).

Every backend (in-memory, SQLite, PostgreSQL, JSON files) implements ``Storage``. Everything is
keyed by ``(user_id, session_id)``: one user never reads another user's sessions or variables,
whatever ids they pass. A run is written atomically with the session's summary and state
(``append_run``): after a crash a session holds every completed run or none of a half-written one.

Variables hold JSON values with an optional one-line summary; backends keep a per-session index
(no scans of the whole store) and store large values once, by content hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentica.errors import StorageError
from agentica.storage.records import RunRecord, SessionData, SessionInfo

__all__ = [
    "MAX_VARIABLE_BYTES",
    "SessionNotFound",
    "Storage",
    "Variable",
    "VariableInfo",
    "check_ids",
    "check_variable",
]

MAX_VARIABLE_BYTES = 8 * 1024 * 1024
MAX_KEY_LENGTH = 256


class SessionNotFound(StorageError):
    """The (user, session) pair does not exist."""


@dataclass(slots=True, kw_only=True, frozen=True)
class VariableInfo:
    """A variable's key, summary and size (what a directory listing shows)."""

    key: str
    summary: str | None
    size: int
    updated_at: float


@dataclass(slots=True, kw_only=True, frozen=True)
class Variable:
    """A variable with its value."""

    info: VariableInfo
    value: Any


def check_ids(user_id: str, session_id: str) -> None:
    """Reject empty or oversized ids (every backend calls this first)."""
    for name, value in (("user_id", user_id), ("session_id", session_id)):
        if not isinstance(value, str) or not value or len(value) > 256 or "\x00" in value:
            raise StorageError(f"{name} must be a non-empty string of at most 256 characters")


def check_variable(key: str, encoded_size: int) -> None:
    """Reject bad keys and values over ``MAX_VARIABLE_BYTES`` with a message for the model."""
    if not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise StorageError(f"variable keys are 1-{MAX_KEY_LENGTH} characters; got {len(key)}")
    if encoded_size > MAX_VARIABLE_BYTES:
        raise StorageError(
            f"the value of {key!r} is {encoded_size} bytes as JSON; the limit is "
            f"{MAX_VARIABLE_BYTES} bytes: store a summary or split it into several variables"
        )


@runtime_checkable
class Storage(Protocol):
    """Async storage of sessions and variables. See ``agentica.storage`` for the backends."""

    async def load_session(self, user_id: str, session_id: str) -> SessionData | None:
        """The session's info, runs (oldest first), summary and state; ``None`` if it is new."""
        ...

    async def append_run(
        self,
        user_id: str,
        session_id: str,
        run: RunRecord,
        *,
        title: str | None = None,
        summary: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        """Add ``run`` to the session (created if new) with its summary and state, atomically."""
        ...

    async def list_sessions(self, user_id: str, *, limit: int = 100) -> list[SessionInfo]:
        """The user's sessions, most recently updated first."""
        ...

    async def rename_session(self, user_id: str, session_id: str, title: str) -> None:
        """Change a session's title (raises ``SessionNotFound``)."""
        ...

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        """Delete a session with its runs and variables; ``False`` if it did not exist."""
        ...

    async def fork_session(
        self, user_id: str, session_id: str, new_session_id: str, *, title: str | None = None
    ) -> SessionInfo:
        """Copy a session (runs, summary, state, variables) under a new id."""
        ...

    async def set_variable(
        self, user_id: str, session_id: str, key: str, value: Any, *, summary: str | None = None
    ) -> VariableInfo:
        """Store a JSON value under ``key`` (replacing any previous value)."""
        ...

    async def get_variable(self, user_id: str, session_id: str, key: str) -> Variable | None:
        """The variable, or ``None``."""
        ...

    async def list_variables(
        self, user_id: str, session_id: str, *, prefix: str = "", limit: int = 100
    ) -> list[VariableInfo]:
        """Variables whose key starts with ``prefix``, in key order."""
        ...

    async def delete_variable(self, user_id: str, session_id: str, key: str) -> bool:
        """Delete a variable; ``False`` if it did not exist."""
        ...

    async def aclose(self) -> None:
        """Release connections and files."""
        ...
