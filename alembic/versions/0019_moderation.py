"""Moderation: the instance federation policy, users' reports, message requests.

- ``federation_policy``: one row, the instance's ``mode`` (``open``, ``allowlist``,
  ``denylist``). ``federation_policy_entries``: the allow and deny lists; an entry is a domain
  (``example.org``), a wildcard over its subdomains (``*.example.org``), either with an
  optional ``:port``, or one exact DID.
- ``reports``: a user's report of a message, a user or a peer, with its category, text, a
  snapshot of a reported message, and the admin's resolution.
- ``message_requests``: a stranger's first message to a user, held apart from the inbox until
  the user accepts or declines it (``pending`` → ``accepted`` | ``declined``). The spec's tables
  are left as they are; the user's choice lives in ``users.preferences_json``
  (``privacy.message_requests``) and an accepted sender becomes a ``peer_contacts`` row with
  ``added_via = 'message_request'``.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE federation_policy (
      id          SMALLINT PRIMARY KEY DEFAULT 1 CHECK (id = 1),
      mode        VARCHAR(16) NOT NULL DEFAULT 'open'
                  CHECK (mode IN ('open', 'allowlist', 'denylist')),
      updated_at  TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    "INSERT INTO federation_policy (id) VALUES (1)",
    """
    CREATE TABLE federation_policy_entries (
      pattern     VARCHAR(255) PRIMARY KEY,
      list        VARCHAR(8) NOT NULL CHECK (list IN ('allow', 'deny')),
      note        VARCHAR(500),
      created_by  CHAR(26),
      created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE reports (
      id            CHAR(26) PRIMARY KEY,
      reporter_id   CHAR(26) NOT NULL REFERENCES users(id),
      target_type   VARCHAR(16) NOT NULL CHECK (target_type IN ('message', 'user', 'peer')),
      message_id    CHAR(26) REFERENCES messages(id) ON DELETE SET NULL,
      target_user_id CHAR(26) REFERENCES users(id),
      target_did    VARCHAR(255),
      category      VARCHAR(32) NOT NULL,
      text          VARCHAR(2000),
      snapshot_json JSONB,
      status        VARCHAR(16) NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
      action        VARCHAR(32),
      resolution_note VARCHAR(2000),
      resolved_by   CHAR(26),
      resolved_at   TIMESTAMPTZ,
      created_at    TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    "CREATE INDEX idx_reports_queue ON reports (status, id)",
    "CREATE INDEX idx_reports_reporter ON reports (reporter_id, created_at DESC)",
    """
    CREATE TABLE message_requests (
      conversation_id CHAR(26) NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      user_id         CHAR(26) NOT NULL REFERENCES users(id),
      sender_did      VARCHAR(255) NOT NULL,
      state           VARCHAR(16) NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending', 'accepted', 'declined')),
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      decided_at      TIMESTAMPTZ,
      PRIMARY KEY (conversation_id, user_id)
    )
    """,
    "CREATE INDEX idx_message_requests_user ON message_requests (user_id, state)",
)

DOWNGRADE = (
    "DROP TABLE message_requests",
    "DROP TABLE reports",
    "DROP TABLE federation_policy_entries",
    "DROP TABLE federation_policy",
)


def upgrade() -> None:
    """Create the moderation tables."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them (reports and requests with them)."""
    for statement in DOWNGRADE:
        op.execute(statement)
