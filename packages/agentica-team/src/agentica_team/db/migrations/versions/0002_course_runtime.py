"""A course chooses the runtime of its new sessions: ``team_courses.runtime`` ("" = the
server's ``agent_runtime``).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("team_courses") as batch:
        batch.add_column(
            sa.Column("runtime", sa.String(length=16), server_default="", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("team_courses") as batch:
        batch.drop_column("runtime")
