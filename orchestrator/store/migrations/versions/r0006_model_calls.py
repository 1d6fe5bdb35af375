"""Every model call as a row of its own: ``model_calls``.

A step record keeps one LLM record per attempt, which left out the calls judge gates, edit
validation and a step's own code made. Each call now has a row with its purpose, owner (step,
attempt, gate), usage, cost and timing, so totals count all of them. Additive: an existing
database gets the empty table and its step records' model usage is copied in as ``step`` calls
(one row per executed LLM attempt, its usage summed as before), so old runs keep their totals.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "model_calls" in sa.inspect(op.get_bind()).get_table_names():  # an adopted database may have it already
        return
    table = op.create_table(
        "model_calls",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_pk", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("record_id", sa.Integer(), nullable=True),
        sa.Column("step_id", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("purpose", sa.String(), nullable=False),
        sa.Column("gate", sa.String(), nullable=True),
        sa.Column("provider", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("messages", sa.Text(), nullable=True),
        sa.Column("response", sa.Text(), nullable=True),
    )
    op.create_index("ix_model_calls_run", "model_calls", ["run_pk"])
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, run_pk, step_id, step_type, attempt, started_at, ended_at, llm "
                                "FROM step_records WHERE llm IS NOT NULL AND origin = 'executed'")).all()
    copied = []
    for row in rows:
        record = json.loads(row.llm)
        usage = record.get("usage") or {}
        copied.append({
            "run_pk": row.run_pk, "record_id": row.id, "step_id": row.step_id, "attempt": row.attempt,
            "purpose": "critic" if row.step_type == "critic" else "step", "gate": None,
            "provider": str(record.get("provider") or ""), "model": str(record.get("model") or ""),
            "started_at": row.started_at, "ended_at": row.started_at + float(record.get("latency") or 0.0),
            "input_tokens": int(usage.get("input_tokens") or 0), "output_tokens": int(usage.get("output_tokens") or 0),
            "cost": record.get("cost"), "finish_reason": record.get("finish_reason"), "error": None,
            "messages": json.dumps(record.get("messages")), "response": record.get("response")})
    if copied:
        op.bulk_insert(table, copied)


def downgrade() -> None:
    op.drop_index("ix_model_calls_run", table_name="model_calls")
    op.drop_table("model_calls")
