"""The storage protocol: durable sessions and variable spaces, keyed by (user, session).

``Storage`` is what every backend (in-memory, SQLite, PostgreSQL, JSON files) implements: atomic,
revisioned saves of a session's runs, summary and state, and a per-session variable store.
``merge_state`` is the three-way merge an agent uses when another writer saved first. Sessions
branch (``fork_session(at=...)``, ``rewind_session``, ``branches``; see ``branching.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentica.errors import SessionConflictError, StorageError
from agentica.storage.branching import SessionTree
from agentica.storage.records import RunRecord, SessionData, SessionInfo

__all__ = [
    "MAX_VARIABLE_BYTES",
    "SessionNotFound",
    "Storage",
    "Variable",
    "VariableInfo",
    "check_ids",
    "check_variable",
    "merge_state",
    "stale_save",
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


def stale_save(
    user_id: str, session_id: str, expected: int, found: int | None
) -> SessionConflictError:
    """The error for a save based on revision ``expected`` of a session now at ``found``."""
    what = (
        "was deleted by another agent or process"
        if found is None
        else f"was saved by another agent or process (it is at revision {found})"
    )
    return SessionConflictError(
        f"session {session_id!r} of user {user_id!r} {what} since this copy was loaded at "
        f"revision {expected}; nothing was written. Load the session again (a new Agent with "
        "the same user_id and session_id) and retry, or give each process its own session_id",
        user_id=user_id, session_id=session_id, expected=expected, found=found,
    )  # fmt: skip


_ABSENT: Any = object()


def merge_state(base: Any, mine: Any, theirs: Any) -> tuple[Any, list[str]]:
    """Three-way merge of JSON values: the merged value and the paths both sides changed.

    ``base`` is what both writers started from. A value only one side changed takes that side's
    change; JSON objects are merged key by key, recursively (two writers adding different files
    to ``state["files"]`` keep both); a value both sides changed differently is a conflict, listed
    as a path like ``/todos`` or ``/files/notes.md`` (the merged value then holds ``mine``).
    """
    conflicts: list[str] = []
    return _merge(base, mine, theirs, "", conflicts), conflicts


def _merge(base: Any, mine: Any, theirs: Any, path: str, conflicts: list[str]) -> Any:
    if mine == theirs or theirs == base:
        return mine
    if mine == base:
        return theirs
    if (
        isinstance(mine, dict)
        and isinstance(theirs, dict)
        and (base is _ABSENT or isinstance(base, dict))
    ):
        earlier = base if isinstance(base, dict) else {}
        merged = {}
        for key in [*theirs, *(key for key in mine if key not in theirs)]:
            value = _merge(earlier.get(key, _ABSENT), mine.get(key, _ABSENT),
                           theirs.get(key, _ABSENT), f"{path}/{key}", conflicts)  # fmt: skip
            if value is not _ABSENT:
                merged[key] = value
        return merged
    conflicts.append(path or "/")
    return mine


@runtime_checkable
class Storage(Protocol):
    """Async storage of sessions and variables. See ``agentica.storage`` for the backends.

    Everything is keyed by ``(user_id, session_id)``: one user never reads another user's
    sessions or variables, whatever ids they pass. A run is written atomically with the session's
    summary and state (``append_run``): after a crash a session holds every completed run or none
    of a half-written one.

    Several agents or processes may use one session. Every save bumps the session's ``revision``;
    a writer passes the revision it loaded (``append_run(expected_revision=...)``) and the backend
    compares and writes atomically, raising ``SessionConflictError`` if someone else saved in
    between, so state saved as a whole (files of the state backend, todo lists, the summary) is
    never overwritten silently. ``merge_state`` is the three-way merge an agent uses to combine
    its changes with the other writer's before saving again.

    Variables hold JSON values with an optional one-line summary; backends keep a per-session
    index (no scans of the whole store) and store large values once, by content hash.

    Sessions branch: ``fork_session(at=...)`` copies the first runs with the state as it was
    after them, ``rewind_session`` drops the later runs into a new branch, ``branches`` lists a
    lineage as a tree (``branching.py`` says how the state of an earlier run is kept).
    """

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
        expected_revision: int | None = None,
    ) -> int:
        """Add ``run`` to the session (created if new) with its summary and state, atomically;
        the session's new revision.

        With ``expected_revision`` (the ``revision`` of the loaded session, 0 for a new one) the
        write happens only if the stored session is still at that revision; otherwise nothing
        is written and ``SessionConflictError`` says so (also when the session was deleted).
        """
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
        self,
        user_id: str,
        session_id: str,
        new_session_id: str,
        *,
        title: str | None = None,
        at: int | None = None,
    ) -> SessionInfo:
        """Copy a session under a new id, at revision 1: it exists, so a save based on "never
        saved" (revision 0) is refused, not applied over it.

        The copy holds the first ``at`` runs (``None``: all) with the summary and state as they
        were after run ``at``, and every variable as it is now (variables are not versioned);
        its info names ``session_id`` as its parent and ``at`` as its branch point. A bad ``at``
        raises ``UsageError``.
        """
        ...

    async def rewind_session(
        self,
        user_id: str,
        session_id: str,
        to: int,
        *,
        branch_id: str | None = None,
        expected_revision: int | None = None,
    ) -> SessionInfo:
        """Drop the runs after run ``to`` (``0 <= to < runs``), keeping them in a new branch;
        the branch's info.

        In one atomic step: the whole session as it was becomes the branch ``branch_id``
        (default ``<session_id>.<revision>``; parent ``session_id``, branch point ``to``);
        the session keeps its id, its first ``to`` runs, the summary and state as they were
        after run ``to``, and its variables; its revision is bumped, so a writer holding the
        older copy gets ``SessionConflictError`` (and merges) instead of saving over it.
        Branches that were forked from it after run ``to`` now name the new branch as their
        parent (it holds the runs they share), and a session that was itself forked after run
        ``to`` now shares ``to`` runs with its parent. With ``expected_revision``, the rewind
        happens only if the session is at that revision (``SessionConflictError`` otherwise).
        """
        ...

    async def branches(self, user_id: str, session_id: str) -> SessionTree:
        """Every session of ``session_id``'s lineage (forked from one another), as a tree
        (raises ``SessionNotFound``)."""
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
