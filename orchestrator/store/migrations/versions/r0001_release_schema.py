"""The schema of the first release with migrations (commit 27d3efc), as ``tables.py`` declared it.

Databases written by that release have these tables but no ``alembic_version``; the orchestrator
stamps them with this revision and upgrades them from here.

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
        "workflows",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("source", sa.String(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("name", "content_hash"),
    )
    op.create_index("ix_workflows_name", "workflows", ["name"])

    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(), nullable=False, unique=True),
        sa.Column("workflow_id", sa.Integer(), sa.ForeignKey("workflows.id"), nullable=False),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("inputs", sa.Text(), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("parent_run_id", sa.String(), nullable=True),
        sa.Column("parent_step", sa.String(), nullable=True),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("heartbeat_at", sa.Float(), nullable=True),
        sa.Column("trace_id", sa.String(), nullable=True),
        sa.Column("lease_token", sa.String(), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_runs_workflow_id", "runs", ["workflow_id"])
    op.create_index("ix_runs_workflow", "runs", ["workflow"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_parent_run_id", "runs", ["parent_run_id"])

    op.create_table(
        "step_records",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("workflow_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(), nullable=False),
        sa.Column("step_type", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=False),
        sa.Column("inputs", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("error_type", sa.String(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("consumed", sa.Text(), nullable=True),
        sa.Column("injected", sa.Text(), nullable=True),
        sa.Column("llm", sa.Text(), nullable=True),
    )
    op.create_index("ix_step_records_run_step", "step_records", ["run_pk", "step_id"])
    op.create_index("ix_step_records_workflow_step_time", "step_records", ["workflow_id", "step_id", "started_at"])

    op.create_table(
        "gate_results",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("record_id", sa.Integer(), sa.ForeignKey("step_records.id"), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(), nullable=False),
        sa.Column("gate", sa.String(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("details", sa.Text(), nullable=True),
        sa.Column("severity", sa.String(), nullable=False),
        sa.Column("duration", sa.Float(), nullable=False),
    )
    op.create_index("ix_gate_results_record_id", "gate_results", ["record_id"])
    op.create_index("ix_gate_results_run_pk", "gate_results", ["run_pk"])

    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("record_id", sa.Integer(), sa.ForeignKey("step_records.id"), nullable=False),
        sa.Column("step_id", sa.String(), nullable=False),
        sa.Column("decision", sa.String(), nullable=False),
        sa.Column("reviewer", sa.String(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("output_before", sa.Text(), nullable=True),
        sa.Column("output_after", sa.Text(), nullable=True),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("record_id", name="uq_reviews_record"),
    )
    op.create_index("ix_reviews_run_pk", "reviews", ["run_pk"])

    op.create_table(
        "outcomes",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("termination", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("reviewer", sa.String(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_outcomes_run_pk", "outcomes", ["run_pk"])

    op.create_table(
        "attributions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("outcome_id", sa.Integer(), sa.ForeignKey("outcomes.id"), nullable=True),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("step_credits", sa.Text(), nullable=False),
        sa.Column("agent_credits", sa.Text(), nullable=False),
        sa.Column("blamed_step", sa.String(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("cost", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_attributions_run_pk", "attributions", ["run_pk"])


def downgrade() -> None:
    for table in ("attributions", "outcomes", "reviews", "gate_results", "step_records", "runs", "workflows"):
        op.drop_table(table)
