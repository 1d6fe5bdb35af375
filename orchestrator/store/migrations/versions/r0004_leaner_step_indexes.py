"""Leaner step-record indexes: one per-run index instead of two, and none by workflow and time.

Every index on ``step_records`` is written by every step's commit (a page of the write-ahead log
each) and stored for every record. Two of the three served queries that no longer exist or that a
narrower index serves as well:

- ``(workflow_id, step_id, started_at)`` was read by the first release's ``stats``; analytics now
  read their summary tables and the records of one run at a time (revision 0003).
- ``(run_pk, step_id)`` and ``(run_pk, started_at)`` both answer "the records of one run";
  ``(run_pk, step_id, started_at)`` answers both (a step's records in a run, and a run's earliest
  start from the index alone, a run having a few dozen records).

Together: about 45 bytes less per stored step, and one index page fewer per commit.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

DROPPED = {
    "ix_step_records_run_step": ["run_pk", "step_id"],
    "ix_step_records_workflow_step_time": ["workflow_id", "step_id", "started_at"],
    "ix_step_records_run_started": ["run_pk", "started_at"],
}


def upgrade() -> None:
    present = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("step_records")}
    if "ix_step_records_run_step_started" not in present:  # an adopted database may have it already
        op.create_index("ix_step_records_run_step_started", "step_records", ["run_pk", "step_id", "started_at"])
    for name in DROPPED:
        if name in present:
            op.drop_index(name, table_name="step_records")


def downgrade() -> None:
    for name, columns in DROPPED.items():
        op.create_index(name, "step_records", columns)
    op.drop_index("ix_step_records_run_step_started", table_name="step_records")
