"""Files across instances: an attachment a peer sent is fetched from the sender's instance.

A received ``file`` message gets its own ``attachments`` row at once, before its bytes are
here: ``source_url`` (the sender's signed-GET URL), ``origin_did`` (the sending peer) and
``fetch_state`` (``pending`` → ``fetched`` | ``failed``; NULL for a local upload), with the
retry schedule of the fetch worker (``fetch_attempts``, ``fetch_next_at``) and the last
``fetch_error``. ``storage_url`` is NULL until the bytes are stored; ``size_bytes`` and
``sha256`` hold what the sender declared, checked against the bytes on arrival.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

UPGRADE = (
    "ALTER TABLE attachments ALTER COLUMN storage_url DROP NOT NULL",
    """ALTER TABLE attachments
         ADD COLUMN source_url TEXT,
         ADD COLUMN origin_did TEXT,
         ADD COLUMN fetch_state VARCHAR(16),
         ADD COLUMN fetch_attempts INTEGER NOT NULL DEFAULT 0,
         ADD COLUMN fetch_next_at TIMESTAMPTZ,
         ADD COLUMN fetch_error TEXT""",
    """CREATE INDEX idx_attachments_fetch_due ON attachments (fetch_next_at)
         WHERE fetch_state = 'pending'""",
    "CREATE INDEX idx_attachments_message ON attachments (message_id)",
)

DOWNGRADE = (
    "DROP INDEX idx_attachments_message",
    "DROP INDEX idx_attachments_fetch_due",
    "DELETE FROM attachments WHERE storage_url IS NULL",
    """ALTER TABLE attachments
         DROP COLUMN fetch_error, DROP COLUMN fetch_next_at, DROP COLUMN fetch_attempts,
         DROP COLUMN fetch_state, DROP COLUMN origin_did, DROP COLUMN source_url""",
    "ALTER TABLE attachments ALTER COLUMN storage_url SET NOT NULL",
)


def upgrade() -> None:
    """Add the fetch columns."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them (and the received files that never arrived)."""
    for statement in DOWNGRADE:
        op.execute(statement)
