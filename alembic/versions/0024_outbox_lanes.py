"""Outbox lanes and peers' batch capability.

- ``federation_outbox.lane``: the ordering key of a delivery (the conversation it belongs to).
  Order holds per (destination, lane), so deliveries of different conversations to one
  destination may be in flight at once. NULL (rows queued before this revision) is one lane
  of its own per destination.
- ``federation_destinations.batch_max_items`` / ``batch_max_bytes`` / ``card_checked_at``:
  what the destination's Agent Card declares of the JSON-RPC batch extension
  (``urn:confer:a2a:ext:jsonrpc-batch:v1``; NULL: not declared) and when it was last read.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

UPGRADE = (
    "ALTER TABLE federation_outbox ADD COLUMN lane VARCHAR(64)",
    """
    CREATE INDEX idx_outbox_lane ON federation_outbox (destination, lane, id)
      WHERE delivered_at IS NULL AND failed_at IS NULL
    """,
    "ALTER TABLE federation_destinations ADD COLUMN batch_max_items INTEGER",
    "ALTER TABLE federation_destinations ADD COLUMN batch_max_bytes INTEGER",
    "ALTER TABLE federation_destinations ADD COLUMN card_checked_at TIMESTAMPTZ",
)

DOWNGRADE = (
    "ALTER TABLE federation_destinations DROP COLUMN card_checked_at",
    "ALTER TABLE federation_destinations DROP COLUMN batch_max_bytes",
    "ALTER TABLE federation_destinations DROP COLUMN batch_max_items",
    "DROP INDEX idx_outbox_lane",
    "ALTER TABLE federation_outbox DROP COLUMN lane",
)


def upgrade() -> None:
    """Add the columns."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them (every delivery is ordered per destination again)."""
    for statement in DOWNGRADE:
        op.execute(statement)
