"""The first schema of the team service: accounts, courses, tokens, budgets, audit, sessions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "team_audit",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("chain", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Double(), nullable=False),
        sa.Column("actor_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("chain", "seq", name="uq_team_audit_chain_seq"),
    )
    op.create_index("ix_team_audit_actor", "team_audit", ["actor_id", "ts"], unique=False)
    op.create_index("ix_team_audit_kind", "team_audit", ["chain", "kind", "ts"], unique=False)
    op.create_index("ix_team_audit_ts", "team_audit", ["chain", "ts"], unique=False)
    op.create_table(
        "team_audit_heads",
        sa.Column("chain", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("chain"),
    )
    op.create_table(
        "team_login_failures",
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("window", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "window"),
    )
    op.create_table(
        "team_rate_windows",
        sa.Column("budget_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("window", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("budget_id", "user_id", "window"),
    )
    op.create_table(
        "team_reservations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("course_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("entries", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_team_reservations_state", "team_reservations", ["state", "created_at"], unique=False
    )
    op.create_table(
        "team_usage_daily",
        sa.Column("course_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("requests", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cost_micros", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("compaction_saved_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("course_id", "user_id", "day", "source"),
    )
    op.create_index(
        "ix_team_usage_daily_day", "team_usage_daily", ["course_id", "day"], unique=False
    )
    op.create_table(
        "team_users",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=True),
        sa.Column("active", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_table(
        "team_courses",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("owner_id", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("model_base_url", sa.Text(), nullable=True),
        sa.Column("model_api_key", sa.Text(), nullable=True),
        sa.Column("max_output_tokens", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["team_users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "team_tokens",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("course_id", sa.String(length=64), nullable=True),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("hint", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.Column("last_used_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["course_id"], ["team_courses.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["team_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hash"),
    )
    op.create_index("ix_team_tokens_user", "team_tokens", ["user_id"], unique=False)
    op.create_table(
        "team_web_sessions",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["team_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("hash"),
    )
    op.create_table(
        "team_agent_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("course_id", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("runtime", sa.String(length=16), server_default="", nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["team_courses.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["team_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_team_agent_sessions_course",
        "team_agent_sessions",
        ["course_id", "updated_at"],
        unique=False,
    )
    op.create_index(
        "ix_team_agent_sessions_user",
        "team_agent_sessions",
        ["user_id", "updated_at"],
        unique=False,
    )
    op.create_table(
        "team_budgets",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("course_id", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=64), server_default="", nullable=False),
        sa.Column("period", sa.String(length=16), nullable=False),
        sa.Column("max_tokens", sa.BigInteger(), nullable=True),
        sa.Column("max_cost_micros", sa.BigInteger(), nullable=True),
        sa.Column("requests_per_minute", sa.Integer(), nullable=True),
        sa.Column("max_concurrent", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["team_courses.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("course_id", "scope", "user_id", name="uq_team_budgets_target"),
    )
    op.create_table(
        "team_members",
        sa.Column("course_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("added_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["course_id"], ["team_courses.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["team_users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("course_id", "user_id"),
    )
    op.create_index("ix_team_members_user", "team_members", ["user_id"], unique=False)
    op.create_table(
        "team_budget_usage",
        sa.Column("budget_id", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("period_key", sa.String(length=32), nullable=False),
        sa.Column("used_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("used_cost_micros", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("reserved_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("reserved_cost_micros", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("in_flight", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(["budget_id"], ["team_budgets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("budget_id", "subject", "period_key"),
    )
    op.create_table(
        "team_session_events",
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("ts", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["team_agent_sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", "seq"),
    )
    op.create_index(
        "ix_team_session_events_pending", "team_session_events", ["kind", "state"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_team_session_events_pending", table_name="team_session_events")
    op.drop_table("team_session_events")
    op.drop_table("team_budget_usage")
    op.drop_index("ix_team_members_user", table_name="team_members")
    op.drop_table("team_members")
    op.drop_table("team_budgets")
    op.drop_index("ix_team_agent_sessions_user", table_name="team_agent_sessions")
    op.drop_index("ix_team_agent_sessions_course", table_name="team_agent_sessions")
    op.drop_table("team_agent_sessions")
    op.drop_table("team_web_sessions")
    op.drop_index("ix_team_tokens_user", table_name="team_tokens")
    op.drop_table("team_tokens")
    op.drop_table("team_courses")
    op.drop_table("team_users")
    op.drop_index("ix_team_usage_daily_day", table_name="team_usage_daily")
    op.drop_table("team_usage_daily")
    op.drop_index("ix_team_reservations_state", table_name="team_reservations")
    op.drop_table("team_reservations")
    op.drop_table("team_rate_windows")
    op.drop_table("team_login_failures")
    op.drop_table("team_audit_heads")
    op.drop_index("ix_team_audit_ts", table_name="team_audit")
    op.drop_index("ix_team_audit_kind", table_name="team_audit")
    op.drop_index("ix_team_audit_actor", table_name="team_audit")
    op.drop_table("team_audit")
