"""Step records of loops: the iteration of a ``repeat:`` step each record belongs to.

``iteration`` (1-based) names the unit ``improve#2`` of a step that runs again until its condition
holds; the record holding the loop's result has none, as a plain step's records have none. NULL on
every record written before.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    present = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("step_records")}
    if "iteration" not in present:
        with op.batch_alter_table("step_records") as batch:
            batch.add_column(sa.Column("iteration", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("step_records") as batch:
        batch.drop_column("iteration")
