"""Leases on running agent tasks (several gateway processes share the queue).

A worker that claims a task holds it until ``lease_until`` and renews the lease while the task
runs. A task whose lease ran out (its process died) is queued again — by any process, at any
time, not only at start-up — and a live process never loses its task to another one's start.
The worker's final write checks that it still holds the task, so an answer is stored once.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``agent_tasks.lease_until`` (NULL: no lease, as for every task before)."""
    op.execute("ALTER TABLE agent_tasks ADD COLUMN lease_until TIMESTAMPTZ")


def downgrade() -> None:
    """Drop it."""
    op.execute("ALTER TABLE agent_tasks DROP COLUMN lease_until")
