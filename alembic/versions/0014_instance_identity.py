"""The instance's identity as it was first served: its DID and public URL (one row).

Every user and agent DID is derived from the public URL (did:web §3.1). Command-line tools
(``confer create-admin``, ``confer did``) read the identity from here instead of recomputing it
from their own environment, where ``CONFER_PUBLIC_URL``/``CONFER_PORT`` may differ from the
server's. The server records it at start-up once its stored users agree with it.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``instance_identity``, holding at most one row."""
    op.execute(
        """CREATE TABLE instance_identity (
             singleton  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
             did        VARCHAR(255) NOT NULL,
             public_url TEXT NOT NULL,
             updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
           )"""
    )


def downgrade() -> None:
    """Drop it."""
    op.execute("DROP TABLE instance_identity")
