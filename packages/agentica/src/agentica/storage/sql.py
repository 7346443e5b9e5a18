"""``SQLStorage``: sessions and variables in SQLite or PostgreSQL (SQLAlchemy 2 async Core).

- ``SQLStorage(url)``: ``sqlite+aiosqlite:///path`` or ``postgresql+asyncpg://...`` (plain
  ``sqlite://`` and ``postgresql://`` are accepted and given the async driver).
- ``SQLiteStorage(path=None)``: a SQLite file, by default ``default_sqlite_path()``.

The tables are in ``_sqlschema.py``, the schema's history in alembic ``migrations/``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

from agentica._paths import data_dir
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
    encode_undo,
    state_at,
)
from agentica.storage.codec import decode_run, encode_run, warm_codec
from agentica.storage.records import RunRecord, SessionData, SessionInfo

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy.dialects.postgresql import Insert as PgInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
    from sqlalchemy.sql.schema import Table

__all__ = ["SQLStorage", "SQLiteStorage", "default_sqlite_path"]

T = TypeVar("T")

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_SQLITE_BUSY_TIMEOUT = 30.0
_PG_MIGRATION_LOCK = 0x6167656E74696361  # "agentica": serialises concurrent first uses
_RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock detected
_ATTEMPTS = 3


def default_sqlite_path() -> Path:
    """``$AGENTICA_HOME/agentica.db``, else ``$XDG_DATA_HOME/agentica/agentica.db``, else
    ``~/.local/share/agentica/agentica.db``."""
    return data_dir() / "agentica.db"


def _normalise_url(url: str) -> str:
    """The URL with its async driver; ``StorageError`` for anything but SQLite and PostgreSQL."""
    scheme, sep, rest = url.partition("://")
    drivers = {
        "sqlite": "sqlite+aiosqlite",
        "sqlite+aiosqlite": "sqlite+aiosqlite",
        "postgresql": "postgresql+asyncpg",
        "postgres": "postgresql+asyncpg",
        "postgresql+asyncpg": "postgresql+asyncpg",
    }
    if not sep or scheme not in drivers:
        raise StorageError(
            f"unsupported database URL {scheme + sep!r}: use sqlite+aiosqlite:///path.db or "
            "postgresql+asyncpg://user@host/db"
        )
    return f"{drivers[scheme]}://{rest}"


def _describe(url: str) -> str:
    """A label for messages: the backend and the database, never a password."""
    parts = urlsplit(url)
    if parts.scheme.startswith("sqlite"):
        rest = url.partition("://")[2]
        path = unquote(rest[1:].split("?")[0]) if rest.startswith("/") else ""
        return f"SQLite database {path or ':memory:'}"
    host = parts.netloc.rpartition("@")[2]
    return f"PostgreSQL database {host}{parts.path}"


def _import_backend() -> None:
    """Import SQLAlchemy, the drivers and alembic, and build the run codec (run in a worker
    thread: ~0.5 s)."""
    for module in (
        "sqlalchemy.ext.asyncio",
        "sqlalchemy.dialects.postgresql.asyncpg",
        "sqlalchemy.dialects.sqlite.aiosqlite",
        "alembic.command",
        "alembic.migration",
        "alembic.script",
        "agentica.storage._sqlschema",
    ):
        importlib.import_module(module)
    warm_codec()  # (building the run codec's validator takes a quarter second)


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    _set_pragmas(dbapi_connection, wait_for_wal=False)


def _on_sqlite_file_connect(dbapi_connection: Any, _record: Any) -> None:
    # the migration's synchronous connection, on a worker thread: it may wait for the WAL switch
    _set_pragmas(dbapi_connection, wait_for_wal=True)


def _set_pragmas(dbapi_connection: Any, *, wait_for_wal: bool) -> None:
    # SQLAlchemy emits BEGIN itself (``_on_sqlite_begin``); WAL lets readers run during a write.
    # A file is switched to WAL by its migration (``_on_sqlite_file_connect``) before the event
    # loop's connections open it, so theirs is a no-op that takes no lock.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={int(_SQLITE_BUSY_TIMEOUT * 1000)}")
        if wait_for_wal:
            _enter_wal(cursor)
        else:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def wait_for_wal(database: str) -> None:
    """Put the SQLite file ``database`` in WAL mode, waiting while another process is switching
    it (for other packages' engines over the same file; blocking: call it on a worker thread)."""
    import sqlite3

    connection = sqlite3.connect(database, timeout=_SQLITE_BUSY_TIMEOUT, isolation_level=None)
    try:
        _enter_wal(connection.cursor())
    finally:
        connection.close()


def _enter_wal(cursor: Any) -> None:
    """Switch a new file to WAL, retrying while another process does the same.

    The switch takes an exclusive lock, and SQLite reports "database is locked" at once (without
    its busy handler) when two processes open a new file together; once one has switched, the
    mode is stored in the file and the other finds it set. Called on a worker thread only.
    """
    import sqlite3

    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)  # the migration's worker thread, never the event loop
        delay = min(delay * 2, 0.2)


def _on_sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql(connection.get_execution_options().get("agentica_begin", "BEGIN"))


@dataclass(slots=True)
class _Engine:
    """The engine of one event loop and two views sharing its pool.

    ``writer`` begins with ``BEGIN IMMEDIATE`` on SQLite (it takes the write lock at once, so two
    writers never deadlock upgrading a read lock). ``reader`` is autocommit on PostgreSQL: reads
    are single statements or tolerate separate snapshots (``load_session`` reads the runs up to
    the ``run_count`` it read first), so BEGIN and COMMIT would be two wasted round trips.
    """

    engine: AsyncEngine
    reader: AsyncEngine
    writer: AsyncEngine
    write_lock: asyncio.Lock | None


def _info_columns(sessions: Table) -> list[Any]:
    """The ``sessions`` columns a ``SessionInfo`` is built from."""
    return [
        sessions.c[name]
        for name in (
            "user_id",
            "session_id",
            "title",
            "run_count",
            "created_at",
            "updated_at",
            "parent_id",
            "forked_at",
        )
    ]


def _session_where(table: Table, user_id: str, session_id: str) -> Any:
    return (table.c.user_id == user_id) & (table.c.session_id == session_id)


def _decode_state(text: str, where: str) -> dict[str, Any]:
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise SessionFormatError(f"the state of {where} is not valid JSON: {exc}") from None
    if not isinstance(state, dict):
        raise SessionFormatError(f"the state of {where} is not a JSON object")
    return state


def _snapshot(row: Any, where: str) -> Snapshot | None:
    """The summary and state of a session row (``None`` for no row: empty); ``None`` when the
    stored state is damaged (its history is then unknown, the save goes on)."""
    if row is None:
        return {"state": {}, "summary": None}
    try:
        return {"state": _decode_state(row.state, where), "summary": row.summary}
    except SessionFormatError:
        return None


def _decode_runs(
    user_id: str, session_id: str, expected: int, rows: Sequence[tuple[int, str]]
) -> list[RunRecord]:
    """The session's runs from ``(seq, record)`` rows, which must be exactly 1..expected."""
    where = f"session {session_id!r} of user {user_id!r}"
    seqs = [seq for seq, _ in rows]
    if seqs != list(range(1, expected + 1)):
        missing = sorted(set(range(1, expected + 1)) - set(seqs))
        raise SessionFormatError(
            f"{where} is damaged: it has {expected} runs but run(s) {missing[:5]} are missing"
        )
    return [decode_run(text, where=f"run {seq} of {where}") for seq, text in rows]


def _text(value: str | None) -> str | None:
    """A title or summary as a text column holds it: PostgreSQL text cannot contain NUL."""
    return value.replace("\x00", "\ufffd") if value else value


def _key_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix`` (``None``: none)."""
    last = ord(prefix[-1])
    if last >= 0x10FFFF or 0xD7FF <= last <= 0xDFFF:
        return None
    return prefix[:-1] + chr(last + 1)


class SQLStorage:
    """Sessions and variables in a SQL database (SQLite or PostgreSQL), safe for concurrent use.

    Tables (``_sqlschema.py``): ``sessions``, ``runs`` (one ``codec.encode_run`` record per run),
    ``variables`` (the per-session index) and ``blobs`` (values stored once by SHA-256; a blob is
    deleted in the transaction that removes its last reference). Every statement is filtered by
    ``user_id`` and ``session_id``. ``append_run`` is one transaction: it reads the session row
    locked (``SELECT ... FOR UPDATE``; SQLite has one writer at a time), compares its revision
    with ``expected_revision`` (a writer that lost the race changes nothing and gets
    ``SessionConflictError``), bumps ``run_count`` (the run's sequence number) and ``revision``
    and inserts the run with its undo patch (the stored state and summary it replaced, as a
    diff: ``branching.py``), so a crash leaves all of a run or none of it. A fork copies rows
    (``INSERT ... SELECT``); a rewind moves the dropped runs to the new branch in the same
    transaction. Damaged rows raise ``SessionFormatError`` naming the user, session and run.

    The schema is managed by alembic (``migrations/``): on first use the storage upgrades the
    database to the newest revision (``create=True``) or checks that it is there
    (``create=False``); a database written by a newer agentica raises ``StorageError`` instead of
    being misread.

    SQLAlchemy and alembic cost ~0.5 s to import: they are imported in a worker thread on first
    use, never at ``import agentica`` and never on the event loop. Engines are created lazily,
    one per storage object and event loop (asyncpg connections belong to a loop); ``aclose()``
    disposes of the running loop's engine. SQLite connections use WAL, a busy timeout, foreign
    keys and ``BEGIN IMMEDIATE`` for writes (one writer at a time per process, others wait, none
    deadlocks).
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = _normalise_url(url)
        self.create = create
        self._label = _describe(self.url)
        self._engines: dict[asyncio.AbstractEventLoop, asyncio.Task[_Engine]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._label})"

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return "sqlite" if self.url.startswith("sqlite") else "postgresql"

    # -- engine and schema ----------------------------------------------------------------------

    async def _engine(self) -> _Engine:
        """The running loop's engine, created (and the schema checked) on first use."""
        loop = asyncio.get_running_loop()
        for other in [other for other in self._engines if other.is_closed()]:
            del self._engines[other]
        task = self._engines.get(loop)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._engines[loop] = loop.create_task(self._open())
        return await asyncio.shield(task)

    async def _open(self) -> _Engine:
        await asyncio.to_thread(_import_backend)
        engine = await asyncio.to_thread(self._create_engine)
        sqlite = self.dialect == "sqlite"
        handle = _Engine(
            engine=engine,
            reader=engine if sqlite else engine.execution_options(isolation_level="AUTOCOMMIT"),
            writer=engine.execution_options(agentica_begin="BEGIN IMMEDIATE") if sqlite else engine,
            write_lock=asyncio.Lock() if sqlite else None,
        )
        try:
            script = await asyncio.to_thread(_load_script)
            await self._prepare_schema(handle, script)
        except BaseException:
            await engine.dispose()
            raise
        return handle

    def _create_engine(self) -> AsyncEngine:
        from sqlalchemy import event
        from sqlalchemy.engine import make_url
        from sqlalchemy.ext.asyncio import create_async_engine

        url = make_url(self.url)
        if self.dialect == "postgresql":
            settings = {"application_name": "agentica"}
            return create_async_engine(
                url, connect_args={"timeout": 10, "server_settings": settings}
            )
        database = url.database or ""
        if self.create and database and database != ":memory:" and "mode=memory" not in self.url:
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT})
        event.listen(engine.sync_engine, "connect", _on_sqlite_connect)
        event.listen(engine.sync_engine, "begin", _on_sqlite_begin)
        return engine

    async def _prepare_schema(self, handle: _Engine, script: ScriptDirectory) -> None:
        from sqlalchemy.exc import SQLAlchemyError

        if self._file_sqlite():
            # alembic is synchronous: a SQLite file is migrated on a worker thread through a
            # plain connection of its own (BEGIN IMMEDIATE, so it waits for other writers)
            try:
                await asyncio.to_thread(self._migrate_file, script)
            except (SQLAlchemyError, OSError) as exc:
                raise self._error("open the database", exc) from exc
            return
        try:
            async with handle.writer.begin() as conn:
                if self.dialect == "postgresql":
                    lock = f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})"
                    await conn.exec_driver_sql(lock)
                await conn.run_sync(_migrate, script, self.create, self._label)
        except (SQLAlchemyError, OSError) as exc:
            raise self._error("open the database", exc) from exc

    def _file_sqlite(self) -> bool:
        """Whether this is a SQLite file (not an in-memory database another engine cannot see)."""
        from sqlalchemy.engine import make_url

        database = make_url(self.url).database or ""
        return (
            self.dialect == "sqlite"
            and bool(database)
            and database != ":memory:"
            and "mode=memory" not in self.url
        )

    def _migrate_file(self, script: ScriptDirectory) -> None:
        """Check and upgrade a SQLite file's schema with a synchronous connection."""
        from sqlalchemy import create_engine, event
        from sqlalchemy.engine import make_url

        url = make_url(self.url).set(drivername="sqlite")
        engine = create_engine(url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT})
        event.listen(engine, "connect", _on_sqlite_file_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
        try:
            immediate = engine.execution_options(agentica_begin="BEGIN IMMEDIATE")
            with immediate.begin() as conn:
                _migrate(conn, script, self.create, self._label)
        finally:
            engine.dispose()

    def _error(self, action: str, exc: BaseException) -> StorageError:
        from sqlalchemy.exc import DBAPIError

        cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        detail = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:300]
        return StorageError(f"{self._label}: could not {action}: {type(cause).__name__}: {detail}")

    async def _transaction(
        self, action: str, body: Callable[[AsyncConnection], Awaitable[T]], *, write: bool
    ) -> T:
        """Run ``body`` in one transaction; retried on deadlocks, errors become ``StorageError``."""
        handle = await self._engine()  # first: it imports SQLAlchemy off the event loop
        from sqlalchemy.exc import DBAPIError, SQLAlchemyError

        for attempt in range(1, _ATTEMPTS + 1):
            try:
                if not write:
                    async with handle.reader.begin() as conn:
                        return await body(conn)
                if handle.write_lock is None:
                    async with handle.writer.begin() as conn:
                        return await body(conn)
                async with handle.write_lock, handle.writer.begin() as conn:
                    return await body(conn)
            except DBAPIError as exc:
                retry = getattr(exc.orig, "sqlstate", None) in _RETRYABLE_SQLSTATES
                if not retry or attempt == _ATTEMPTS:
                    raise self._error(action, exc) from exc
            except (SQLAlchemyError, OSError) as exc:
                raise self._error(action, exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _insert(self, conn: AsyncConnection, table: Table) -> PgInsert | SqliteInsert:
        """An INSERT with ``ON CONFLICT`` support for the connection's dialect."""
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)

    async def aclose(self) -> None:
        """Dispose of the running loop's engine (a later call opens a new one)."""
        task = self._engines.pop(asyncio.get_running_loop(), None)
        if task is None:
            return
        try:
            handle = await task
        except Exception:  # it never opened: nothing to close
            return
        await handle.engine.dispose()

    # -- sessions -------------------------------------------------------------------------------

    async def load_session(self, user_id: str, session_id: str) -> SessionData | None:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> tuple[Any, list[tuple[int, str]]]:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import runs, sessions

            where = _session_where(sessions, user_id, session_id)
            row = (await conn.execute(sa.select(sessions).where(where))).one_or_none()
            if row is None:
                return None, []
            result = await conn.execute(
                sa.select(runs.c.seq, runs.c.record)
                .where(_session_where(runs, user_id, session_id) & (runs.c.seq <= row.run_count))
                .order_by(runs.c.seq)
            )
            return row, [(seq, record) for seq, record in result]

        row, records = await self._transaction("load a session", body, write=False)
        if row is None:
            return None
        decoded = await asyncio.to_thread(_decode_runs, user_id, session_id, row.run_count, records)
        where = f"session {session_id!r} of user {user_id!r}"
        return SessionData(
            info=self._info(row), runs=decoded, summary=row.summary,
            state=_decode_state(row.state, where), revision=row.revision,
        )  # fmt: skip

    @staticmethod
    def _info(row: Any) -> SessionInfo:
        return SessionInfo(
            user_id=row.user_id, session_id=row.session_id, title=row.title, runs=row.run_count,
            created_at=row.created_at, updated_at=row.updated_at, parent_id=row.parent_id,
            forked_at=row.forked_at,
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
        encoded = encode_run(run)  # first: a record that cannot be stored changes nothing
        encoded_state = json.dumps(dict(state)) if state is not None else None
        now = time.time()

        async def body(conn: AsyncConnection) -> int:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import runs, sessions

            where = _session_where(sessions, user_id, session_id)
            locked = sa.select(sessions.c.revision, sessions.c.summary, sessions.c.state).where(
                where
            )
            for _ in range(_ATTEMPTS):
                # the row is locked until the commit (PostgreSQL; SQLite has one writer)
                row = (await conn.execute(locked.with_for_update())).one_or_none()
                found = None if row is None else int(row.revision)
                new_ok = found is None and expected_revision == 0
                if expected_revision is not None and found != expected_revision and not new_ok:
                    raise stale_save(user_id, session_id, expected_revision, found)
                before = _snapshot(row, f"session {session_id!r} of user {user_id!r}")
                after = {
                    "state": json.loads(encoded_state) if encoded_state is not None
                    else (before or {}).get("state", {}),
                    "summary": summary if summary is not None
                    else (before or {}).get("summary"),
                }  # fmt: skip
                returned = (sessions.c.run_count, sessions.c.revision)
                if row is None:
                    statement: Any = (
                        self._insert(conn, sessions)
                        .values(
                            user_id=user_id, session_id=session_id,
                            title=_text(title or run.input[:80] or session_id),
                            created_at=now, updated_at=now, run_count=1, summary=_text(summary),
                            state=encoded_state or "{}", revision=1, root_id=session_id,
                        )
                        .on_conflict_do_nothing(
                            index_elements=[sessions.c.user_id, sessions.c.session_id]
                        )
                        .returning(*returned)
                    )  # fmt: skip
                else:
                    changes: dict[str, Any] = {
                        "updated_at": now,
                        "run_count": sessions.c.run_count + 1,
                        "revision": sessions.c.revision + 1,
                    }
                    if summary is not None:
                        changes["summary"] = _text(summary)
                    if encoded_state is not None:
                        changes["state"] = encoded_state
                    statement = sa.update(sessions).where(where).values(changes)
                    statement = statement.returning(*returned)
                written = (await conn.execute(statement)).one_or_none()
                if written is not None:
                    break
                # another writer created the session in between: read it again, locked
            else:
                raise StorageError(
                    f"{self._label}: could not append a run: session {session_id!r} of user "
                    f"{user_id!r} was created and deleted by other writers meanwhile; retry"
                )
            seq, revision = written
            await conn.execute(
                sa.insert(runs).values(
                    user_id=user_id,
                    session_id=session_id,
                    seq=seq,
                    run_id=run.run_id,
                    status=run.status,
                    started_at=run.started_at,
                    record=encoded,
                    undo=encode_undo(after, before),
                )
            )
            return int(revision)

        return await self._transaction("append a run", body, write=True)

    async def list_sessions(self, user_id: str, *, limit: int = 100) -> list[SessionInfo]:
        check_ids(user_id, "-")

        async def body(conn: AsyncConnection) -> list[SessionInfo]:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import sessions

            result = await conn.execute(
                sa.select(*_info_columns(sessions))
                .where(sessions.c.user_id == user_id)
                .order_by(sessions.c.updated_at.desc(), sessions.c.session_id)
                .limit(max(limit, 0))
            )  # fmt: skip
            return [self._info(row) for row in result]

        return await self._transaction("list sessions", body, write=False)

    async def rename_session(self, user_id: str, session_id: str, title: str) -> None:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> None:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import sessions

            result = await conn.execute(
                sa.update(sessions)
                .where(_session_where(sessions, user_id, session_id))
                .values(title=_text(title))
            )
            if result.rowcount == 0:
                raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")

        await self._transaction("rename a session", body, write=True)

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> bool:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import runs, sessions, variables

            result = await conn.execute(
                sa.delete(variables)
                .where(_session_where(variables, user_id, session_id))
                .returning(variables.c.blob_hash)
            )
            hashes = {blob_hash for (blob_hash,) in result}
            await conn.execute(sa.delete(runs).where(_session_where(runs, user_id, session_id)))
            deleted = await conn.execute(
                sa.delete(sessions).where(_session_where(sessions, user_id, session_id))
            )
            await _delete_unreferenced_blobs(conn, hashes)
            return bool(deleted.rowcount)

        return await self._transaction("delete a session", body, write=True)

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

        async def body(conn: AsyncConnection) -> SessionInfo:
            # FOR SHARE: a concurrent append or rewind of the source waits for the copy
            source = await self._source(conn, user_id, session_id, share=True)
            runs = source.run_count if at is None else at
            check_turn(runs, source.run_count, name="at", session_id=session_id, allow_all=True)
            await self._check_free(conn, user_id, new_session_id)
            snapshot = await self._snapshot_at(conn, user_id, source, runs)
            info = await self._insert_branch(
                conn, source, new_session_id, runs, _text(title) or f"{source.title} (fork)",
                run_count=runs, snapshot=snapshot,
            )  # fmt: skip
            await _copy_session_rows(conn, user_id, session_id, new_session_id, runs)
            return info

        return await self._transaction("fork a session", body, write=True)

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

        async def body(conn: AsyncConnection) -> SessionInfo:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import runs, sessions

            session = await self._source(conn, user_id, session_id, share=False)
            if expected_revision is not None and session.revision != expected_revision:
                raise stale_save(user_id, session_id, expected_revision, session.revision)
            check_turn(to, session.run_count, name="to", session_id=session_id, allow_all=False)
            new_id = branch_id
            if new_id is None:
                new_id = branch_id_for(session_id, session.revision)
                if await self._exists(conn, user_id, new_id):
                    suffix = f"-{secrets.token_hex(3)}"
                    new_id = branch_id_for(session_id, session.revision, suffix)
            await self._check_free(conn, user_id, new_id)
            snapshot = await self._snapshot_at(conn, user_id, session, to)
            info = await self._insert_branch(
                conn, session, new_id, to, f"{session.title} (before the rewind to run {to})",
                run_count=session.run_count,
            )  # fmt: skip
            # the branch gets a copy of the runs both keep and the dropped runs themselves
            await _copy_session_rows(conn, user_id, session_id, new_id, to)
            await conn.execute(
                sa.update(runs)
                .where(_session_where(runs, user_id, session_id) & (runs.c.seq > to))
                .values(session_id=new_id)
            )
            await conn.execute(
                sa.update(sessions)
                .where(
                    (sessions.c.user_id == user_id)
                    & (sessions.c.parent_id == session_id)
                    & (sessions.c.forked_at > to)
                    & (sessions.c.session_id != new_id)
                )
                .values(parent_id=new_id)  # the runs they share are in the branch now
            )
            await conn.execute(
                sa.update(sessions)
                .where(_session_where(sessions, user_id, session_id))
                .values(
                    run_count=to, revision=sessions.c.revision + 1, updated_at=time.time(),
                    state=json.dumps(snapshot["state"]), summary=_text(snapshot["summary"]),
                    # it shares no more than it keeps with its parent
                    forked_at=sa.case((sessions.c.forked_at > to, to), else_=sessions.c.forked_at),
                )
            )  # fmt: skip
            return info

        return await self._transaction("rewind a session", body, write=True)

    async def branches(self, user_id: str, session_id: str) -> SessionTree:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> SessionTree:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import sessions

            root = (
                await conn.execute(
                    sa.select(sessions.c.root_id).where(
                        _session_where(sessions, user_id, session_id)
                    )
                )
            ).one_or_none()
            if root is None:
                raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
            lineage = root.root_id or session_id
            result = await conn.execute(
                sa.select(*_info_columns(sessions)).where(
                    (sessions.c.user_id == user_id)
                    & ((sessions.c.root_id == lineage) | (sessions.c.session_id == lineage))
                )
            )
            return SessionTree.of(self._info(row) for row in result)

        return await self._transaction("list a session's branches", body, write=False)

    async def _source(
        self, conn: AsyncConnection, user_id: str, session_id: str, *, share: bool
    ) -> Any:
        """The session's row, locked until the commit (``SessionNotFound`` if there is none)."""
        import sqlalchemy as sa

        from agentica.storage._sqlschema import sessions

        row = (
            await conn.execute(
                sa.select(sessions)
                .where(_session_where(sessions, user_id, session_id))
                .with_for_update(read=share)
            )
        ).one_or_none()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return row

    async def _exists(self, conn: AsyncConnection, user_id: str, session_id: str) -> bool:
        import sqlalchemy as sa

        from agentica.storage._sqlschema import sessions

        query = sa.select(sessions.c.revision).where(_session_where(sessions, user_id, session_id))
        return (await conn.execute(query)).first() is not None

    async def _check_free(self, conn: AsyncConnection, user_id: str, new_id: str) -> None:
        if await self._exists(conn, user_id, new_id):
            raise StorageError(f"session {new_id!r} already exists for {user_id!r}")

    async def _snapshot_at(
        self, conn: AsyncConnection, user_id: str, source: Any, runs: int
    ) -> Snapshot:
        """The summary and state of session row ``source`` as they were after run ``runs``
        (reads the undo patches of the later runs only)."""
        import sqlalchemy as sa

        from agentica.storage._sqlschema import runs as runs_table

        where = f"session {source.session_id!r} of user {user_id!r}"
        current = {"state": _decode_state(source.state, where), "summary": source.summary}
        if runs >= source.run_count:
            return current
        result = await conn.execute(
            sa.select(runs_table.c.undo)
            .where(
                _session_where(runs_table, user_id, source.session_id)
                & (runs_table.c.seq > runs)
                & (runs_table.c.seq <= source.run_count)
            )
            .order_by(runs_table.c.seq.desc())
        )
        return state_at(current, [undo for (undo,) in result])

    async def _insert_branch(
        self,
        conn: AsyncConnection,
        source: Any,
        new_id: str,
        forked_at: int,
        title: str,
        *,
        run_count: int,
        snapshot: Snapshot | None = None,
    ) -> SessionInfo:
        """Insert the session row of a branch of ``source`` (with ``snapshot``'s summary and
        state, else the source's) at revision 1: it exists, so a save based on "never saved"
        (revision 0) is refused, not applied over it."""
        import sqlalchemy as sa

        from agentica.storage._sqlschema import sessions

        now = time.time()
        info = SessionInfo(
            user_id=source.user_id, session_id=new_id, title=title, runs=run_count,
            created_at=now, updated_at=now, parent_id=source.session_id, forked_at=forked_at,
        )  # fmt: skip
        await conn.execute(
            sa.insert(sessions).values(
                user_id=source.user_id, session_id=new_id, title=title, created_at=now,
                updated_at=now, run_count=run_count,
                summary=source.summary if snapshot is None else _text(snapshot["summary"]),
                state=source.state if snapshot is None else json.dumps(snapshot["state"]),
                revision=1, parent_id=source.session_id, forked_at=forked_at,
                root_id=source.root_id or source.session_id,
            )
        )  # fmt: skip
        return info

    # -- variables ------------------------------------------------------------------------------

    async def set_variable(
        self, user_id: str, session_id: str, key: str, value: Any, *, summary: str | None = None
    ) -> VariableInfo:
        check_ids(user_id, session_id)
        encoded = json.dumps(value, ensure_ascii=False)
        size = len(encoded.encode())
        check_variable(key, size)
        digest = hashlib.sha256(encoded.encode()).hexdigest()
        info = VariableInfo(key=key, summary=_text(summary), size=size, updated_at=time.time())

        async def body(conn: AsyncConnection) -> VariableInfo:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import sessions, variables

            now = info.updated_at
            await conn.execute(
                self._insert(conn, sessions)
                .values(user_id=user_id, session_id=session_id, title=session_id, created_at=now,
                        updated_at=now, run_count=0, summary=None, state="{}",
                        root_id=session_id)
                .on_conflict_do_nothing(index_elements=[sessions.c.user_id, sessions.c.session_id])
            )  # fmt: skip
            where = _session_where(variables, user_id, session_id) & (variables.c.key == key)
            old = (
                await conn.execute(sa.select(variables.c.blob_hash).where(where).with_for_update())
            ).scalar_one_or_none()
            # lock the old and new blobs in hash order: concurrent writers never deadlock
            existing = await _lock_blobs(conn, {digest} | ({old} if old else set()))
            if digest not in existing:
                await self._insert_blob(conn, digest, encoded, size)
            insert = self._insert(conn, variables).values(
                user_id=user_id, session_id=session_id, key=key, summary=_text(summary),
                size=size, updated_at=now, blob_hash=digest,
            )  # fmt: skip
            await conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[variables.c.user_id, variables.c.session_id, variables.c.key],
                    set_={
                        name: insert.excluded[name]
                        for name in ("summary", "size", "updated_at", "blob_hash")
                    },
                )
            )
            if old is not None and old != digest:
                await _delete_unreferenced_blobs(conn, {old})
            return info

        return await self._transaction("store a variable", body, write=True)

    async def _insert_blob(self, conn: AsyncConnection, digest: str, data: str, size: int) -> None:
        """Insert blob ``digest``; a concurrent insert of the same value is not an error."""
        from agentica.storage._sqlschema import blobs

        insert = self._insert(conn, blobs).values(hash=digest, data=data, size=size)
        await conn.execute(
            insert.on_conflict_do_update(
                index_elements=[blobs.c.hash], set_={"size": insert.excluded.size}
            )
        )

    async def get_variable(self, user_id: str, session_id: str, key: str) -> Variable | None:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> Any:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import blobs, variables

            query = (
                sa.select(variables.c.summary, variables.c.size, variables.c.updated_at,
                          blobs.c.data)
                .join(blobs, blobs.c.hash == variables.c.blob_hash)
                .where(_session_where(variables, user_id, session_id) & (variables.c.key == key))
            )  # fmt: skip
            return (await conn.execute(query)).one_or_none()

        row = await self._transaction("read a variable", body, write=False)
        if row is None:
            return None
        try:
            value = json.loads(row.data)
        except ValueError as exc:
            raise SessionFormatError(
                f"variable {key!r} of session {session_id!r} of user {user_id!r} is damaged: {exc}"
            ) from None
        info = VariableInfo(key=key, summary=row.summary, size=row.size, updated_at=row.updated_at)
        return Variable(info=info, value=value)

    async def list_variables(
        self, user_id: str, session_id: str, *, prefix: str = "", limit: int = 100
    ) -> list[VariableInfo]:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> list[VariableInfo]:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import variables

            where = _session_where(variables, user_id, session_id)
            if prefix:
                where = where & (variables.c.key >= prefix) & (
                    sa.func.substr(variables.c.key, 1, len(prefix)) == prefix
                )  # fmt: skip
                upper = _key_upper_bound(prefix)
                if upper is not None:
                    where = where & (variables.c.key < upper)
            result = await conn.execute(
                sa.select(variables.c.key, variables.c.summary, variables.c.size,
                          variables.c.updated_at)
                .where(where).order_by(variables.c.key).limit(max(limit, 0))
            )  # fmt: skip
            return [
                VariableInfo(key=r.key, summary=r.summary, size=r.size, updated_at=r.updated_at)
                for r in result
            ]

        return await self._transaction("list variables", body, write=False)

    async def delete_variable(self, user_id: str, session_id: str, key: str) -> bool:
        check_ids(user_id, session_id)

        async def body(conn: AsyncConnection) -> bool:
            import sqlalchemy as sa

            from agentica.storage._sqlschema import variables

            result = await conn.execute(
                sa.delete(variables)
                .where(_session_where(variables, user_id, session_id) & (variables.c.key == key))
                .returning(variables.c.blob_hash)
            )
            hashes = {blob_hash for (blob_hash,) in result}
            await _delete_unreferenced_blobs(conn, hashes)
            return bool(hashes)

        return await self._transaction("delete a variable", body, write=True)


class SQLiteStorage(SQLStorage):
    """``SQLStorage`` on a SQLite file: ``path``, by default ``default_sqlite_path()``."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.path = Path(path).expanduser().absolute() if path else default_sqlite_path()
        super().__init__(f"sqlite+aiosqlite:///{self.path}", create=create)


async def _lock_blobs(conn: AsyncConnection, hashes: set[str], *, share: bool = False) -> set[str]:
    """Lock the existing blobs among ``hashes``, in hash order; the ones that exist.

    Row locks on PostgreSQL (``FOR UPDATE``, or ``FOR SHARE`` with ``share``); SQLite has one
    writer at a time and ignores the clause. Every writer locks blobs in the same order, so
    concurrent writers wait for each other but never deadlock.
    """
    if not hashes:
        return set()
    import sqlalchemy as sa

    from agentica.storage._sqlschema import blobs

    result = await conn.execute(
        sa.select(blobs.c.hash)
        .where(blobs.c.hash.in_(sorted(hashes)))
        .order_by(blobs.c.hash)
        .with_for_update(read=share)
    )
    return {blob_hash for (blob_hash,) in result}


async def _delete_unreferenced_blobs(conn: AsyncConnection, hashes: set[str]) -> None:
    """Delete those of ``hashes`` that no variable references any more.

    The rows are locked first (``FOR UPDATE`` on PostgreSQL; SQLite has one writer at a time),
    so a concurrent ``set_variable`` that is about to reference a blob either keeps it or
    re-creates it, and never points at a deleted one.
    """
    if not hashes:
        return
    import sqlalchemy as sa

    from agentica.storage._sqlschema import blobs, variables

    ordered = sorted(hashes)
    await _lock_blobs(conn, hashes)
    referenced = sa.exists().where(variables.c.blob_hash == blobs.c.hash)
    await conn.execute(sa.delete(blobs).where(blobs.c.hash.in_(ordered) & ~referenced))


async def _copy_session_rows(
    conn: AsyncConnection, user_id: str, source_id: str, target_id: str, run_count: int
) -> None:
    """Copy the first ``run_count`` runs and every variable of ``source_id`` to ``target_id``
    (blobs are shared)."""
    import sqlalchemy as sa

    from agentica.storage._sqlschema import runs, variables

    target = sa.literal(target_id, sa.String())
    referenced = await conn.execute(
        sa.select(variables.c.blob_hash).where(_session_where(variables, user_id, source_id))
    )
    # keep the blobs from being deleted while they gain references
    await _lock_blobs(conn, {blob_hash for (blob_hash,) in referenced}, share=True)
    run_columns = ["user_id", "session_id", "seq", "run_id", "status", "started_at", "record",
                   "undo"]  # fmt: skip
    await conn.execute(
        sa.insert(runs).from_select(
            run_columns,
            sa.select(runs.c.user_id, target, runs.c.seq, runs.c.run_id, runs.c.status,
                      runs.c.started_at, runs.c.record, runs.c.undo)
            .where(_session_where(runs, user_id, source_id) & (runs.c.seq <= run_count)),
        )
    )  # fmt: skip
    variable_columns = ["user_id", "session_id", "key", "summary", "size", "updated_at"]
    await conn.execute(
        sa.insert(variables).from_select(
            [*variable_columns, "blob_hash"],
            sa.select(variables.c.user_id, target, variables.c.key, variables.c.summary,
                      variables.c.size, variables.c.updated_at, variables.c.blob_hash)
            .where(_session_where(variables, user_id, source_id)),
        )
    )  # fmt: skip


def _load_script() -> ScriptDirectory:
    """The migration scripts, with their revision map loaded (run in a worker thread)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(_MIGRATIONS))
    script.get_heads()
    return script


def _migrate(connection: Connection, script: ScriptDirectory, create: bool, label: str) -> None:
    """Check the database's schema revision and upgrade it to the newest (inside ``run_sync``).

    A revision this code does not know means a newer agentica wrote the database: refuse rather
    than misread it.
    """
    from alembic import command
    from alembic.config import Config
    from alembic.migration import MigrationContext

    from agentica.storage._sqlschema import VERSION_TABLE

    current = set(MigrationContext.configure(
        connection, opts={"version_table": VERSION_TABLE}
    ).get_current_heads())  # fmt: skip
    heads = set(script.get_heads())
    known = {revision.revision for revision in script.walk_revisions()}
    if current - known:
        raise StorageError(
            f"{label}: its schema is at revision {', '.join(sorted(current - known))}, which this "
            f"version of agentica does not know (it knows up to {', '.join(sorted(heads))}): the "
            "database was written by a newer agentica; upgrade agentica to use it"
        )
    if current == heads:
        return
    if not create:
        state = f"at revision {', '.join(sorted(current))}" if current else "missing"
        raise StorageError(
            f"{label}: the agentica schema is {state}, this version needs "
            f"{', '.join(sorted(heads))}: open it with create=True to create or upgrade it"
        )
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS).replace("%", "%%"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
