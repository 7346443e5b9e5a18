"""The SQL schema of ``SQLStorage`` as SQLAlchemy Core tables (SQLite and PostgreSQL).

- ``sessions``: one row per (user, session): title, times, summary, state (JSON text),
  ``run_count`` (the sequence number of its last run), ``revision`` (bumped by every save), and
  its lineage: ``parent_id``, ``forked_at`` (runs shared with the parent), ``root_id``.
- ``runs``: one row per run, ``record`` is ``codec.encode_run`` text, ``undo`` its undo patch
  (``branching.py``; NULL for runs stored before it existed); key (user, session, seq).
- ``variables``: the per-session variable index (key, summary, size, time) pointing at a blob.
- ``blobs``: variable values (JSON text) keyed by their SHA-256: identical values stored once.

SQLAlchemy is imported at import time (``agentica.storage.sql`` imports this module lazily, off
the event loop); the migrations in ``migrations/versions`` create exactly these tables (tested).
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["VERSION_TABLE", "blobs", "id_type", "metadata", "runs", "sessions", "variables"]

VERSION_TABLE = "agentica_schema_version"

metadata = sa.MetaData()


def id_type() -> sa.types.TypeEngine[str]:
    """Ids and keys: compared and ordered by code point (``COLLATE "C"`` on PostgreSQL)."""
    return sa.String(256).with_variant(sa.String(256, collation="C"), "postgresql")


sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("user_id", id_type(), primary_key=True),
    sa.Column("session_id", id_type(), primary_key=True),
    sa.Column("title", sa.Text(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Column("run_count", sa.Integer(), nullable=False),
    sa.Column("summary", sa.Text(), nullable=True),
    sa.Column("state", sa.Text(), nullable=False),
    sa.Column("revision", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("parent_id", id_type(), nullable=True),
    sa.Column("forked_at", sa.Integer(), nullable=True),
    sa.Column("root_id", id_type(), nullable=True),
    sa.Index("ix_sessions_user_updated", "user_id", "updated_at"),
    sa.Index("ix_sessions_user_root", "user_id", "root_id"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("user_id", id_type(), primary_key=True),
    sa.Column("session_id", id_type(), primary_key=True),
    sa.Column("seq", sa.Integer(), primary_key=True),
    sa.Column("run_id", sa.Text(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", sa.Double(), nullable=False),
    sa.Column("record", sa.Text(), nullable=False),
    sa.Column("undo", sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(
        ["user_id", "session_id"],
        ["sessions.user_id", "sessions.session_id"],
        name="fk_runs_session",
        ondelete="CASCADE",
    ),
)

blobs = sa.Table(
    "blobs",
    metadata,
    sa.Column("hash", sa.String(64), primary_key=True),
    sa.Column("data", sa.Text(), nullable=False),
    sa.Column("size", sa.Integer(), nullable=False),
)

variables = sa.Table(
    "variables",
    metadata,
    sa.Column("user_id", id_type(), primary_key=True),
    sa.Column("session_id", id_type(), primary_key=True),
    sa.Column("key", id_type(), primary_key=True),
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
    sa.Index("ix_variables_blob_hash", "blob_hash"),
)
