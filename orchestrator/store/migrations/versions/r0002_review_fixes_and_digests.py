"""Columns and an index added after the release: digests, gate counts, superseded records, tracebacks,
side-effect consent, reference answers, evaluator reasons.

Databases made by development builds between the release and this revision may already have some
of these (those builds created every declared column), so each one is added only where missing.

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

NEW_COLUMNS: dict[str, tuple[sa.Column[object], ...]] = {
    "runs": (
        sa.Column("reference", sa.Text(), nullable=True),
    ),
    "step_records": (
        sa.Column("inputs_digest", sa.String(), nullable=True),
        sa.Column("output_digest", sa.String(), nullable=True),
        sa.Column("gate_count", sa.Integer(), nullable=True),
        sa.Column("gates_failed", sa.Integer(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.Column("superseded_by", sa.Integer(), nullable=True),
    ),
    "reviews": (
        sa.Column("rerun_side_effects", sa.Boolean(), nullable=True),
    ),
    "outcomes": (
        sa.Column("evaluator_reason", sa.Text(), nullable=True),
    ),
}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, columns in NEW_COLUMNS.items():
        present = {c["name"] for c in inspector.get_columns(table)}
        missing = [column for column in columns if column.name not in present]
        if missing:
            with op.batch_alter_table(table) as batch:
                for column in missing:
                    batch.add_column(column)
    if "ix_step_records_run_started" not in {i["name"] for i in inspector.get_indexes("step_records")}:
        op.create_index("ix_step_records_run_started", "step_records", ["run_pk", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_step_records_run_started", table_name="step_records")
    for table, columns in NEW_COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.drop_column(column.name)
