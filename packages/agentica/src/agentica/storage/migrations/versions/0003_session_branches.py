"""Sessions branch: a session names its parent and branch point, runs carry an undo patch.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-20

``sessions`` gains ``parent_id``, ``forked_at`` and ``root_id`` (existing sessions are roots of
their own lineage), ``runs`` gains ``undo`` (NULL for existing runs: no state history before
this revision). Columns are added in place (no table rebuild). Frozen: later revisions change
the schema with new files, never by editing this one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def _id() -> sa.types.TypeEngine[str]:
    return sa.String(256).with_variant(sa.String(256, collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("parent_id", _id(), nullable=True))
    op.add_column("sessions", sa.Column("forked_at", sa.Integer(), nullable=True))
    op.add_column("sessions", sa.Column("root_id", _id(), nullable=True))
    op.execute("UPDATE sessions SET root_id = session_id")
    op.create_index("ix_sessions_user_root", "sessions", ["user_id", "root_id"])
    op.add_column("runs", sa.Column("undo", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "undo")  # SQLite 3.35+ drops a column in place
    op.drop_index("ix_sessions_user_root", table_name="sessions")
    op.drop_column("sessions", "root_id")
    op.drop_column("sessions", "forked_at")
    op.drop_column("sessions", "parent_id")
