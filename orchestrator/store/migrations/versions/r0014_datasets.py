"""Datasets and experiments: ``datasets``, ``dataset_examples``, ``experiments``, ``experiment_runs``.

Additive: four new, empty tables; no existing row changes. A dataset's examples are append-only (a new
version adds rows), an experiment links each of its runs (kind ``experiment``) to the example it ran.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TABLES = ("datasets", "dataset_examples", "experiments", "experiment_runs")


def upgrade() -> None:
    present = set(sa.inspect(op.get_bind()).get_table_names())
    if "datasets" not in present:
        op.create_table(
            "datasets",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("name", sa.String(), nullable=False, unique=True),
            sa.Column("version", sa.Integer(), nullable=False),
            sa.Column("description", sa.Text(), nullable=True),
            sa.Column("created_at", sa.Float(), nullable=False),
            sa.Column("updated_at", sa.Float(), nullable=False),
        )
    if "dataset_examples" not in present:
        op.create_table(
            "dataset_examples",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), nullable=False),
            sa.Column("version", sa.Integer(), nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("inputs", sa.Text(), nullable=False),
            sa.Column("reference", sa.Text(), nullable=True),
            sa.Column("label", sa.Text(), nullable=True),
            sa.Column("source_run_id", sa.String(), nullable=True),
            sa.Column("created_at", sa.Float(), nullable=False),
        )
        op.create_index("ix_dataset_examples_dataset_version", "dataset_examples", ["dataset_id", "version"])
    if "experiments" not in present:
        op.create_table(
            "experiments",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("name", sa.String(), nullable=False, unique=True),
            sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("datasets.id"), nullable=False),
            sa.Column("dataset_version", sa.Integer(), nullable=False),
            sa.Column("workflow_id", sa.Integer(), sa.ForeignKey("workflows.id"), nullable=False),
            sa.Column("workflow", sa.String(), nullable=False),
            sa.Column("status", sa.String(), nullable=False),
            sa.Column("params", sa.Text(), nullable=False),
            sa.Column("summary", sa.Text(), nullable=True),
            sa.Column("created_at", sa.Float(), nullable=False),
            sa.Column("updated_at", sa.Float(), nullable=False),
        )
    if "experiment_runs" not in present:
        op.create_table(
            "experiment_runs",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("experiment_id", sa.Integer(), sa.ForeignKey("experiments.id"), nullable=False),
            sa.Column("example_id", sa.Integer(), sa.ForeignKey("dataset_examples.id"), nullable=False),
            sa.Column("run_id", sa.String(), sa.ForeignKey("runs.run_id"), nullable=False),
            sa.Column("reused_steps", sa.Text(), nullable=False),
            sa.Column("saved_model_calls", sa.Integer(), nullable=False),
            sa.Column("saved_tokens", sa.BigInteger(), nullable=False),
            sa.Column("saved_cost", sa.Float(), nullable=False),
            sa.Column("saved_seconds", sa.Float(), nullable=False),
            sa.UniqueConstraint("experiment_id", "example_id", name="uq_experiment_runs_example"),
        )


def downgrade() -> None:
    op.drop_table("experiment_runs")
    op.drop_table("experiments")
    op.drop_index("ix_dataset_examples_dataset_version", table_name="dataset_examples")
    op.drop_table("dataset_examples")
    op.drop_table("datasets")
