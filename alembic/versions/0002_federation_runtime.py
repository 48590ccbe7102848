"""Federation runtime tables that the data model leaves to the implementation.

- ``instance_keys``: the instance's Ed25519 keys (purpose ``federation`` for RFC 9421 signatures
  published in DID documents, ``access_token`` for JWTs). Keys rotate: a retired key stops
  signing; it stays listed until ``removed_at``.
- ``federation_outbox``: durable outbound deliveries, written in the same transaction as the
  message (DESIGN: "a durable outbox"); one in flight per ``destination``.
- ``federation_inbox``: inbound de-duplication by (origin DID, remote message id).
- ``signature_nonces``: RFC 9421 §7.2.2 replay protection shared by every gateway process.

It also widens ``conversations.type`` to VARCHAR(32): the data model's own values
``direct_user_agent`` (17 characters) and ``direct_agent_agent`` (18) do not fit its VARCHAR(16).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


UPGRADE = (
    """
    CREATE TABLE instance_keys (
      id          CHAR(26) PRIMARY KEY,
      purpose     VARCHAR(16) NOT NULL,
      fragment    VARCHAR(64) NOT NULL,
      private_key BYTEA NOT NULL,
      created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      retired_at  TIMESTAMPTZ,
      removed_at  TIMESTAMPTZ,
      UNIQUE (purpose, fragment),
      CONSTRAINT ck_instance_keys_purpose CHECK (purpose IN ('federation', 'access_token'))
    )
    """,
    """
    CREATE UNIQUE INDEX uq_instance_keys_active ON instance_keys (purpose)
      WHERE retired_at IS NULL
    """,
    """
    CREATE TABLE federation_outbox (
      id              CHAR(26) PRIMARY KEY,
      destination     VARCHAR(255) NOT NULL,
      endpoint        TEXT NOT NULL,
      sender_did      VARCHAR(255) NOT NULL,
      peer_id         CHAR(26) NOT NULL REFERENCES peer_agents(id),
      message_id      CHAR(26) NOT NULL REFERENCES messages(id),
      payload_json    JSONB NOT NULL,
      attempts        INTEGER NOT NULL DEFAULT 0,
      next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      leased_until    TIMESTAMPTZ,
      last_error      TEXT,
      delivered_at    TIMESTAMPTZ,
      failed_at       TIMESTAMPTZ,
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE INDEX idx_outbox_pending ON federation_outbox (destination, id)
      WHERE delivered_at IS NULL AND failed_at IS NULL
    """,
    """
    CREATE TABLE federation_inbox (
      origin_did        VARCHAR(255) NOT NULL,
      remote_message_id VARCHAR(128) NOT NULL,
      message_id        CHAR(26) NOT NULL REFERENCES messages(id),
      created_at        TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (origin_did, remote_message_id)
    )
    """,
    """
    CREATE TABLE signature_nonces (
      keyid      VARCHAR(512) NOT NULL,
      nonce      VARCHAR(128) NOT NULL,
      expires_at TIMESTAMPTZ NOT NULL,
      PRIMARY KEY (keyid, nonce)
    )
    """,
    """
    CREATE INDEX idx_signature_nonces_expires ON signature_nonces (expires_at)
    """,
    """
    ALTER TABLE conversations ALTER COLUMN type TYPE VARCHAR(32)
    """,
)


def upgrade() -> None:
    # asyncpg prepares each statement: one per call.
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    op.execute("ALTER TABLE conversations ALTER COLUMN type TYPE VARCHAR(16)")
    for table in ("signature_nonces", "federation_inbox", "federation_outbox", "instance_keys"):
        op.execute(f"DROP TABLE {table}")
