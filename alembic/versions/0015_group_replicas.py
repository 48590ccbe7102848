"""Replicas of groups whose home is another instance.

A group has one home instance, which owns its name and member list. An instance with members
of a remote group keeps a local ``group`` conversation for it, and this table says which group
that is: the home instance's DID and the home's conversation id (the ``contextId`` of every
message of the group), with the member DIDs the home last announced.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``group_replicas``."""
    op.execute(
        """CREATE TABLE group_replicas (
             conversation_id CHAR(26) PRIMARY KEY
                             REFERENCES conversations (id) ON DELETE CASCADE,
             home            VARCHAR(255) NOT NULL,
             remote_id       VARCHAR(255) NOT NULL,
             members         JSONB NOT NULL DEFAULT '[]'::jsonb,
             updated_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
             UNIQUE (home, remote_id)
           )"""
    )


def downgrade() -> None:
    """Drop it."""
    op.execute("DROP TABLE group_replicas")
