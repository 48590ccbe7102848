"""Notifications away from the screen (Web Push, e-mail) and password resets.

- ``instance_keys`` may hold a ``vapid`` key: the instance's P-256 key that signs Web Push
  requests (RFC 8292), generated on first start; its ``private_key`` is the 32-byte scalar.
- ``push_subscriptions``: one browser push subscription (RFC 8030 §5, the W3C Push API's
  ``PushSubscription``) per device session; it goes with the session (``ON DELETE CASCADE``),
  so every way a session ends (log out, revoke, password change, reuse detection) removes it.
- ``notification_outbox``: a local user who may need to hear of a message, written in the
  message's own transaction by the event hub; the notification worker turns each user's rows
  into one push or e-mail once the burst is over, or drops them when the user was online.
- ``password_resets``: one-time reset tokens; only their SHA-256 is stored.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UPGRADE = (
    "ALTER TABLE instance_keys DROP CONSTRAINT ck_instance_keys_purpose",
    """ALTER TABLE instance_keys ADD CONSTRAINT ck_instance_keys_purpose
         CHECK (purpose IN ('federation', 'access_token', 'vapid'))""",
    """
    CREATE TABLE push_subscriptions (
      id              CHAR(26) PRIMARY KEY,
      user_id         CHAR(26) NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      session_id      CHAR(26) NOT NULL UNIQUE REFERENCES sessions(id) ON DELETE CASCADE,
      endpoint        TEXT NOT NULL UNIQUE,
      p256dh          BYTEA NOT NULL,
      auth            BYTEA NOT NULL,
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      last_sent_at    TIMESTAMPTZ
    )
    """,
    "CREATE INDEX idx_push_subscriptions_user ON push_subscriptions (user_id)",
    """
    CREATE TABLE notification_outbox (
      id              BIGSERIAL PRIMARY KEY,
      user_id         CHAR(26) NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      message_id      CHAR(26) NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
      conversation_id CHAR(26) NOT NULL,
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      attempts        INTEGER NOT NULL DEFAULT 0,
      next_at         TIMESTAMPTZ,
      leased_until    TIMESTAMPTZ
    )
    """,
    "CREATE INDEX idx_notification_outbox_user ON notification_outbox (user_id, created_at)",
    "CREATE INDEX idx_notification_outbox_message ON notification_outbox (message_id)",
    """
    CREATE TABLE password_resets (
      token_hash      CHAR(64) PRIMARY KEY,
      user_id         CHAR(26) NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      expires_at      TIMESTAMPTZ NOT NULL,
      used_at         TIMESTAMPTZ
    )
    """,
    "CREATE INDEX idx_password_resets_user ON password_resets (user_id)",
)

DOWNGRADE = (
    "DROP TABLE password_resets",
    "DROP TABLE notification_outbox",
    "DROP TABLE push_subscriptions",
    "DELETE FROM instance_keys WHERE purpose = 'vapid'",
    "ALTER TABLE instance_keys DROP CONSTRAINT ck_instance_keys_purpose",
    """ALTER TABLE instance_keys ADD CONSTRAINT ck_instance_keys_purpose
         CHECK (purpose IN ('federation', 'access_token'))""",
)


def upgrade() -> None:
    """Create the push, notification and password-reset tables."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them and the VAPID key (browsers then need a new subscription)."""
    for statement in DOWNGRADE:
        op.execute(statement)
