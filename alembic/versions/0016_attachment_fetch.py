"""Files across instances: an attachment a peer sent is fetched from the sender's instance.

A received ``file`` message gets its own ``attachments`` row at once, before its bytes are
here (``storage_url`` is then empty: the spec's column stays NOT NULL; ``size_bytes`` and
``sha256`` hold what the sender declared, checked against the bytes on arrival), and an
``attachment_fetches`` row: ``source_url`` (the sender's signed-GET URL), ``origin_did`` (the
sending peer), ``state`` (``pending`` → ``fetched`` | ``failed``), the fetch worker's retry
schedule (``attempts``, ``next_at``) and the last ``error``. The spec's ``attachments`` table
is left as it is.

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
    """
    CREATE TABLE attachment_fetches (
      attachment_id CHAR(26) PRIMARY KEY REFERENCES attachments(id) ON DELETE CASCADE,
      source_url    TEXT NOT NULL,
      origin_did    TEXT NOT NULL,
      state         VARCHAR(16) NOT NULL DEFAULT 'pending',
      attempts      INTEGER NOT NULL DEFAULT 0,
      next_at       TIMESTAMPTZ,
      error         TEXT,
      created_at    TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """CREATE INDEX idx_attachment_fetches_due ON attachment_fetches (next_at)
         WHERE state = 'pending'""",
)

DOWNGRADE = (
    "DELETE FROM attachments WHERE id IN (SELECT attachment_id FROM attachment_fetches)",
    "DROP TABLE attachment_fetches",
)


def upgrade() -> None:
    """Create the fetch table."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop it, with the received files it tracked (their bytes are left to the admin)."""
    for statement in DOWNGRADE:
        op.execute(statement)
