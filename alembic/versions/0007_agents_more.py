"""Translations of messages as linked variants (docs/agents.md).

- ``message_translations``: one translation of one message into one language, made by a
  participant's agent ``translation`` model. ``translation_json`` holds the data model's
  ``Translation`` (``from``, ``to``, ``provider``) plus ``model`` and ``text``. The original
  message is never edited. ``source_sha256`` is the SHA-256 of the text that was translated,
  so an edited message gets a fresh translation while an unchanged one reuses the stored row
  (unique per message, target language and source text).
- ``conversation_auto_translations``: a participant's wish to get every new message of a
  conversation (from the moment it is set, not their own) translated into ``language``.
- ``agent_tasks.status`` gains ``waiting``: a task a peer's message started while the owner is
  offline and has not set ``privacy.allow_offline_response``; it is queued when the owner's
  next device connects. At most one task per conversation waits.

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
    """
    CREATE TABLE conversation_auto_translations (
      conversation_id   CHAR(26) NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      user_id           CHAR(26) NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      language          VARCHAR(16) NOT NULL,
      created_at        TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (conversation_id, user_id)
    )
    """,
    "ALTER TABLE agent_tasks DROP CONSTRAINT ck_agent_tasks_status",
    """ALTER TABLE agent_tasks ADD CONSTRAINT ck_agent_tasks_status
         CHECK (status IN ('queued', 'running', 'done', 'failed', 'waiting'))""",
    """CREATE UNIQUE INDEX uq_agent_tasks_waiting ON agent_tasks (conversation_id)
         WHERE status = 'waiting'""",
)

DOWNGRADE = (
    "DROP INDEX IF EXISTS uq_agent_tasks_waiting",
    """UPDATE agent_tasks SET status = 'failed', error = 'waiting task dropped by downgrade'
         WHERE status = 'waiting'""",
    "ALTER TABLE agent_tasks DROP CONSTRAINT ck_agent_tasks_status",
    """ALTER TABLE agent_tasks ADD CONSTRAINT ck_agent_tasks_status
         CHECK (status IN ('queued', 'running', 'done', 'failed'))""",
    "DROP TABLE IF EXISTS conversation_auto_translations",
    "DROP TABLE IF EXISTS message_translations",
)


def upgrade() -> None:
    """Create ``message_translations``; let agent tasks wait for their owner."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Undo it (waiting tasks become failed)."""
    for statement in DOWNGRADE:
        op.execute(statement)
