"""``JSONFileStorage``: sessions and variables as JSON files in a directory, for debugging.

One folder per (user, session) with ``session.json``, one file per run and per variable, values
stored once by hash; every file is written atomically and a crash leaves a session as it was.
``file_name`` makes any id or key a safe file name.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import shutil
import string
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from agentica.errors import SessionFormatError, StorageError
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
    state_at,
    undo_patch,
)
from agentica.storage.codec import decode_run, dump_run
from agentica.storage.records import RunRecord, SessionData, SessionInfo

if sys.platform != "win32":
    import fcntl

__all__ = ["JSONFileStorage", "file_name"]

_FILE_VERSION = 1
_SAFE = frozenset(string.ascii_letters + string.digits + "_-")
_MAX_NAME = 120


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def file_name(text: str) -> str:
    """A file name for an id or key: letters, digits, ``_`` and ``-`` kept, the rest ``%XX``.

    Names longer than 120 characters become a readable prefix, ``~`` and a SHA-256 digest (``~``
    is always escaped, so such a name never equals an encoded one).
    """
    encoded = "".join(char if char in _SAFE else _escape(char) for char in text)
    if len(encoded) <= _MAX_NAME:
        return encoded
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"{encoded[:60]}~{digest}"


def _decoded_name(name: str) -> str | None:
    """The text ``file_name`` encoded, or ``None`` for a digest name (read the file instead)."""
    return None if "~" in name else unquote(name, errors="surrogatepass")


def _run_file(seq: int) -> str:
    return f"{seq:08d}.json"


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves the old file or the new one."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _make_directories(path: Path, root: Path) -> None:
    """``mkdir -p`` that also makes each new directory's entry durable."""
    root.mkdir(parents=True, exist_ok=True)
    missing = [p for p in (path, *path.parents) if root in p.parents]
    for directory in reversed([p for p in missing if not p.exists()]):
        directory.mkdir(exist_ok=True)
        _fsync_directory(directory.parent)


def _link_or_copy(source: Path, target: Path) -> None:
    """Hard-link ``source`` (stored once); copy where the file system has no hard links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_bytes())
    except ValueError as exc:
        raise SessionFormatError(
            f"{what} ({path}) is not valid JSON (truncated or corrupted): {exc}"
        ) from None


def _check_envelope(data: Any, kind: str, where: str) -> dict[str, Any]:
    """``data`` if it is an agentica ``kind`` file of a version this code reads."""
    if not isinstance(data, dict) or data.get("format") != f"agentica.{kind}":
        raise SessionFormatError(f"{where} is not an agentica {kind} file: it is damaged")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise SessionFormatError(f"{where} has no valid format version ({version!r})")
    if version > _FILE_VERSION:
        raise SessionFormatError(
            f"{where} was written by a newer agentica ({kind} format v{version}; this version "
            f"reads up to v{_FILE_VERSION}): upgrade agentica to load it"
        )
    return data


@dataclass(slots=True, kw_only=True)
class _SessionFile:
    """The contents of ``session.json``."""

    user_id: str
    session_id: str
    title: str
    created_at: float
    updated_at: float
    runs: int
    summary: str | None
    state: dict[str, Any]
    revision: int = 0
    parent_id: str | None = None
    forked_at: int | None = None
    root_id: str | None = None  # the first session of its lineage (None: itself)

    def dump(self) -> str:
        data = {"format": "agentica.session", "version": _FILE_VERSION, "user_id": self.user_id,
                "session_id": self.session_id, "title": self.title, "created_at": self.created_at,
                "updated_at": self.updated_at, "runs": self.runs, "revision": self.revision,
                "parent_id": self.parent_id, "forked_at": self.forked_at,
                "root_id": self.root_id, "summary": self.summary, "state": self.state}  # fmt: skip
        return json.dumps(data, ensure_ascii=False, indent=1)

    def snapshot(self) -> Snapshot:
        return {"state": self.state, "summary": self.summary}

    @classmethod
    def parse(cls, data: Any, where: str) -> _SessionFile:
        fields = _check_envelope(data, "session", where)
        try:
            parsed = cls(
                user_id=fields["user_id"], session_id=fields["session_id"], title=fields["title"],
                created_at=float(fields["created_at"]), updated_at=float(fields["updated_at"]),
                runs=int(fields["runs"]), summary=fields.get("summary"),
                state=fields.get("state") or {}, revision=int(fields.get("revision", 0)),
                parent_id=_optional(fields.get("parent_id"), str),
                forked_at=_optional(fields.get("forked_at"), int),
                root_id=_optional(fields.get("root_id"), str),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionFormatError(f"{where} is damaged: {type(exc).__name__}: {exc}") from None
        if not isinstance(parsed.state, dict) or parsed.runs < 0 or parsed.revision < 0:
            raise SessionFormatError(f"{where} is damaged: bad state or run count")
        return parsed

    def info(self) -> SessionInfo:
        return SessionInfo(
            user_id=self.user_id, session_id=self.session_id, title=self.title, runs=self.runs,
            created_at=self.created_at, updated_at=self.updated_at, parent_id=self.parent_id,
            forked_at=self.forked_at,
        )  # fmt: skip


def _optional(value: Any, kind: type[Any]) -> Any:
    """``value`` as ``kind``, or ``None`` (fields added in later versions of the file)."""
    if value is None:
        return None
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"expected an integer, got {value!r}")
    if kind is str and not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


@dataclass(slots=True, kw_only=True)
class _VariableFile:
    """The contents of ``variables/<key>.json`` (the value is in ``values/<hash>.json``)."""

    key: str
    summary: str | None
    size: int
    updated_at: float
    hash: str

    def dump(self) -> str:
        data = {"format": "agentica.variable", "version": _FILE_VERSION, "key": self.key,
                "summary": self.summary, "size": self.size, "updated_at": self.updated_at,
                "hash": self.hash}  # fmt: skip
        return json.dumps(data, ensure_ascii=False, indent=1)

    @classmethod
    def read(cls, path: Path, where: str) -> _VariableFile:
        fields = _check_envelope(_read_json(path, where), "variable", where)
        try:
            return cls(
                key=fields["key"], summary=fields.get("summary"), size=int(fields["size"]),
                updated_at=float(fields["updated_at"]), hash=str(fields["hash"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionFormatError(f"{where} is damaged: {type(exc).__name__}: {exc}") from None

    def info(self) -> VariableInfo:
        return VariableInfo(
            key=self.key, summary=self.summary, size=self.size, updated_at=self.updated_at
        )


class JSONFileStorage:
    """Sessions and variables as JSON files under ``directory`` (created on first write).

    Layout, every name percent-encoded by ``file_name`` (no id can name ``..`` or contain ``/``)::

        <directory>/.lock                                  held (flock) by the process writing
        <directory>/<user>/<session>/session.json          ids, title, times, run count, revision,
                                                           parent, branch point, summary, state
                                     runs/00000001.json    one run record (the codec's envelope)
                                                           and its undo patch (``branching.py``)
                                     variables/<key>.json  key, summary, size, time, value hash
                                     values/<sha256>.json  a value, shared by keys with equal values

    Every file is written atomically (temporary file, fsync, ``os.replace``, fsync of the
    directory). ``session.json`` is written last and its run count is what a load reads, so a
    crash in the middle of ``append_run`` leaves the session as it was. A fork hard-links the
    runs and values (stored once). All file I/O runs in worker threads, never on the event loop.
    Writes are serialised by a lock of the storage object and, between processes, by ``flock``
    on ``<directory>/.lock`` (on Windows: one process at a time should write to a directory).
    ``append_run`` with ``expected_revision`` compares the revision in ``session.json`` under
    that lock and raises ``SessionConflictError`` if another writer saved first.

    ``rewind_session`` builds the branch (links to every run) aside and renames it into place
    before it rewrites the session's ``session.json``: a crash in between leaves an extra
    branch, never a lost run (the branches it re-links may then still name the session as their
    parent). ``branches`` reads every ``session.json`` of the user: this backend keeps no index.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).expanduser().absolute()
        self._write_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"JSONFileStorage({str(self.directory)!r})"

    @contextmanager
    def _locked(self, *, create: bool = True) -> Iterator[None]:
        """Hold this object's lock and, between processes, ``flock`` on ``<directory>/.lock``
        (``create=False``: a directory that does not exist yet is not created; nothing to lock)."""
        with self._write_lock:
            if sys.platform == "win32":
                yield
                return
            if create:
                self.directory.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                if create:
                    raise
                yield
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the lock

    def _session_dir(self, user_id: str, session_id: str) -> Path:
        return self.directory / file_name(user_id) / file_name(session_id)

    @staticmethod
    def _where(user_id: str, session_id: str) -> str:
        return f"session {session_id!r} of user {user_id!r}"

    def _read_session(self, directory: Path, where: str) -> _SessionFile | None:
        path = directory / "session.json"
        try:
            data = _read_json(path, f"the metadata of {where}")
        except FileNotFoundError:
            return None
        return _SessionFile.parse(data, f"the metadata of {where} ({path})")

    def _require_session(self, user_id: str, session_id: str) -> _SessionFile:
        session = self._read_session(
            self._session_dir(user_id, session_id), self._where(user_id, session_id)
        )
        if session is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return session

    def _write_session(self, session: _SessionFile) -> None:
        directory = self._session_dir(session.user_id, session.session_id)
        _make_directories(directory / "runs", self.directory)
        _write_atomic(directory / "session.json", session.dump())

    def _new_session(self, user_id: str, session_id: str, title: str, now: float) -> _SessionFile:
        return _SessionFile(
            user_id=user_id, session_id=session_id, title=title, created_at=now, updated_at=now,
            runs=0, summary=None, state={},
        )  # fmt: skip

    # -- sessions -------------------------------------------------------------------------------

    async def load_session(self, user_id: str, session_id: str) -> SessionData | None:
        check_ids(user_id, session_id)
        return await asyncio.to_thread(self._load, user_id, session_id)

    def _load(self, user_id: str, session_id: str) -> SessionData | None:
        directory = self._session_dir(user_id, session_id)
        where = self._where(user_id, session_id)
        session = self._read_session(directory, where)
        if session is None:
            return None
        runs = []
        for seq in range(1, session.runs + 1):
            path = directory / "runs" / _run_file(seq)
            try:
                text = path.read_bytes()
            except FileNotFoundError:
                raise SessionFormatError(
                    f"{where} is damaged: run {seq} of {session.runs} is missing ({path})"
                ) from None
            runs.append(decode_run(text, where=f"run {seq} of {where} ({path})"))
        return SessionData(
            info=session.info(), runs=runs, summary=session.summary, state=session.state,
            revision=session.revision,
        )  # fmt: skip

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
        record = dump_run(run)
        state_copy = json.loads(json.dumps(dict(state))) if state is not None else None
        new_title = title or run.input[:80] or session_id
        return await asyncio.to_thread(
            self._append, user_id, session_id, record, new_title, summary, state_copy,
            expected_revision,
        )  # fmt: skip

    def _append(
        self,
        user_id: str,
        session_id: str,
        record: dict[str, Any],
        title: str,
        summary: str | None,
        state: dict[str, Any] | None,
        expected: int | None,
    ) -> int:
        now = time.time()
        directory = self._session_dir(user_id, session_id)
        with self._locked():
            session = self._read_session(directory, self._where(user_id, session_id))
            if expected is not None:
                found = session.revision if session is not None else None
                if found != expected and not (found is None and expected == 0):
                    raise stale_save(user_id, session_id, expected, found)
            if session is None:
                session = self._new_session(user_id, session_id, title, now)
                _make_directories(directory / "runs", self.directory)
            before = session.snapshot()  # its values are replaced below, not changed
            if summary is not None:
                session.summary = summary
            if state is not None:
                session.state = state
            undo = undo_patch(session.snapshot(), before)
            text = json.dumps({**record, "undo": undo}, ensure_ascii=False, indent=1)
            _write_atomic(directory / "runs" / _run_file(session.runs + 1), text)
            session.runs += 1
            session.updated_at = now
            session.revision += 1
            _write_atomic(directory / "session.json", session.dump())
            return session.revision

    async def list_sessions(self, user_id: str, *, limit: int = 100) -> list[SessionInfo]:
        check_ids(user_id, "-")
        return await asyncio.to_thread(self._list_sessions, user_id, limit)

    def _list_sessions(self, user_id: str, limit: int) -> list[SessionInfo]:
        found = [session.info() for session in self._user_sessions(user_id)]
        found.sort(key=lambda info: (-info.updated_at, info.session_id))
        return found[: max(limit, 0)]

    async def rename_session(self, user_id: str, session_id: str, title: str) -> None:
        check_ids(user_id, session_id)
        await asyncio.to_thread(self._rename, user_id, session_id, title)

    def _rename(self, user_id: str, session_id: str, title: str) -> None:
        with self._locked(create=False):
            session = self._require_session(user_id, session_id)
            session.title = title
            self._write_session(session)

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        check_ids(user_id, session_id)
        return await asyncio.to_thread(self._delete_session, user_id, session_id)

    def _delete_session(self, user_id: str, session_id: str) -> bool:
        directory = self._session_dir(user_id, session_id)
        with self._locked(create=False):
            if not directory.is_dir():
                return False
            existed = (directory / "session.json").exists()
            # one atomic rename makes it disappear; the tree is removed afterwards
            doomed = directory.with_name(f".deleted-{secrets.token_hex(6)}")
            os.rename(directory, doomed)
            _fsync_directory(directory.parent)
            shutil.rmtree(doomed, ignore_errors=True)
            return existed

    async def fork_session(
        self,
        user_id: str,
        session_id: str,
        new_session_id: str,
        *,
        title: str | None = None,
        at: int | None = None,
    ) -> SessionInfo:
        check_ids(user_id, session_id)
        check_ids(user_id, new_session_id)
        return await asyncio.to_thread(self._fork, user_id, session_id, new_session_id, title, at)

    def _fork(
        self, user_id: str, session_id: str, new_id: str, title: str | None, at: int | None
    ) -> SessionInfo:
        with self._locked(create=False):
            source = self._require_session(user_id, session_id)
            runs = source.runs if at is None else at
            check_turn(runs, source.runs, name="at", session_id=session_id, allow_all=True)
            self._check_free(user_id, new_id)
            snapshot = self._snapshot_at(user_id, source, runs)
            twin = self._branch(source, new_id, runs, title or f"{source.title} (fork)")
            twin.runs, twin.state, twin.summary = runs, snapshot["state"], snapshot["summary"]
            self._copy_session(source, twin)
            return twin.info()

    def _check_free(self, user_id: str, new_id: str) -> None:
        if (self._session_dir(user_id, new_id) / "session.json").exists():
            raise StorageError(f"session {new_id!r} already exists for {user_id!r}")

    @staticmethod
    def _branch(source: _SessionFile, new_id: str, forked_at: int, title: str) -> _SessionFile:
        """The metadata of a copy of ``source`` that names it as its parent, at revision 1 (it
        exists: a save based on "never saved", revision 0, is refused)."""
        now = time.time()
        return replace(
            source, session_id=new_id, title=title, created_at=now, updated_at=now, revision=1,
            parent_id=source.session_id, forked_at=forked_at,
            root_id=source.root_id or source.session_id,
        )  # fmt: skip

    def _copy_session(self, source: _SessionFile, twin: _SessionFile) -> None:
        """Create ``twin`` with the first ``twin.runs`` runs and every variable of ``source``
        (hard links: stored once), all at once (built aside, then renamed into place)."""
        source_dir = self._session_dir(source.user_id, source.session_id)
        target_dir = self._session_dir(twin.user_id, twin.session_id)
        shutil.rmtree(target_dir, ignore_errors=True)  # a leftover of an interrupted write
        building = target_dir.with_name(f".fork-{secrets.token_hex(6)}")
        (building / "runs").mkdir(parents=True)
        for seq in range(1, twin.runs + 1):
            name = _run_file(seq)
            _link_or_copy(source_dir / "runs" / name, building / "runs" / name)
        for sub in ("variables", "values"):
            if (source_dir / sub).is_dir():
                (building / sub).mkdir()
                for name in os.listdir(source_dir / sub):
                    if not name.startswith("."):
                        _link_or_copy(source_dir / sub / name, building / sub / name)
        _write_atomic(building / "session.json", twin.dump())
        os.rename(building, target_dir)
        _fsync_directory(target_dir.parent)

    def _snapshot_at(self, user_id: str, session: _SessionFile, runs: int) -> Snapshot:
        """The summary and state of ``session`` as they were after run ``runs``."""
        directory = self._session_dir(user_id, session.session_id) / "runs"
        undos = []
        for seq in range(session.runs, runs, -1):
            path = directory / _run_file(seq)
            try:
                data = _read_json(path, f"run {seq} of {self._where(user_id, session.session_id)}")
            except FileNotFoundError:
                data = None
            undos.append(data.get("undo") if isinstance(data, dict) else None)
        return state_at(session.snapshot(), undos)

    async def rewind_session(
        self,
        user_id: str,
        session_id: str,
        to: int,
        *,
        branch_id: str | None = None,
        expected_revision: int | None = None,
    ) -> SessionInfo:
        check_ids(user_id, session_id)
        if branch_id is not None:
            check_ids(user_id, branch_id)
        return await asyncio.to_thread(
            self._rewind, user_id, session_id, to, branch_id, expected_revision
        )

    def _rewind(
        self, user_id: str, session_id: str, to: int, branch_id: str | None, expected: int | None
    ) -> SessionInfo:
        """Build the branch (a full copy) aside and rename it into place, then rewrite the
        session's ``session.json``: a crash in between leaves an extra branch, never a lost run;
        then the branches forked after ``to`` are re-linked, and the dropped run files removed."""
        directory = self._session_dir(user_id, session_id)
        with self._locked(create=False):
            session = self._require_session(user_id, session_id)
            if expected is not None and session.revision != expected:
                raise stale_save(user_id, session_id, expected, session.revision)
            check_turn(to, session.runs, name="to", session_id=session_id, allow_all=False)
            if branch_id is None:
                branch_id = branch_id_for(session_id, session.revision)
                if (self._session_dir(user_id, branch_id) / "session.json").exists():
                    suffix = f"-{secrets.token_hex(3)}"
                    branch_id = branch_id_for(session_id, session.revision, suffix)
            self._check_free(user_id, branch_id)
            title = f"{session.title} (before the rewind to run {to})"
            branch = self._branch(session, branch_id, to, title)
            self._copy_session(session, branch)
            snapshot = self._snapshot_at(user_id, session, to)
            dropped = session.runs
            session.runs, session.state = to, snapshot["state"]
            session.summary = snapshot["summary"]
            if session.forked_at is not None:  # it shares no more than it keeps
                session.forked_at = min(session.forked_at, to)
            session.revision += 1
            session.updated_at = time.time()
            _write_atomic(directory / "session.json", session.dump())
            for child in self._user_sessions(user_id):
                if child.parent_id == session_id and (child.forked_at or 0) > to:
                    child.parent_id = branch_id  # the runs it shares are in the branch now
                    self._write_session(child)
            for seq in range(to + 1, dropped + 1):
                (directory / "runs" / _run_file(seq)).unlink(missing_ok=True)
            return branch.info()

    def _user_sessions(self, user_id: str) -> list[_SessionFile]:
        """Every session of the user (reads each ``session.json``: this backend keeps no
        index of lineages)."""
        user_dir = self.directory / file_name(user_id)
        try:
            names = [name for name in os.listdir(user_dir) if not name.startswith(".")]
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            where = f"session directory {name!r} of user {user_id!r}"
            session = self._read_session(user_dir / name, where)
            if session is not None and session.user_id == user_id:
                found.append(session)
        return found

    async def branches(self, user_id: str, session_id: str) -> SessionTree:
        check_ids(user_id, session_id)
        return await asyncio.to_thread(self._branches, user_id, session_id)

    def _branches(self, user_id: str, session_id: str) -> SessionTree:
        root = self._require_session(user_id, session_id)
        lineage = root.root_id or session_id
        return SessionTree.of(
            other.info()
            for other in self._user_sessions(user_id)
            if (other.root_id or other.session_id) == lineage
        )

    # -- variables ------------------------------------------------------------------------------

    async def set_variable(
        self, user_id: str, session_id: str, key: str, value: Any, *, summary: str | None = None
    ) -> VariableInfo:
        check_ids(user_id, session_id)
        encoded = json.dumps(value, ensure_ascii=False)
        size = len(encoded.encode())
        check_variable(key, size)
        variable = _VariableFile(key=key, summary=summary, size=size, updated_at=time.time(),
                                 hash=hashlib.sha256(encoded.encode()).hexdigest())  # fmt: skip
        await asyncio.to_thread(self._set_variable, user_id, session_id, variable, encoded)
        return variable.info()

    def _set_variable(
        self, user_id: str, session_id: str, variable: _VariableFile, encoded: str
    ) -> None:
        directory = self._session_dir(user_id, session_id)
        with self._locked():
            if self._read_session(directory, self._where(user_id, session_id)) is None:
                self._write_session(
                    self._new_session(user_id, session_id, session_id, variable.updated_at)
                )
            _make_directories(directory / "values", self.directory)
            _make_directories(directory / "variables", self.directory)
            value_path = directory / "values" / f"{variable.hash}.json"
            if not value_path.exists():
                _write_atomic(value_path, encoded)
            path = directory / "variables" / f"{file_name(variable.key)}.json"
            old = self._old_hash(path)
            _write_atomic(path, variable.dump())
            if old is not None and old != variable.hash:
                self._drop_value_if_unused(directory, old)

    @staticmethod
    def _old_hash(path: Path) -> str | None:
        """The value hash of an existing variable file (``None``: none, or unreadable)."""
        try:
            return _VariableFile.read(path, str(path)).hash
        except (FileNotFoundError, SessionFormatError):
            return None

    @staticmethod
    def _drop_value_if_unused(directory: Path, digest: str) -> None:
        """Delete ``values/<digest>.json`` if no variable of the session refers to it."""
        variables = directory / "variables"
        for name in os.listdir(variables):
            if not name.startswith(".") and JSONFileStorage._old_hash(variables / name) == digest:
                return
        (directory / "values" / f"{digest}.json").unlink(missing_ok=True)

    async def get_variable(self, user_id: str, session_id: str, key: str) -> Variable | None:
        check_ids(user_id, session_id)
        return await asyncio.to_thread(self._get_variable, user_id, session_id, key)

    def _get_variable(self, user_id: str, session_id: str, key: str) -> Variable | None:
        directory = self._session_dir(user_id, session_id)
        where = f"variable {key!r} of {self._where(user_id, session_id)}"
        path = directory / "variables" / f"{file_name(key)}.json"
        # a value is never read while a writer may delete it
        with self._locked(create=False):
            try:
                variable = _VariableFile.read(path, f"{where} ({path})")
            except FileNotFoundError:
                return None
            value_path = directory / "values" / f"{variable.hash}.json"
            try:
                value = _read_json(value_path, f"the value of {where}")
            except FileNotFoundError:
                raise SessionFormatError(
                    f"the value of {where} is missing ({value_path})"
                ) from None
        return Variable(info=variable.info(), value=value)

    async def list_variables(
        self, user_id: str, session_id: str, *, prefix: str = "", limit: int = 100
    ) -> list[VariableInfo]:
        check_ids(user_id, session_id)
        return await asyncio.to_thread(self._list_variables, user_id, session_id, prefix, limit)

    def _list_variables(
        self, user_id: str, session_id: str, prefix: str, limit: int
    ) -> list[VariableInfo]:
        directory = self._session_dir(user_id, session_id) / "variables"
        where = self._where(user_id, session_id)
        try:
            names = [n for n in os.listdir(directory) if n.endswith(".json") and n[0] != "."]
        except FileNotFoundError:
            return []
        read: dict[str, _VariableFile] = {}
        keys: list[tuple[str, str]] = []
        for name in names:  # the file names are the index: only digest names need a read
            key = _decoded_name(name[: -len(".json")])
            if key is None:
                read[name] = _VariableFile.read(directory / name, f"a variable of {where}")
                key = read[name].key
            if key.startswith(prefix):
                keys.append((key, name))
        keys.sort()
        return [
            (read.get(name) or self._variable_file(directory / name, key, where)).info()
            for key, name in keys[: max(limit, 0)]
        ]

    @staticmethod
    def _variable_file(path: Path, key: str, where: str) -> _VariableFile:
        return _VariableFile.read(path, f"variable {key!r} of {where} ({path})")

    async def delete_variable(self, user_id: str, session_id: str, key: str) -> bool:
        check_ids(user_id, session_id)
        return await asyncio.to_thread(self._delete_variable, user_id, session_id, key)

    def _delete_variable(self, user_id: str, session_id: str, key: str) -> bool:
        directory = self._session_dir(user_id, session_id)
        path = directory / "variables" / f"{file_name(key)}.json"
        with self._locked(create=False):
            old = self._old_hash(path)
            try:
                path.unlink()
            except FileNotFoundError:
                return False
            _fsync_directory(path.parent)
            if old is not None:
                self._drop_value_if_unused(directory, old)
            return True

    async def aclose(self) -> None:
        return None
