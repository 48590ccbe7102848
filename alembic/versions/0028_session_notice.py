"""Tell the changing connection too: the session triggers also ``RAISE NOTICE``.

The ``NOTIFY confer_sessions`` of migration 0025 reaches every listening process at commit,
but through each process's listening connection, so in the process that made the change it
may arrive after that request has been answered, and the user's next request could still be
let in by the cache of :mod:`gateway.services.session_cache`. The same trigger function now
also raises a notice whose message is ``confer_sessions`` and whose detail is the user's id:
PostgreSQL sends it to the connection that ran the statement, before the statement's result,
so the process that changes a session or user drops its cached entries before that request
goes on (:meth:`gateway.db.Pool.on_notice`). A SQL console shows the notice too.

Revision ID: 0028
Revises: 0027
"""

from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

FUNCTION = """
    CREATE OR REPLACE FUNCTION confer_notify_session_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
    DECLARE
      changed text := to_jsonb(COALESCE(OLD, NEW)) ->> TG_ARGV[0];
    BEGIN
      PERFORM pg_notify('confer_sessions', changed);
      {notice}
      RETURN NULL;
    END
    $$
    """


def upgrade() -> None:
    """Replace the trigger function with one that also raises the notice."""
    op.execute(
        FUNCTION.format(notice="RAISE NOTICE USING MESSAGE = 'confer_sessions', DETAIL = changed;")
    )


def downgrade() -> None:
    """Back to the function of migration 0025 (NOTIFY only)."""
    op.execute(FUNCTION.format(notice=""))
