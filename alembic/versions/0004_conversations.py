"""Conversations and the real-time protocol (docs/conversations.md): per-user event streams.

- ``user_streams``: one row per user: the stream's ``epoch`` (changes only when the stream is
  reset, so a client's offset from before is meaningless) and ``head``, the last offset used.
  Appending locks the row, so offsets are gap-free and in commit order per user.
- ``user_events``: the replay window: the last events of each user, by (user_id, seq). Rows are
  trimmed by age and count; PostgreSQL stays the source of truth, so a resume works on any
  gateway process.
- ``conversation_heads``: the last message id of each conversation. Inserting a message locks
  this row and takes an id greater than it, so message ids (the server order) follow commit
  order per conversation across processes and wall-clock steps.
- ``conversation_reads``: each participant's read position (the last message id read; it only
  moves forward). ``conversation_participants.last_read_at`` records when; unread counts are
  counted from the position, so they are exact under concurrency.
- ``message_versions``: the previous versions of edited messages (version 1 is the original);
  a message's current version is one more than its stored versions. Deleting a message
  empties these too.
- ``message_idempotency``: ``Idempotency-Key`` of sends per user, with a hash of the request
  body, so a retry returns the same message and a different body under the same key is refused.

The data model's own tables are left exactly as specified (``tests/test_schema.py``).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE user_streams (
      user_id    CHAR(26) PRIMARY KEY REFERENCES users(id),
      epoch      VARCHAR(36) NOT NULL,
      head       BIGINT NOT NULL DEFAULT 0,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE user_events (
      user_id    CHAR(26) NOT NULL,
      seq        BIGINT NOT NULL,
      type       VARCHAR(64) NOT NULL,
      data_json  JSONB NOT NULL,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (user_id, seq)
    )
    """,
    """
    CREATE INDEX idx_user_events_created ON user_events (created_at)
    """,
    """
    CREATE TABLE conversation_heads (
      conversation_id CHAR(26) PRIMARY KEY REFERENCES conversations(id),
      last_message_id CHAR(26) NOT NULL
    )
    """,
    """
    CREATE TABLE conversation_reads (
      participant_id CHAR(26) PRIMARY KEY
                     REFERENCES conversation_participants(id) ON DELETE CASCADE,
      message_id     CHAR(26) NOT NULL REFERENCES messages(id)
    )
    """,
    """
    CREATE TABLE message_versions (
      message_id   CHAR(26) NOT NULL REFERENCES messages(id),
      version      INTEGER NOT NULL,
      content      TEXT,
      content_json JSONB,
      created_at   TIMESTAMPTZ NOT NULL,
      PRIMARY KEY (message_id, version)
    )
    """,
    """
    CREATE TABLE message_idempotency (
      user_id      CHAR(26) NOT NULL REFERENCES users(id),
      key          VARCHAR(255) NOT NULL,
      request_hash CHAR(64) NOT NULL,
      message_id   CHAR(26) NOT NULL REFERENCES messages(id),
      created_at   TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (user_id, key)
    )
    """,
)

DOWNGRADE = (
    "DROP TABLE message_idempotency",
    "DROP TABLE message_versions",
    "DROP TABLE conversation_reads",
    "DROP TABLE conversation_heads",
    "DROP TABLE user_events",
    "DROP TABLE user_streams",
)


def upgrade() -> None:
    # asyncpg prepares each statement: one per call.
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
