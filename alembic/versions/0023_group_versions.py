"""Versions of a group's state: ``group_versions``.

A group's home counts every change of the group's state (create, join, leave, kick, role,
rename, archive): each membership event carries the version it made. A replica keeps the
version of the state it last took and takes an event only when its version is newer, so a
late or repeated event never undoes a newer one. One row per group conversation: at the home
the version it last issued, at a replica the version it holds (a conversation is one or the
other). No row is version 0. A new table rather than a column: the data model's tables keep
the spec's columns. Deleted with the conversation.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``group_versions``."""
    op.execute(
        """CREATE TABLE group_versions (
             conversation_id CHAR(26) PRIMARY KEY
                             REFERENCES conversations (id) ON DELETE CASCADE,
             version         BIGINT NOT NULL CHECK (version >= 0),
             updated_at      TIMESTAMPTZ NOT NULL DEFAULT NOW()
           )"""
    )


def downgrade() -> None:
    """Drop ``group_versions``."""
    op.execute("DROP TABLE group_versions")
