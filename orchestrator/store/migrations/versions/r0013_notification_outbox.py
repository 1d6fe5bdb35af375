"""The notification outbox: ``notifications``, written with the pause or end that causes a notification.

A run that pauses for a person (or fails, or succeeds) tells the workflow's ``notify:`` targets. The
notification is a row written in the transaction of the pause itself, so a process killed right after
the pause leaves it for the next sender; senders claim rows (``claimed_by``, ``claimed_until``) so that
two workers never both deliver one at once, and retry it until ``status`` is delivered or failed.
Additive: an existing database gets the empty table.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "notifications" in sa.inspect(op.get_bind()).get_table_names():  # an adopted database may have it already
        return
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("idempotency_key", sa.String(), nullable=False, unique=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("workflow", sa.String(), nullable=False),
        sa.Column("event", sa.String(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("next_try_at", sa.Float(), nullable=False),
        sa.Column("delivered_at", sa.Float(), nullable=True),
        sa.Column("claimed_by", sa.String(), nullable=True),
        sa.Column("claimed_until", sa.Float(), nullable=True),
    )
    op.create_index("ix_notifications_due", "notifications", ["status", "next_try_at"])
    op.create_index("ix_notifications_run", "notifications", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_notifications_run", table_name="notifications")
    op.drop_index("ix_notifications_due", table_name="notifications")
    op.drop_table("notifications")
