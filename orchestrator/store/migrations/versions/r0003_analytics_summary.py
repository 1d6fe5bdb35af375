"""The analytics summary: per-day counts of each step, outcome state and trajectory, kept up to date by reads.

``stats``, ``report`` and the dashboard aggregated every step record of a workflow on each call
(3.5 s over a million records on SQLite, which sorts every row for a GROUP BY). These tables hold
the same counts per step and UTC day; the first read after this upgrade fills them from the
existing records, and each later read adds only what was written since
(:mod:`orchestrator.store.sql_summary`). The tables are created empty, so the upgrade itself is
instant whatever the size of the database; nothing else changes and no existing row is touched.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COUNTERS = ("runs", "gated_runs", "gate_passes", "attempts", "failures", "gate_failures", "retries", "model_records",
            "model_calls", "input_tokens", "output_tokens", "priced_records")


def upgrade() -> None:
    # a database a development build created with every declared table is adopted: make only what is missing
    existing = set(sa.inspect(op.get_bind()).get_table_names())

    def create_table(name: str, *columns: Any, **options: Any) -> None:
        if name not in existing:
            op.create_table(name, *columns, **options)

    def create_index(name: str, table: str, columns: list[str]) -> None:
        if table not in existing:
            op.create_index(name, table, columns)

    create_table(
        "analytics_state",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("runs", sa.BigInteger(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("outcomes", sa.BigInteger(), nullable=False),
        sa.Column("attributions", sa.BigInteger(), nullable=False),
    )
    create_table(
        "analytics_runs",
        sa.Column("run_pk", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("incorrect", sa.Boolean(), nullable=False),
        sa.Column("blamed_step", sa.String(), nullable=True),
        sa.Column("method", sa.String(), nullable=True),
    )
    create_index("ix_analytics_runs_workflow_start", "analytics_runs", ["workflow", "started_at"])
    create_table(
        "analytics_series",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("step_id", sa.String(), nullable=False),
        sa.Column("repeated", sa.Integer(), nullable=False),
        sa.Column("varied", sa.Integer(), nullable=False),
        sa.Column("not_covered", sa.Integer(), nullable=False),
        sa.Column("first_output", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("workflow", "step_id", name="uq_analytics_series_step"),
    )
    create_table(
        "analytics_days",
        sa.Column("series", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("day", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("first_record", sa.BigInteger(), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in COUNTERS),
        sa.Column("cost", sa.Float(), nullable=False),
        sqlite_with_rowid=False,
    )
    create_table(
        "analytics_inputs",
        sa.Column("series", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("inputs", sa.String(), primary_key=True),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("output", sa.String(), nullable=True),
        sa.Column("varied", sa.Boolean(), nullable=False),
        sqlite_with_rowid=False,
    )
    create_table(
        "analytics_outcomes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("day", sa.Integer(), nullable=False),
        sa.Column("incorrect", sa.Boolean(), nullable=False),
        sa.Column("blamed_step", sa.String(), nullable=True),
        sa.Column("method", sa.String(), nullable=True),
        sa.Column("runs", sa.BigInteger(), nullable=False),
    )
    create_index("ix_analytics_outcomes_workflow_day", "analytics_outcomes", ["workflow", "day"])
    create_table(
        "analytics_trajectories",
        sa.Column("workflow", sa.String(), primary_key=True),
        sa.Column("steps", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("attempts", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("runs", sa.BigInteger(), nullable=False),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_index("ix_analytics_outcomes_workflow_day", table_name="analytics_outcomes")
    op.drop_index("ix_analytics_runs_workflow_start", table_name="analytics_runs")
    for table in ("analytics_trajectories", "analytics_outcomes", "analytics_inputs", "analytics_days",
                  "analytics_series", "analytics_runs", "analytics_state"):
        op.drop_table(table)
