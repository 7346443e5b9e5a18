"""Initial schema: sessions, runs, variables and content-addressed blobs.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Frozen: later revisions change the schema with new files, never by editing this one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _id() -> sa.types.TypeEngine[str]:
    return sa.String(256).with_variant(sa.String(256, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("user_id", _id(), primary_key=True),
        sa.Column("session_id", _id(), primary_key=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("run_count", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), nullable=False),
    )
    op.create_index("ix_sessions_user_updated", "sessions", ["user_id", "updated_at"])
    op.create_table(
        "runs",
        sa.Column("user_id", _id(), primary_key=True),
        sa.Column("session_id", _id(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id", "session_id"],
            ["sessions.user_id", "sessions.session_id"],
            name="fk_runs_session",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "blobs",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
    )
    op.create_table(
        "variables",
        sa.Column("user_id", _id(), primary_key=True),
        sa.Column("session_id", _id(), primary_key=True),
        sa.Column("key", _id(), primary_key=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("blob_hash", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id", "session_id"],
            ["sessions.user_id", "sessions.session_id"],
            name="fk_variables_session",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["blob_hash"], ["blobs.hash"], name="fk_variables_blob"),
    )
    op.create_index("ix_variables_blob_hash", "variables", ["blob_hash"])


def downgrade() -> None:
    op.drop_table("variables")
    op.drop_table("blobs")
    op.drop_table("runs")
    op.drop_table("sessions")
