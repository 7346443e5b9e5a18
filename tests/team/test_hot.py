"""``Hot`` statements and ``Database.run``: the same results on the raw SQLite cursor as through
SQLAlchemy (and on PostgreSQL), the statements that must go through SQLAlchemy do, and
``run`` commits, rolls back, survives its caller's cancellation and shares the write lock with
``write()``."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentica_team.db import Database
from agentica_team.db.hot import Hot, _compile
from tests.postgres import Cluster

meta = sa.MetaData()
items = sa.Table(
    "hot_items",
    meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(40), nullable=False),
    sa.Column("n", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("ts", sa.Double, nullable=False),
    sa.Column("stamp", sa.String(40), nullable=False, default=lambda: f"py-{time.time_ns()}"),
    sa.Column("flag", sa.Boolean, nullable=False, server_default=sa.true()),
)

INSERT = Hot(sa.insert(items).returning(items.c.id, items.c.name))
BUMP = Hot(
    sa.update(items)
    .where(items.c.name == sa.bindparam("b_name"))
    .values(n=items.c.n + sa.bindparam("b_by", type_=sa.BigInteger))
)
PICK = Hot(
    sa.select(items.c.name, items.c.n, items.c.ts).where(
        items.c.name.in_([sa.bindparam("b_name"), "fixed"])
    )
)
FLAGS = Hot(sa.select(items.c.name, items.c.flag).order_by(items.c.id))


@pytest.fixture(scope="module")
def pg_url(pg_cluster: Cluster) -> str:
    return pg_cluster.create_database(f"hot_{os.getpid()}_{random.randrange(10**9)}")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'hot.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    database = Database(db_url)
    async with database.write() as conn:
        await conn.run_sync(meta.drop_all)
        await conn.run_sync(meta.create_all)
    yield database
    await database.aclose()


def _fill(conn: Connection) -> list[Any]:
    rows = [
        {"name": name, "ts": 1.5 + i, "stamp": f"s{i}"}
        for i, name in enumerate(["a", "b", "fixed", "c"])
    ]
    return INSERT.execute(conn, rows).rows


async def test_results_read_the_same_on_every_path(db: Database) -> None:
    inserted = sorted(await db.run(_fill), key=lambda row: row.id)  # PostgreSQL: any order
    assert [row.name for row in inserted] == ["a", "b", "fixed", "c"]  # by attribute
    assert len({row.id for row in inserted}) == 4
    ident, name = inserted[0]  # and unpacked
    assert (ident, name) == (inserted[0].id, "a")

    def work(conn: Connection) -> tuple[int, int, list[Any], Any]:
        bumped = BUMP.execute(conn, [{"b_name": "a", "b_by": 5}, {"b_name": "b", "b_by": 2}])
        missing = BUMP.execute(conn, {"b_name": "nobody", "b_by": 1})
        picked = PICK.execute(conn, {"b_name": "a"})
        return bumped.rowcount, missing.rowcount, sorted(picked.rows), picked.first()

    bumped, missing, picked, first = await db.run(work)
    assert (bumped, missing) == (2, 0)
    assert [(row.name, row.n, row.ts) for row in picked] == [("a", 5, 1.5), ("fixed", 0, 3.5)]
    assert first is not None
    # the same rows through SQLAlchemy's own execution
    async with db.read() as conn:
        expected = (await conn.execute(PICK.statement, {"b_name": "a"})).all()
    assert sorted(tuple(row) for row in expected) == [tuple(row) for row in picked]


async def test_what_needs_sqlalchemy_goes_through_it(db: Database) -> None:
    await db.run(_fill)
    # a Python-side default (``stamp`` left out) and a result conversion (``flag``: Boolean)
    made = await db.run(lambda conn: INSERT.execute(conn, {"name": "d", "ts": 9.0}).one())
    flags = await db.run(lambda conn: FLAGS.execute(conn, {}).rows)
    assert made.name == "d"
    assert [row.flag for row in flags] == [True] * 5  # bool, not 1
    async with db.read() as conn:
        stamp = await conn.scalar(sa.select(items.c.stamp).where(items.c.name == "d"))
    assert str(stamp).startswith("py-")
    if db.dialect == "sqlite":
        dialect = db.engine.dialect
        assert _compile(INSERT.statement, dialect, ("name", "ts")) is None
        assert _compile(FLAGS.statement, dialect, ()) is None
        assert _compile(PICK.statement, dialect, ("b_name",)) is not None


async def test_run_commits_or_rolls_back_and_shares_the_write_lock(db: Database) -> None:
    await db.run(_fill)

    def fail(conn: Connection) -> None:
        BUMP.execute(conn, {"b_name": "a", "b_by": 100})
        raise ValueError("changed my mind")

    with pytest.raises(ValueError, match="changed my mind"):
        await db.run(fail)

    async def through_write(by: int) -> None:
        async with db.write() as conn:
            await conn.execute(BUMP.statement, {"b_name": "b", "b_by": by})

    def through_run(conn: Connection) -> None:
        BUMP.execute(conn, {"b_name": "b", "b_by": 1})

    # interleaved writers of both kinds: every increment lands
    writes = [through_write(1) for _ in range(20)]
    await asyncio.gather(*writes, *(db.run(through_run) for _ in range(20)))
    async with db.read() as conn:
        counts = dict((await conn.execute(sa.select(items.c.name, items.c.n))).all())
    assert counts["a"] == 0  # the failed body left nothing
    assert counts["b"] == 40


async def test_a_cancelled_caller_does_not_stop_the_transaction(tmp_path: Path) -> None:
    """SQLite runs the body on the database's thread (PostgreSQL on the loop, in a greenlet)."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'hot.db'}")
    async with db.write() as conn:
        await conn.run_sync(meta.create_all)
    await db.run(_fill)
    release = asyncio.Event()
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    def slow(conn: Connection) -> None:
        BUMP.execute(conn, {"b_name": "c", "b_by": 7})
        loop.call_soon_threadsafe(entered.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)

    task = asyncio.create_task(db.run(slow))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await db.run(lambda conn: None)  # waits for the lock: the cancelled body has finished
    async with db.read() as conn:
        n = await conn.scalar(sa.select(items.c.n).where(items.c.name == "c"))
    await db.aclose()
    assert n == 7


async def test_errors_are_sqlalchemys_on_every_path(db: Database) -> None:
    inserted = await db.run(_fill)
    again = {"id": inserted[0].id, "name": "dup", "ts": 0.0, "stamp": "x"}
    with pytest.raises(sa.exc.IntegrityError):
        await db.run(lambda conn: INSERT.execute(conn, again))
    assert _compile(PICK.statement, db.engine.dialect, ("b_name",)) is not None  # on the cursor
    # the failed transaction left nothing and the database still serves
    rows = await db.run(lambda conn: FLAGS.execute(conn, {}).rows)
    assert [row.name for row in rows] == ["a", "b", "fixed", "c"]
