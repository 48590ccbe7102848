"""Accounts: username skeletons, admins, disabled accounts and used refresh tokens.

The data model's own tables stay exactly as specified (``tests/test_schema.py``); what the
accounts work needs beyond them lives in new tables:

- ``username_skeletons``: one row per user (deleted users included, so a name stays reserved)
  holding the UTS #39-style confusable skeleton of the username; its UNIQUE constraint is what
  refuses a look-alike of an existing name, race-free. Rows for users created before this
  migration get their username as skeleton (exact for the ASCII names Confer allows, but without
  the look-alike folding; see docs/accounts.md).
- ``admins``: users allowed to use the admin API.
- ``disabled_users``: accounts an admin disabled (cannot log in; sessions were revoked).
- ``used_refresh_tokens``: SHA-256 hashes of refresh tokens already rotated away, per session,
  so that presenting one again is recognised as theft and revokes the session chain. No foreign
  key to ``sessions``: the evidence must outlive the revoked session.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE username_skeletons (
      user_id     CHAR(26) PRIMARY KEY REFERENCES users(id),
      skeleton    VARCHAR(255) NOT NULL,
      CONSTRAINT uq_username_skeletons_skeleton UNIQUE (skeleton)
    )
    """,
    """
    INSERT INTO username_skeletons (user_id, skeleton)
    SELECT id, lower(username) FROM users
    ON CONFLICT DO NOTHING
    """,
    """
    CREATE TABLE admins (
      user_id     CHAR(26) PRIMARY KEY REFERENCES users(id),
      granted_by  CHAR(26),
      created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE disabled_users (
      user_id     CHAR(26) PRIMARY KEY REFERENCES users(id),
      reason      TEXT,
      disabled_by CHAR(26),
      disabled_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE used_refresh_tokens (
      token_hash  CHAR(64) PRIMARY KEY,
      session_id  CHAR(26) NOT NULL,
      user_id     CHAR(26) NOT NULL,
      used_at     TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    "CREATE INDEX idx_used_refresh_tokens_session ON used_refresh_tokens (session_id)",
)

DOWNGRADE = (
    "DROP TABLE IF EXISTS used_refresh_tokens",
    "DROP TABLE IF EXISTS disabled_users",
    "DROP TABLE IF EXISTS admins",
    "DROP TABLE IF EXISTS username_skeletons",
)


def upgrade() -> None:
    """Create the accounts tables (one statement per call: asyncpg prepares each)."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them again."""
    for statement in DOWNGRADE:
        op.execute(statement)
