"""A group's order at its replicas: ``message_positions``.

A group's home orders its messages; a replica learns the home's place of each message — the
home's id of it, a ULID — from the message itself (a message the home sends carries its own id)
or, for a post of the replica's own member, from the home's answer to it. One row per message
of a replica whose place differs from its local id; the replica lists the group by
``COALESCE(position, id)`` (``gateway.services.group_order``). A new table rather than a
column: the data model's tables keep the spec's columns. Deleted with the message.

Revision ID: 0027
Revises: 0026
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE message_positions (
      message_id       CHAR(26) PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
      conversation_id  CHAR(26) NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      position         CHAR(26) NOT NULL
    )
    """,
    "CREATE INDEX message_positions_order ON message_positions (conversation_id, position)",
)

DOWNGRADE = ("DROP TABLE message_positions",)


def upgrade() -> None:
    """Create the table."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop the table."""
    for statement in DOWNGRADE:
        op.execute(statement)
