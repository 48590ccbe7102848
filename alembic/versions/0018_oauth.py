"""MCP sign-in: Confer as the OAuth 2.1 authorization server of its own users.

- ``oauth_clients``: clients that registered dynamically (RFC 7591). Clients identified by a
  client ID metadata document (an https URL) are not stored: their document is fetched and
  cached in memory.
- ``oauth_authorizations``: one authorization request from ``/oauth/authorize`` to the token
  exchange. It waits for the user's consent (``user_id`` NULL) until ``expires_at``; approval
  sets ``user_id``, the code's SHA-256 (``code_hash``) and a short new ``expires_at``; the
  exchange sets ``used_at`` and the ``session_id`` it opened, so a second use of the code can
  revoke that session (RFC 6749 §4.1.2).
- ``oauth_grants``: the OAuth side of a ``sessions`` row. An OAuth sign-in is a device session
  (rotating refresh token hashed at rest, reuse detection, listed and revoked with the user's
  sessions); this row says which client holds it and for which resource and scope its access
  tokens are minted. Deleting the session deletes the grant.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE oauth_clients (
      client_id      TEXT PRIMARY KEY,
      client_name    TEXT,
      redirect_uris  JSONB NOT NULL,
      metadata       JSONB NOT NULL,
      created_at     TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE oauth_authorizations (
      id              TEXT PRIMARY KEY,
      client_id       TEXT NOT NULL,
      client_name     TEXT,
      redirect_uri    TEXT NOT NULL,
      code_challenge  TEXT NOT NULL,
      state           TEXT,
      resource        TEXT NOT NULL,
      scope           TEXT NOT NULL,
      user_id         CHAR(26) REFERENCES users(id) ON DELETE CASCADE,
      code_hash       TEXT UNIQUE,
      session_id      CHAR(26),
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      expires_at      TIMESTAMPTZ NOT NULL,
      used_at         TIMESTAMPTZ
    )
    """,
    "CREATE INDEX idx_oauth_authorizations_expiry ON oauth_authorizations (expires_at)",
    """
    CREATE TABLE oauth_grants (
      session_id   CHAR(26) PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
      user_id      CHAR(26) NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      client_id    TEXT NOT NULL,
      client_name  TEXT,
      resource     TEXT NOT NULL,
      scope        TEXT NOT NULL,
      created_at   TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    "CREATE INDEX idx_oauth_grants_user ON oauth_grants (user_id)",
)

DOWNGRADE = (
    "DELETE FROM sessions WHERE id IN (SELECT session_id FROM oauth_grants)",
    "DROP TABLE oauth_grants",
    "DROP TABLE oauth_authorizations",
    "DROP TABLE oauth_clients",
)


def upgrade() -> None:
    """Create the OAuth tables."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them; OAuth sessions go with their grants (their tokens would be REST tokens)."""
    for statement in DOWNGRADE:
        op.execute(statement)
