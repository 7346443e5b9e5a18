"""Sessions get a revision: every save bumps it, a save based on an older one is refused.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02

Existing sessions start at their run count (each of their runs was one save). Frozen: later
revisions change the schema with new files, never by editing this one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column(
        "sessions", sa.Column("revision", sa.Integer(), nullable=False, server_default="0")
    )
    op.execute("UPDATE sessions SET revision = run_count")


def downgrade() -> None:
    op.drop_column("sessions", "revision")  # SQLite 3.35+ drops a column in place
