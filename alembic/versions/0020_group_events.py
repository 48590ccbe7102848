"""Outbox rows that carry no message: a group's membership events.

A group's home instance tells every member instance of each membership change (join, leave,
kick, role, rename, archive) through the one outbox, in order with the group's messages. Such
an event is not a message, so ``federation_outbox.message_id`` may be NULL (every reader of a
message's deliveries joins ``messages`` and so never sees these rows; retention deletes them
like an edit or delete notice once delivered).

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Let ``federation_outbox.message_id`` be NULL."""
    op.execute("ALTER TABLE federation_outbox ALTER COLUMN message_id DROP NOT NULL")


def downgrade() -> None:
    """Drop the rows without a message, then require one again."""
    op.execute("DELETE FROM federation_outbox WHERE message_id IS NULL")
    op.execute("ALTER TABLE federation_outbox ALTER COLUMN message_id SET NOT NULL")
