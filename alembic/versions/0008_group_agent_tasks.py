"""Several agents addressed in one group conversation (docs/agents.md).

In a group, one message may address several local agents (``@name`` mentions, or a reply to
an agent's message). Each addressed agent gets its own queued task, so the "one queued task
per conversation" index becomes one per (conversation, agent). Still at most one task *runs*
per conversation at a time (``uq_agent_tasks_running`` is unchanged): the agents answer one
after another, each seeing the answers before it.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UPGRADE = (
    "DROP INDEX uq_agent_tasks_queued",
    """CREATE UNIQUE INDEX uq_agent_tasks_queued ON agent_tasks (conversation_id, agent_id)
         WHERE status = 'queued'""",
)

DOWNGRADE = (
    """UPDATE agent_tasks t SET status = 'failed', error = 'queued task dropped by downgrade'
         WHERE t.status = 'queued' AND EXISTS (
           SELECT 1 FROM agent_tasks o WHERE o.status = 'queued'
           AND o.conversation_id = t.conversation_id AND o.id < t.id)""",
    "DROP INDEX uq_agent_tasks_queued",
    """CREATE UNIQUE INDEX uq_agent_tasks_queued ON agent_tasks (conversation_id)
         WHERE status = 'queued'""",
)


def upgrade() -> None:
    """One queued task per conversation and agent."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Back to one queued task per conversation (later duplicates become failed)."""
    for statement in DOWNGRADE:
        op.execute(statement)
