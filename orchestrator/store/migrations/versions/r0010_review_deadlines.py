"""Review deadlines: a paused run's earliest ``review_timeout``, so workers query the pauses that are due
instead of reading every paused run on each poll.

``runs.review_deadline`` (indexed) is written with a run's pause; NULL when none of its pauses times
out. Runs paused before this revision get 0 (due at once): a worker looks at each of them once, decides
what timed out meanwhile and writes the real deadline, or NULL.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "review_deadline" not in {c["name"] for c in inspector.get_columns("runs")}:
        with op.batch_alter_table("runs") as batch:
            batch.add_column(sa.Column("review_deadline", sa.Float(), nullable=True))
    if "ix_runs_review_deadline" not in {i["name"] for i in inspector.get_indexes("runs")}:
        op.create_index("ix_runs_review_deadline", "runs", ["review_deadline"])
    op.execute("UPDATE runs SET review_deadline = 0 WHERE status = 'paused' AND review_deadline IS NULL")


def downgrade() -> None:
    op.drop_index("ix_runs_review_deadline", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("review_deadline")
