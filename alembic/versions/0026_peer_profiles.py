"""Public profiles of peers: ``peer_profiles``.

One row per cached peer whose DID document lists a public profile
(``gateway.services.public_profiles``): the display name and avatar URL it publishes, cleaned
and bounded, and when they were fetched. Shown for remote participants before the signed
``senderName`` kept in ``peer_agents.name``. A new table rather than columns: the data model's
tables keep the spec's columns. Deleted with the peer.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE peer_profiles (
      peer_id       CHAR(26) PRIMARY KEY REFERENCES peer_agents(id) ON DELETE CASCADE,
      display_name  VARCHAR(128),
      avatar_url    VARCHAR(2048),
      fetched_at    TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
)

DOWNGRADE = ("DROP TABLE peer_profiles",)


def upgrade() -> None:
    """Create the table."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop the table."""
    for statement in DOWNGRADE:
        op.execute(statement)
