"""One index on gate verdicts, by run and record, instead of one by run and one by record.

Every gated step's commit writes its verdict rows and a page of each index on them: with two
indexes, a step with one gate wrote three more pages than a step without (measured: 58 µs per
insert and commit of a record with one verdict, 38 µs without the two indexes, 44-50 µs with one).
Every reader of verdicts knows the run: a run's records read their verdicts by run, and the
lookups by record (the triage's first failing reason, analytics of records written before
revision 0002) come from a step record, whose run is known. ``(run_pk, record_id)`` serves both.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

CREATED = ("ix_gate_results_run_record", ["run_pk", "record_id"])
DROPPED = {
    "ix_gate_results_record_id": ["record_id"],
    "ix_gate_results_run_pk": ["run_pk"],
}


def upgrade() -> None:
    present = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("gate_results")}
    name, columns = CREATED
    if name not in present:  # an adopted database may have it already
        op.create_index(name, "gate_results", columns)
    for dropped in DROPPED:
        if dropped in present:
            op.drop_index(dropped, table_name="gate_results")


def downgrade() -> None:
    for name, columns in DROPPED.items():
        op.create_index(name, "gate_results", columns)
    op.drop_index(CREATED[0], table_name="gate_results")
