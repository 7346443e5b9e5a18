"""The service's tables (SQLAlchemy Core, SQLite and PostgreSQL), all prefixed ``team_``.

The framework's own tables (``sessions``, ``runs``, ``variables``, ``blobs``: agent sessions and
workspaces) live in the same database under their own migrations. Times are Unix seconds
(``Double``); money is integer micro-dollars (``*_micros``); JSON is text. Ids are random strings
made by ``new_id``. ``migrations/versions`` creates exactly these tables (tested).
"""

from __future__ import annotations

import secrets
from typing import Any

import sqlalchemy as sa

__all__ = [
    "VERSION_TABLE",
    "agent_sessions",
    "audit",
    "audit_heads",
    "budget_usage",
    "budgets",
    "courses",
    "login_failures",
    "members",
    "metadata",
    "new_id",
    "rate_windows",
    "reservations",
    "session_events",
    "shared_answers",
    "tokens",
    "usage_daily",
    "users",
    "web_sessions",
]

VERSION_TABLE = "team_schema_version"

metadata = sa.MetaData()


def new_id(prefix: str) -> str:
    """A random id such as ``u_3hF0...`` (prefix, underscore, 16 URL-safe characters)."""
    return f"{prefix}_{secrets.token_urlsafe(12)}"


def _id(name: str = "id", *args: sa.ForeignKey, **kwargs: Any) -> sa.Column[str]:
    return sa.Column(name, sa.String(64), *args, **kwargs)


users = sa.Table(
    "team_users",
    metadata,
    _id(primary_key=True),
    sa.Column("email", sa.String(320), nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),  # admin | teacher | student
    sa.Column("password_hash", sa.Text(), nullable=True),
    sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true()),
    sa.Column("created_at", sa.Double(), nullable=False),
)

courses = sa.Table(
    "team_courses",
    metadata,
    _id(primary_key=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("title", sa.String(500), nullable=False),
    _id("owner_id", sa.ForeignKey("team_users.id"), nullable=False),
    sa.Column("model", sa.String(200), nullable=True),  # None: the server's default model
    sa.Column("model_base_url", sa.Text(), nullable=True),
    sa.Column("model_api_key", sa.Text(), nullable=True),  # never leaves the server
    sa.Column("max_output_tokens", sa.Integer(), nullable=True),
    sa.Column("created_at", sa.Double(), nullable=False),
    # the runtime of the course's new sessions: "" (the server's agent_runtime), "serial", ...
    sa.Column("runtime", sa.String(16), nullable=False, server_default=""),
)

members = sa.Table(
    "team_members",
    metadata,
    _id("course_id", sa.ForeignKey("team_courses.id", ondelete="CASCADE"), primary_key=True),
    _id("user_id", sa.ForeignKey("team_users.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),  # teacher | student
    sa.Column("added_at", sa.Double(), nullable=False),
    sa.Index("ix_team_members_user", "user_id"),
)

tokens = sa.Table(
    "team_tokens",
    metadata,
    _id(primary_key=True),
    _id("user_id", sa.ForeignKey("team_users.id", ondelete="CASCADE"), nullable=False),
    # set: the token acts only in this course (tokens made by provisioning); None: everywhere
    _id("course_id", sa.ForeignKey("team_courses.id", ondelete="CASCADE"), nullable=True),
    sa.Column("hash", sa.String(64), nullable=False, unique=True),  # SHA-256 of the token
    sa.Column("hint", sa.String(16), nullable=False),  # the first characters, for listings
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("expires_at", sa.Double(), nullable=False),
    sa.Column("revoked_at", sa.Double(), nullable=True),
    sa.Column("last_used_at", sa.Double(), nullable=True),
    sa.Index("ix_team_tokens_user", "user_id"),
)

web_sessions = sa.Table(
    "team_web_sessions",
    metadata,
    sa.Column("hash", sa.String(64), primary_key=True),  # SHA-256 of the cookie value
    _id("user_id", sa.ForeignKey("team_users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("expires_at", sa.Double(), nullable=False),
)

login_failures = sa.Table(
    "team_login_failures",
    metadata,
    sa.Column("key", sa.String(400), primary_key=True),  # "email:..." or "addr:..."
    sa.Column("window", sa.BigInteger(), primary_key=True),  # Unix minute
    sa.Column("count", sa.Integer(), nullable=False),
)

budgets = sa.Table(
    "team_budgets",
    metadata,
    _id(primary_key=True),
    _id("course_id", sa.ForeignKey("team_courses.id", ondelete="CASCADE"), nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),  # course | student
    # "" with scope student: every student of the course without a budget of their own
    sa.Column("user_id", sa.String(64), nullable=False, server_default=""),
    sa.Column("period", sa.String(16), nullable=False),  # day | week | course
    sa.Column("max_tokens", sa.BigInteger(), nullable=True),
    sa.Column("max_cost_micros", sa.BigInteger(), nullable=True),
    sa.Column("requests_per_minute", sa.Integer(), nullable=True),
    sa.Column("max_concurrent", sa.Integer(), nullable=True),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.UniqueConstraint("course_id", "scope", "user_id", name="uq_team_budgets_target"),
)

budget_usage = sa.Table(
    "team_budget_usage",
    metadata,
    _id("budget_id", sa.ForeignKey("team_budgets.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("subject", sa.String(64), primary_key=True),  # user id, "" for a course budget
    sa.Column("period_key", sa.String(32), primary_key=True),  # 2026-11-24 | 2026-W48 | all
    sa.Column("used_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("used_cost_micros", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("reserved_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("reserved_cost_micros", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("in_flight", sa.Integer(), nullable=False, server_default="0"),
)

rate_windows = sa.Table(
    "team_rate_windows",
    metadata,
    sa.Column("budget_id", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(64), primary_key=True),
    sa.Column("window", sa.BigInteger(), primary_key=True),  # Unix minute
    sa.Column("count", sa.Integer(), nullable=False),
)

reservations = sa.Table(
    "team_reservations",
    metadata,
    _id(primary_key=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("course_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("entries", sa.Text(), nullable=False),  # JSON: the usage rows and amounts held
    sa.Column("state", sa.String(16), nullable=False),  # open | settled | released | expired
    sa.Index("ix_team_reservations_state", "state", "created_at"),
)

usage_daily = sa.Table(
    "team_usage_daily",
    metadata,
    sa.Column("course_id", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(64), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),  # YYYY-MM-DD (UTC)
    sa.Column("source", sa.String(16), primary_key=True),  # gateway | agent
    sa.Column("requests", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("input_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("cost_micros", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("cached_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("compaction_saved_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Index("ix_team_usage_daily_day", "course_id", "day"),
)

audit = sa.Table(
    "team_audit",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    sa.Column("chain", sa.String(64), nullable=False),  # course id, "" for server-wide records
    sa.Column("seq", sa.BigInteger(), nullable=False),
    sa.Column("ts", sa.Double(), nullable=False),
    sa.Column("actor_id", sa.String(64), nullable=False),  # "" for the server itself
    sa.Column("kind", sa.String(64), nullable=False),
    sa.Column("subject", sa.String(200), nullable=False),
    sa.Column("data", sa.Text(), nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.UniqueConstraint("chain", "seq", name="uq_team_audit_chain_seq"),
    sa.Index("ix_team_audit_actor", "actor_id", "ts"),
    sa.Index("ix_team_audit_kind", "chain", "kind", "ts"),
    sa.Index("ix_team_audit_ts", "chain", "ts"),
)

audit_heads = sa.Table(
    "team_audit_heads",
    metadata,
    sa.Column("chain", sa.String(64), primary_key=True),
    sa.Column("seq", sa.BigInteger(), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)

agent_sessions = sa.Table(
    "team_agent_sessions",
    metadata,
    _id(primary_key=True),
    _id("user_id", sa.ForeignKey("team_users.id", ondelete="CASCADE"), nullable=False),
    _id("course_id", sa.ForeignKey("team_courses.id", ondelete="CASCADE"), nullable=False),
    sa.Column("title", sa.String(500), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Column("last_seq", sa.BigInteger(), nullable=False, server_default="0"),
    # "" (the server's agent_runtime), "serial", "batch" or "lanes"
    sa.Column("runtime", sa.String(16), nullable=False, server_default=""),
    sa.Index("ix_team_agent_sessions_user", "user_id", "updated_at"),
    sa.Index("ix_team_agent_sessions_course", "course_id", "updated_at"),
)

session_events = sa.Table(
    "team_session_events",
    metadata,
    _id(
        "session_id", sa.ForeignKey("team_agent_sessions.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("ts", sa.Double(), nullable=False),
    # message (a student's instruction; state in `state`) | run (a run event) | status
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=True),  # messages: pending | running | done | ...
    sa.Column("data", sa.Text(), nullable=False),
    sa.Index("ix_team_session_events_pending", "kind", "state"),
)

shared_answers = sa.Table(
    "team_shared_answers",
    metadata,
    _id(primary_key=True),
    _id("course_id", sa.ForeignKey("team_courses.id", ondelete="CASCADE"), nullable=False),
    sa.Column("question", sa.Text(), nullable=False),
    sa.Column("answer", sa.Text(), nullable=False),
    sa.Column("tokens", sa.BigInteger(), nullable=False),  # what writing the answer again costs
    _id("shared_by", nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("offered", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("tokens_saved", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Index("ix_team_shared_answers_course", "course_id", "created_at"),
)
