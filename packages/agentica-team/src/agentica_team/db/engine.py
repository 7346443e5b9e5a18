"""``Database``: the service's connection to SQLite or PostgreSQL, and its schema upgrades.

One async engine per ``Database`` (create and use it on one event loop; the app does). Writes go
through ``write()``: on SQLite a transaction that begins with ``BEGIN IMMEDIATE`` (it takes the
write lock at once, so concurrent writers queue instead of deadlocking, also across processes,
with a 30 s busy timeout) behind a per-process lock; on PostgreSQL an ordinary transaction.
``transaction(body)`` also retries PostgreSQL serialization failures and deadlocks.
``run(body)`` runs a synchronous ``body(connection)`` as one write transaction, the hot path's
way (a model call's admission, settling and audit records): on a SQLite file on a writer thread
of its own with the stdlib driver, so the whole transaction is one step away from the event loop
instead of one thread hop per statement; on PostgreSQL in one greenlet over asyncpg, retried
like ``transaction``. Both ways share the per-process write lock, so they never wait on SQLite's
busy handler for each other.
``upgrade()`` brings the schema to the newest alembic revision (``migrations/``), under an advisory
lock on PostgreSQL so several workers can start at once.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from agentica.errors import StorageError
from agentica_team.db.schema import VERSION_TABLE

__all__ = ["Database"]

T = TypeVar("T")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_BUSY_TIMEOUT = 30.0
_PG_MIGRATION_LOCK = 0x7465616D  # "team"
_RETRYABLE_SQLSTATES = {"40001", "40P01"}
_ATTEMPTS = 4


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event emits BEGIN itself
    cursor = dbapi_connection.cursor()
    for pragma in (
        f"PRAGMA busy_timeout={int(_BUSY_TIMEOUT * 1000)}",
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=FULL",
        "PRAGMA foreign_keys=ON",
    ):
        cursor.execute(pragma)
    cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql(connection.get_execution_options().get("team_begin", "BEGIN"))


class Database:
    """The service database at ``url`` (``sqlite+aiosqlite://`` or ``postgresql+asyncpg://``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
        if self.dialect == "sqlite":
            database = sa.engine.make_url(url).database or ""
            if database and database != ":memory:":
                _create_private(Path(database).expanduser())
            self.engine: AsyncEngine = create_async_engine(
                url, connect_args={"timeout": _BUSY_TIMEOUT}, hide_parameters=True
            )
            event.listen(self.engine.sync_engine, "connect", _on_sqlite_connect)
            event.listen(self.engine.sync_engine, "begin", _on_sqlite_begin)
            self._writer = self.engine.execution_options(team_begin="BEGIN IMMEDIATE")
            self._lock: asyncio.Lock | None = asyncio.Lock()
            self._sync: Engine | None = None
            self._sync_base: Engine | None = None
            self._thread: ThreadPoolExecutor | None = None
            if database and database != ":memory:":
                self._sync_base = _sync_engine(url)
                self._sync = self._sync_base.execution_options(team_begin="BEGIN IMMEDIATE")
                self._thread = ThreadPoolExecutor(1, thread_name_prefix="agentica-team-db")
        else:
            self.engine = create_async_engine(
                url,
                pool_size=10,
                max_overflow=20,
                hide_parameters=True,  # bound values (a provider key) stay out of errors and logs
                connect_args={"server_settings": {"application_name": "agentica-team"}},
            )
            self._writer = self.engine
            self._lock = None
            self._sync = self._sync_base = None
            self._thread = None

    def __repr__(self) -> str:
        return f"Database({sa.engine.make_url(self.url).render_as_string(hide_password=True)})"

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction."""
        async with self.engine.begin() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (committed when the block ends without an error)."""
        if self._lock is None:
            async with self._writer.begin() as conn:
                yield conn
            return
        async with self._lock, self._writer.begin() as conn:
            yield conn

    async def transaction(self, body: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """``body`` in a write transaction, retried on PostgreSQL serialization failures."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with self.write() as conn:
                    return await body(conn)
            except DBAPIError as exc:
                retry = getattr(exc.orig, "sqlstate", None) in _RETRYABLE_SQLSTATES
                if not retry or attempt == _ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def run(self, body: Callable[[Connection], T]) -> T:
        """``body(connection)`` (synchronous: no awaits inside) in one write transaction,
        committed when it returns (see the module docstring). Cancelling the caller does not
        stop a transaction under way: it commits or rolls back as it would have."""
        if self._sync is None or self._thread is None or self._lock is None:

            async def adapted(conn: AsyncConnection) -> T:
                return await conn.run_sync(body)

            return await self.transaction(adapted)
        await self._lock.acquire()
        try:
            done = asyncio.get_running_loop().run_in_executor(
                self._thread, _run_sync, self._sync, body
            )
        except BaseException:
            self._lock.release()
            raise
        lock = self._lock
        done.add_done_callback(lambda _: lock.release())
        return await asyncio.shield(done)

    def insert(self, table: sa.Table) -> Any:
        """An INSERT with ``on_conflict_do_nothing/do_update`` for this dialect."""
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)

    async def upgrade(self, *, framework: bool = True) -> None:
        """Create or upgrade the schema to the newest revision, the framework's storage tables
        included unless ``framework=False`` (raises ``StorageError`` for a database written by a
        newer version). Alembic loads and runs its scripts synchronously, so this runs on a
        worker thread with an engine of its own: the event loop never waits."""
        await asyncio.to_thread(_upgrade_on_own_loop, self.url, framework)

    async def _upgrade_here(self) -> None:
        async with self.write() as conn:
            if self.dialect == "postgresql":
                await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
            await conn.run_sync(_migrate, "head")

    async def aclose(self) -> None:
        """Close every pooled connection (after the transactions under way)."""
        if self._lock is not None and self._thread is not None:
            async with self._lock:  # the last ``run`` has finished
                pass
            self._thread.shutdown(wait=False)
        if self._sync_base is not None:
            await asyncio.to_thread(self._sync_base.dispose)
        await self.engine.dispose()


def _create_private(path: Path) -> None:
    """Create the database file (and its folder) readable by this user only, if it does not
    exist: it holds password hashes, token hashes and the encrypted provider keys, and SQLite
    gives its -wal and -shm files the database file's permissions."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _sync_engine(url: str) -> Engine:
    """The stdlib-driver engine of a SQLite file for ``Database.run`` (used on its thread)."""
    sync_url = sa.engine.make_url(url).set(drivername="sqlite+pysqlite")
    engine = sa.create_engine(
        sync_url,
        connect_args={"timeout": _BUSY_TIMEOUT, "check_same_thread": False},
        hide_parameters=True,
        poolclass=sa.pool.SingletonThreadPool,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _run_sync(engine: Engine, body: Callable[[Connection], T]) -> T:
    with engine.begin() as conn:
        return body(conn)


def _upgrade_on_own_loop(url: str, framework: bool) -> None:
    """Upgrade the service's tables and the framework's (agent sessions and workspaces share the
    database), on this thread's own event loop."""
    from agentica.storage.sql import SQLStorage, wait_for_wal

    database = sa.engine.make_url(url).database or ""
    if url.startswith("sqlite") and database not in ("", ":memory:") and "mode=memory" not in url:
        _create_private(Path(database).expanduser())
        # several workers starting on one new file: the switch to WAL is waited for here, on
        # this worker thread, so the event loop's connections find the file switched already
        wait_for_wal(str(Path(database).expanduser()))

    async def upgrade() -> None:
        db = Database(url)
        try:
            await db._upgrade_here()
        finally:
            await db.aclose()
        if not framework:
            return
        storage = SQLStorage(url)
        try:
            await storage.list_sessions("~schema-check~", limit=1)
        finally:
            await storage.aclose()

    asyncio.run(upgrade())


def alembic_config(connection: Connection | None = None) -> Any:
    """An alembic ``Config`` for the service's migrations (bound to ``connection``)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.attributes["connection"] = connection
    return config


def _migrate(connection: Connection, target: str) -> None:
    from alembic import command
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(MIGRATIONS))
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    current = set(context.get_current_heads())
    known = {revision.revision for revision in script.walk_revisions()}
    if current - known:
        raise StorageError(
            f"the team database is at schema revision {', '.join(sorted(current - known))}, "
            "which this version of agentica-team does not know: it was written by a newer "
            "version; upgrade agentica-team to use it"
        )
    if current == set(script.get_heads()) and target == "head":
        return
    command.upgrade(alembic_config(connection), target)
