"""``InMemoryStorage``: the storage protocol in a dict, for tests and throw-away sessions.

Values are stored serialised (JSON) exactly as the durable backends store them, so a record that
would not survive a database does not survive here either, and callers can never mutate what was
stored through a reference they kept. A save with ``expected_revision`` is compared and applied
under one lock (``SessionConflictError`` when another writer saved first).
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentica.errors import StorageError
from agentica.storage.base import (
    SessionNotFound,
    Variable,
    VariableInfo,
    check_ids,
    check_variable,
    stale_save,
)
from agentica.storage.branching import (
    SessionTree,
    Snapshot,
    branch_id_for,
    check_turn,
    encode_undo,
    state_at,
)
from agentica.storage.codec import decode_run, encode_run
from agentica.storage.records import RunRecord, SessionData, SessionInfo

__all__ = ["InMemoryStorage"]


@dataclass(slots=True)
class _Session:
    title: str
    created_at: float
    updated_at: float
    runs: list[str] = field(default_factory=list)
    undos: list[str | None] = field(default_factory=list)  # per run (branching.py)
    summary: str | None = None
    state: str = "{}"
    revision: int = 0
    variables: dict[str, tuple[str, str | None, float]] = field(default_factory=dict)
    parent_id: str | None = None
    forked_at: int | None = None
    root_id: str | None = None  # the first session of its lineage (None: itself)

    def snapshot(self) -> Snapshot:
        return {"state": json.loads(self.state), "summary": self.summary}

    def snapshot_at(self, runs: int) -> Snapshot:
        """The summary and state as they were after run ``runs``."""
        return state_at(self.snapshot(), reversed(self.undos[runs:]))


class InMemoryStorage:
    """Sessions and variables in this process's memory (lost when it exits)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._lock = asyncio.Lock()

    def _get(self, user_id: str, session_id: str) -> _Session:
        check_ids(user_id, session_id)
        session = self._sessions.get((user_id, session_id))
        if session is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return session

    def _info(self, key: tuple[str, str], session: _Session) -> SessionInfo:
        return SessionInfo(
            user_id=key[0], session_id=key[1], title=session.title, runs=len(session.runs),
            created_at=session.created_at, updated_at=session.updated_at,
            parent_id=session.parent_id, forked_at=session.forked_at,
        )  # fmt: skip

    async def load_session(self, user_id: str, session_id: str) -> SessionData | None:
        check_ids(user_id, session_id)
        session = self._sessions.get((user_id, session_id))
        if session is None:
            return None
        return SessionData(
            info=self._info((user_id, session_id), session),
            runs=[
                decode_run(text, where=f"run {seq} of session {session_id!r} of user {user_id!r}")
                for seq, text in enumerate(session.runs, 1)
            ],
            summary=session.summary,
            state=json.loads(session.state),
            revision=session.revision,
        )

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
        check_ids(user_id, session_id)
        # before any change: a record that cannot be stored changes nothing
        encoded = encode_run(run)
        encoded_state = json.dumps(dict(state)) if state is not None else None
        now = time.time()
        async with self._lock:
            session = self._sessions.get((user_id, session_id))
            if expected_revision is not None:
                found = session.revision if session is not None else None
                if found != expected_revision and not (found is None and expected_revision == 0):
                    raise stale_save(user_id, session_id, expected_revision, found)
            if session is None:
                session = _Session(title=title or run.input[:80] or session_id, created_at=now,
                                   updated_at=now)  # fmt: skip
                self._sessions[(user_id, session_id)] = session
            before = session.snapshot()
            session.runs.append(encoded)
            session.updated_at = now
            if summary is not None:
                session.summary = summary
            if encoded_state is not None:
                session.state = encoded_state
            session.undos.append(encode_undo(session.snapshot(), before))
            session.revision += 1
            return session.revision

    async def list_sessions(self, user_id: str, *, limit: int = 100) -> list[SessionInfo]:
        check_ids(user_id, "-")
        mine = [(k, s) for k, s in self._sessions.items() if k[0] == user_id]
        mine.sort(key=lambda item: item[1].updated_at, reverse=True)
        return [self._info(k, s) for k, s in mine[:limit]]

    async def rename_session(self, user_id: str, session_id: str, title: str) -> None:
        self._get(user_id, session_id).title = title

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        check_ids(user_id, session_id)
        return self._sessions.pop((user_id, session_id), None) is not None

    async def fork_session(
        self,
        user_id: str,
        session_id: str,
        new_session_id: str,
        *,
        title: str | None = None,
        at: int | None = None,
    ) -> SessionInfo:
        check_ids(user_id, new_session_id)
        async with self._lock:
            source = self._get(user_id, session_id)
            if (user_id, new_session_id) in self._sessions:
                raise StorageError(f"session {new_session_id!r} already exists for {user_id!r}")
            runs = len(source.runs) if at is None else at
            runs = check_turn(runs, len(source.runs), name="at", session_id=session_id,
                              allow_all=True)  # fmt: skip
            twin = self._branch(source, session_id, runs, title or f"{source.title} (fork)")
            twin.runs, twin.undos = twin.runs[:runs], twin.undos[:runs]
            snapshot = source.snapshot_at(runs)
            twin.state, twin.summary = json.dumps(snapshot["state"]), snapshot["summary"]
            self._sessions[(user_id, new_session_id)] = twin
        return self._info((user_id, new_session_id), twin)

    @staticmethod
    def _branch(source: _Session, source_id: str, forked_at: int, title: str) -> _Session:
        """A copy of ``source`` that names it as its parent, at revision 1 (it exists: a save
        based on "never saved", revision 0, is refused)."""
        twin = copy.deepcopy(source)
        twin.title = title
        twin.revision = 1
        twin.created_at = twin.updated_at = time.time()
        twin.parent_id, twin.forked_at = source_id, forked_at
        twin.root_id = source.root_id or source_id
        return twin

    async def rewind_session(
        self,
        user_id: str,
        session_id: str,
        to: int,
        *,
        branch_id: str | None = None,
        expected_revision: int | None = None,
    ) -> SessionInfo:
        if branch_id is not None:
            check_ids(user_id, branch_id)
        async with self._lock:
            session = self._get(user_id, session_id)
            if expected_revision is not None and session.revision != expected_revision:
                raise stale_save(user_id, session_id, expected_revision, session.revision)
            check_turn(to, len(session.runs), name="to", session_id=session_id, allow_all=False)
            if branch_id is None:
                branch_id = branch_id_for(session_id, session.revision)
                if (user_id, branch_id) in self._sessions:
                    suffix = f"-{secrets.token_hex(3)}"
                    branch_id = branch_id_for(session_id, session.revision, suffix)
            if (user_id, branch_id) in self._sessions:
                raise StorageError(f"session {branch_id!r} already exists for {user_id!r}")
            branch = self._branch(session, session_id, to,
                                  f"{session.title} (before the rewind to run {to})")  # fmt: skip
            for (user, _), other in self._sessions.items():
                forked_later = other.parent_id == session_id and (other.forked_at or 0) > to
                if user == user_id and forked_later:
                    other.parent_id = branch_id  # the runs it shares are in the branch now
            snapshot = session.snapshot_at(to)
            session.runs, session.undos = session.runs[:to], session.undos[:to]
            session.state, session.summary = json.dumps(snapshot["state"]), snapshot["summary"]
            if session.forked_at is not None:  # it shares no more than it keeps
                session.forked_at = min(session.forked_at, to)
            session.revision += 1
            session.updated_at = time.time()
            self._sessions[(user_id, branch_id)] = branch
        return self._info((user_id, branch_id), branch)

    async def branches(self, user_id: str, session_id: str) -> SessionTree:
        session = self._get(user_id, session_id)
        root = session.root_id or session_id
        return SessionTree.of(
            self._info(key, other)
            for key, other in self._sessions.items()
            if key[0] == user_id and (other.root_id or key[1]) == root
        )

    def _session_for_write(self, user_id: str, session_id: str) -> _Session:
        check_ids(user_id, session_id)
        session = self._sessions.get((user_id, session_id))
        if session is None:
            now = time.time()
            session = self._sessions[(user_id, session_id)] = _Session(
                title=session_id, created_at=now, updated_at=now
            )
        return session

    async def set_variable(
        self, user_id: str, session_id: str, key: str, value: Any, *, summary: str | None = None
    ) -> VariableInfo:
        encoded = json.dumps(value, ensure_ascii=False)
        check_variable(key, len(encoded.encode()))
        now = time.time()
        self._session_for_write(user_id, session_id).variables[key] = (encoded, summary, now)
        return VariableInfo(key=key, summary=summary, size=len(encoded.encode()), updated_at=now)

    async def get_variable(self, user_id: str, session_id: str, key: str) -> Variable | None:
        check_ids(user_id, session_id)
        session = self._sessions.get((user_id, session_id))
        entry = session.variables.get(key) if session else None
        if entry is None:
            return None
        encoded, summary, updated = entry
        info = VariableInfo(
            key=key, summary=summary, size=len(encoded.encode()), updated_at=updated
        )
        return Variable(info=info, value=json.loads(encoded))

    async def list_variables(
        self, user_id: str, session_id: str, *, prefix: str = "", limit: int = 100
    ) -> list[VariableInfo]:
        check_ids(user_id, session_id)
        session = self._sessions.get((user_id, session_id))
        if session is None:
            return []
        keys = sorted(k for k in session.variables if k.startswith(prefix))[:limit]
        return [
            VariableInfo(key=k, summary=session.variables[k][1],
                         size=len(session.variables[k][0].encode()),
                         updated_at=session.variables[k][2])
            for k in keys
        ]  # fmt: skip

    async def delete_variable(self, user_id: str, session_id: str, key: str) -> bool:
        check_ids(user_id, session_id)
        session = self._sessions.get((user_id, session_id))
        return session is not None and session.variables.pop(key, None) is not None

    async def aclose(self) -> None:
        return None
