"""De-duplicate inbound messages per recipient, not per instance.

A sender delivers one message to each recipient on an instance with the same ``messageId`` (a
group with two people of the same peer instance). De-duplicating by (origin, message id) alone
answered the second delivery as a retry of the first and lost it. ``federation_inbox`` gains the
recipient's DID in its key, and an A2A task is unique per (caller, message id, recipient).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

UPGRADE = (
    "ALTER TABLE federation_inbox ADD COLUMN recipient_did VARCHAR(255) NOT NULL DEFAULT ''",
    "ALTER TABLE federation_inbox DROP CONSTRAINT federation_inbox_pkey",
    """ALTER TABLE federation_inbox
         ADD PRIMARY KEY (origin_did, remote_message_id, recipient_did)""",
    "DROP INDEX uq_a2a_tasks_remote",
    """CREATE UNIQUE INDEX uq_a2a_tasks_remote
         ON a2a_tasks (caller, remote_message_id, user_id, COALESCE(agent_id, ''))
         WHERE remote_message_id IS NOT NULL""",
)

DOWNGRADE = (
    """DELETE FROM federation_inbox i USING federation_inbox o
         WHERE i.origin_did = o.origin_did AND i.remote_message_id = o.remote_message_id
           AND i.recipient_did > o.recipient_did""",
    "ALTER TABLE federation_inbox DROP CONSTRAINT federation_inbox_pkey",
    "ALTER TABLE federation_inbox DROP COLUMN recipient_did",
    "ALTER TABLE federation_inbox ADD PRIMARY KEY (origin_did, remote_message_id)",
    """UPDATE a2a_tasks t SET remote_message_id = NULL
         WHERE remote_message_id IS NOT NULL AND EXISTS (
           SELECT 1 FROM a2a_tasks o WHERE o.caller = t.caller
             AND o.remote_message_id = t.remote_message_id AND o.id < t.id)""",
    "DROP INDEX uq_a2a_tasks_remote",
    """CREATE UNIQUE INDEX uq_a2a_tasks_remote ON a2a_tasks (caller, remote_message_id)
         WHERE remote_message_id IS NOT NULL""",
)


def upgrade() -> None:
    """Key the inbox and the task de-duplication by recipient too."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Back to one copy per (origin, message id); later copies lose their inbox row."""
    for statement in DOWNGRADE:
        op.execute(statement)
