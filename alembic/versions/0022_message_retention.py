"""Message retention per conversation: ``conversation_retention``.

One row per conversation whose members chose how long its messages stay: ``days`` (1..3650),
who set it (``set_by``, kept NULL once that user is gone) and when. No row means the
instance's ``CONFER_MESSAGE_RETENTION_DAYS`` applies (unset: messages stay). A new table
rather than a column: the data model's tables keep the spec's columns. Deleted with the
conversation.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE conversation_retention (
      conversation_id CHAR(26) PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
      days            INTEGER NOT NULL CHECK (days BETWEEN 1 AND 3650),
      set_by          CHAR(26) REFERENCES users(id) ON DELETE SET NULL,
      updated_at      TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
)

DOWNGRADE = ("DROP TABLE conversation_retention",)


def upgrade() -> None:
    """Create the table."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop it (conversations fall back to the instance's retention)."""
    for statement in DOWNGRADE:
        op.execute(statement)
