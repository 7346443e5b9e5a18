"""The SQL tables of ``SQLWorkflowStore`` (SQLAlchemy Core; SQLite and PostgreSQL).

- ``workflow_runs``: one row per run: workflow name, status, revision (bumped by every save)
  and the engine's JSON record (state, next steps, errors, recorded side effects).
- ``workflow_steps``: one row per step execution (key, attempt, outcome, changed fields).
- ``workflow_schema_version``: one row, the version of these tables.

Imported lazily, after SQLAlchemy is loaded off the event loop.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["SCHEMA_VERSION", "metadata", "schema_version", "workflow_runs", "workflow_steps"]

SCHEMA_VERSION = 1

metadata = sa.MetaData()


def _id() -> sa.types.TypeEngine[str]:
    return sa.String(256).with_variant(sa.String(256, collation="C"), "postgresql")


workflow_runs = sa.Table(
    "workflow_runs",
    metadata,
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("workflow", _id(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("revision", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Column("record", sa.Text(), nullable=False),
    sa.Index("ix_workflow_runs_workflow_status", "workflow", "status", "updated_at"),
)

workflow_steps = sa.Table(
    "workflow_steps",
    metadata,
    sa.Column("run_id", _id(), primary_key=True),
    sa.Column("seq", sa.Integer(), primary_key=True),
    sa.Column("step", _id(), nullable=False),
    sa.Column("key", sa.Text(), nullable=False),
    sa.Column("iteration", sa.Integer(), nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("started_at", sa.Double(), nullable=False),
    sa.Column("finished_at", sa.Double(), nullable=False),
    sa.Column("changes", sa.Text(), nullable=False),
    sa.Column("error", sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(
        ["run_id"], ["workflow_runs.run_id"], name="fk_workflow_steps_run", ondelete="CASCADE"
    ),
)

schema_version = sa.Table(
    "workflow_schema_version",
    metadata,
    sa.Column("version", sa.Integer(), nullable=False),
)
