"""The route distribution in the analytics summary: per step and day, the runs a condition skipped it in.

``skipped_runs`` counts the runs whose record of the step is ``skipped`` with a reason (its ``when`` was
false, or an upstream step was skipped); with ``runs`` it says how often a conditional step ran. Every
summarised day so far predates conditions, so 0 is right for them.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("analytics_days")}
    if "skipped_runs" not in present:
        with op.batch_alter_table("analytics_days") as batch:
            batch.add_column(sa.Column("skipped_runs", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("analytics_days") as batch:
        batch.drop_column("skipped_runs")
