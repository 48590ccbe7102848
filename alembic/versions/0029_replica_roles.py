"""The roles a group's home last announced, kept with its replica: ``group_replicas.roles``.

A replica takes the home's whole state from each membership event (name, members, roles,
archived). Its participants carry the roles of those who take part; a local user whom the home
listed but who is held apart as a message request (an invitation from a home the user does not
know, ``gateway.services.group_invitations``) takes no part until they accept, so the role the
home gave them is kept here, beside the member list, and taken when they accept. A member DID
→ ``admin`` / ``observer`` (a member not named is a ``member``), as in the event.

Revision ID: 0029
Revises: 0028
"""

from __future__ import annotations

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

UPGRADE = ("ALTER TABLE group_replicas ADD COLUMN roles JSONB NOT NULL DEFAULT '{}'::jsonb",)

DOWNGRADE = ("ALTER TABLE group_replicas DROP COLUMN roles",)


def upgrade() -> None:
    """Add the column."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop the column."""
    for statement in DOWNGRADE:
        op.execute(statement)
