"""Answers a teacher shares with the course (``team_shared_answers``): offered to its students'
agents for similar questions, with how often and the tokens that saved.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "team_shared_answers",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column(
            "course_id",
            sa.String(length=64),
            sa.ForeignKey("team_courses.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("shared_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("offered", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("tokens_saved", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.create_index(
        "ix_team_shared_answers_course", "team_shared_answers", ["course_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_team_shared_answers_course", table_name="team_shared_answers")
    op.drop_table("team_shared_answers")
