"""Indexes and a marker for the retention worker (gateway/workers/retention.py).

- ``federation_inbox.message_deleted_at``: set when our copy of the message is deleted, so the
  worker finds the inbox rows that only de-duplicate any more without scanning live mappings.
  Rows of messages deleted before this migration are marked here.
- ``idx_inbox_message``: the inbox by our message id (the marker is set by it, and
  ``get_remote_id`` reads by it).
- ``idx_inbox_released``: inbox rows of deleted messages, by arrival.
- ``idx_outbox_change_delivered``: delivered outbox rows that are not a message's original send
  (edits, deletes, decisions), by delivery time; ``idx_outbox_failed``: failed rows by failure.

``messages`` and ``permissions`` are tables of the spec's data model and keep its indexes.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

UPGRADE = (
    "ALTER TABLE federation_inbox ADD COLUMN message_deleted_at TIMESTAMPTZ",
    "CREATE INDEX idx_inbox_message ON federation_inbox (message_id)",
    """UPDATE federation_inbox i SET message_deleted_at = m.deleted_at
         FROM messages m WHERE m.id = i.message_id AND m.deleted_at IS NOT NULL""",
    """CREATE INDEX idx_inbox_released ON federation_inbox (created_at)
         WHERE message_deleted_at IS NOT NULL""",
    """CREATE INDEX idx_outbox_change_delivered ON federation_outbox (delivered_at)
         WHERE delivered_at IS NOT NULL
           AND (payload_json #>> '{message,messageId}') IS DISTINCT FROM message_id::text""",
    "CREATE INDEX idx_outbox_failed ON federation_outbox (failed_at) WHERE failed_at IS NOT NULL",
)

DOWNGRADE = (
    "DROP INDEX idx_outbox_failed",
    "DROP INDEX idx_outbox_change_delivered",
    "DROP INDEX idx_inbox_released",
    "DROP INDEX idx_inbox_message",
    "ALTER TABLE federation_inbox DROP COLUMN message_deleted_at",
)


def upgrade() -> None:
    """Add the inbox marker and the retention indexes."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them."""
    for statement in DOWNGRADE:
        op.execute(statement)
