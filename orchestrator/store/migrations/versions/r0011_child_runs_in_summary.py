"""Child runs in the analytics summary: a workflow's runs started by a parent's ``workflow:`` step count as its
traffic, like the runs started alone.

The summary left them out so far, and it only recomputes runs with something new, so it is emptied here: the
next ``stats`` or ``report`` summarises every record again (once, as after the upgrade that created it). No
table changes.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

SUMMARY = ("analytics_inputs", "analytics_days", "analytics_series", "analytics_outcomes", "analytics_trajectories",
           "analytics_runs", "analytics_state")


def upgrade() -> None:
    present = set(sa.inspect(op.get_bind()).get_table_names())
    for table in SUMMARY:
        if table in present:
            op.execute(sa.text(f"DELETE FROM {table}"))


def downgrade() -> None:
    """The summary of before counts fewer runs: emptied again, it is summarised again by the older code."""
    upgrade()
