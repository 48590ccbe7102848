"""Find a message's outbox rows by index (edits, deletes and their erasure look them up).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Index ``federation_outbox.message_id``."""
    op.execute("CREATE INDEX idx_outbox_message ON federation_outbox (message_id)")


def downgrade() -> None:
    """Drop it."""
    op.execute("DROP INDEX idx_outbox_message")
