"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = ${repr(up_revision)}
down_revision: str | Sequence[str] | None = ${repr(down_revision)}
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
depends_on: str | Sequence[str] | None = ${repr(depends_on)}

# Plain SQL, one statement per op.execute (asyncpg prepares each statement separately).
UPGRADE: tuple[str, ...] = ()
DOWNGRADE: tuple[str, ...] = ()


def upgrade() -> None:
    """Apply this revision."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Revert this revision."""
    for statement in DOWNGRADE:
        op.execute(statement)
