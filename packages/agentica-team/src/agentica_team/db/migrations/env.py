"""Alembic environment of the team service's schema (``agentica_team.db.schema``).

``Database.upgrade`` runs it with its open connection in ``config.attributes["connection"]``. The
revision is kept in ``team_schema_version``, beside the framework's ``agentica_schema_version``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from agentica_team.db.schema import VERSION_TABLE, metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_connection = config.attributes.get("connection")
if _connection is None:
    raise SystemExit("run the team migrations through `agentica serve` (Database.upgrade)")
_run(_connection)
