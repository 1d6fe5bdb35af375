"""Step records of control flow: the item of a ``for_each`` instance, and why a record was skipped.

``item_index`` names the instance (``summarize[7]``) of a mapped step; the step's collected list is
a record of its own with no index. ``skip_reason`` says why a ``when`` condition (or a skipped
upstream step) kept a step from running. Both are NULL on every record written before.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS: dict[str, type[sa.Integer] | type[sa.Text]] = {"item_index": sa.Integer, "skip_reason": sa.Text}


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("step_records")}
    with op.batch_alter_table("step_records") as batch:
        for name, kind in COLUMNS.items():
            if name not in present:
                batch.add_column(sa.Column(name, kind(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("step_records") as batch:
        for name in reversed(list(COLUMNS)):
            batch.drop_column(name)
