"""Translations of messages as linked variants (issue 6).

- ``message_translations``: one translation of one message into one language, made by a
  participant's agent ``translation`` model. ``translation_json`` holds the data model's
  ``Translation`` (``from``, ``to``, ``provider``) plus ``model`` and ``text``. The original
  message is never edited. ``source_sha256`` is the SHA-256 of the text that was translated,
  so an edited message gets a fresh translation while an unchanged one reuses the stored row
  (unique per message, target language and source text).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE message_translations (
      id                CHAR(26) PRIMARY KEY,
      message_id        CHAR(26) NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
      target_language   VARCHAR(16) NOT NULL,
      source_sha256     CHAR(64) NOT NULL,
      translation_json  JSONB NOT NULL,
      requested_by      CHAR(26) REFERENCES users(id) ON DELETE SET NULL,
      created_at        TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      CONSTRAINT uq_message_translations UNIQUE (message_id, target_language, source_sha256)
    )
    """,
)

DOWNGRADE = ("DROP TABLE IF EXISTS message_translations",)


def upgrade() -> None:
    """Create ``message_translations``."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop it again."""
    for statement in DOWNGRADE:
        op.execute(statement)
