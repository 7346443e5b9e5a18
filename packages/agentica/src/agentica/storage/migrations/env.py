"""Alembic environment of agentica's storage schema (sessions, runs, variables, blobs).

``SQLStorage`` runs it on first use, handing over its open connection (inside the transaction
holding the migration lock) in ``config.attributes["connection"]``.

From the command line (a developer writing a new revision), give the database URL with ``-x``::

    alembic -c migrations.ini -x url=sqlite+aiosqlite:///agentica.db upgrade head

where ``migrations.ini`` holds ``[alembic]`` and ``script_location = agentica.storage:migrations``.
The revision is kept in ``agentica_schema_version`` (not ``alembic_version``): the storage can
share a database with an application's own migrations.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from agentica.storage._sqlschema import VERSION_TABLE, metadata

config = context.config


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("give the database URL: alembic -x url=sqlite+aiosqlite:///path.db ...")
    return url


async def _run_from_command_line(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_configure_and_run)
    finally:
        await engine.dispose()


def _run() -> None:
    if context.is_offline_mode():
        context.configure(url=_url(), target_metadata=metadata, version_table=VERSION_TABLE,
                          literal_binds=True)  # fmt: skip
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
    else:
        asyncio.run(_run_from_command_line(_url()))


_run()
