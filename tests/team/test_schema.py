"""The service's migrations: from an empty database and from every earlier revision to the
newest, on SQLite and PostgreSQL, ending exactly at the tables ``db/schema.py`` declares."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from agentica.errors import StorageError
from agentica_team.db import Database
from agentica_team.db.engine import MIGRATIONS, alembic_config
from agentica_team.db.schema import VERSION_TABLE, metadata
from tests.postgres import Cluster

REVISIONS = [r.revision for r in reversed(list(ScriptDirectory(str(MIGRATIONS)).walk_revisions()))]


def _differences(connection: sa.Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"version_table": VERSION_TABLE, "compare_type": True}
    )
    found = compare_metadata(context, metadata)
    # the framework's own tables share the database under their own migrations
    return [d for d in found if "team_" in repr(d)]


def _to(connection: sa.Connection, target: str, *, down: bool = False) -> None:
    config = alembic_config(connection)
    (command.downgrade if down else command.upgrade)(config, target)


async def _check_every_path(url: str) -> None:
    db = Database(url)
    try:
        for start in ["base", *REVISIONS[:-1]]:
            async with db.write() as conn:
                await conn.run_sync(_to, "base", down=True)
                if start != "base":
                    await conn.run_sync(_to, start)
            await db.upgrade()
            async with db.read() as conn:
                assert await conn.run_sync(_differences) == [], f"from {start}"
                version = await conn.scalar(sa.text(f"SELECT version_num FROM {VERSION_TABLE}"))
            assert version == REVISIONS[-1]
    finally:
        await db.aclose()


# alembic's commands are synchronous: the checks run on a thread of their own


def test_sqlite_upgrades_from_empty_and_every_revision(tmp_path: Path) -> None:
    asyncio.run(_check_every_path(f"sqlite+aiosqlite:///{tmp_path / 'team.db'}"))


def test_postgresql_upgrades_from_empty_and_every_revision(pg_cluster: Cluster) -> None:
    url = pg_cluster.create_database("team_schema")
    asyncio.run(_check_every_path(url))


async def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'team.db'}")
    try:
        await db.upgrade()
        async with db.write() as conn:
            await conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '9999'"))
        with pytest.raises(StorageError, match="written by a newer version"):
            await db.upgrade()
    finally:
        await db.aclose()


async def test_upgrade_waits_for_another_process_writing_the_sqlite_file(tmp_path: Path) -> None:
    """Another connection holds the write lock while the service starts on the file (as when
    several workers start on one new file): the switch to WAL, which SQLite refuses at once
    then, is waited for and the upgrade completes."""
    import sqlite3
    import threading

    path = tmp_path / "busy.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE someone_elses (x)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO someone_elses VALUES (1)")
    done = threading.Timer(1.0, lambda: writer.execute("COMMIT"))
    done.start()
    db = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await db.upgrade()
        async with db.read() as conn:
            version = await conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}")
            assert version.scalar_one() == REVISIONS[-1]
    finally:
        await db.aclose()
        await asyncio.to_thread(done.join)
        writer.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
