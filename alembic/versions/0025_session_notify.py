"""Tell every process when a session or its user changes: ``NOTIFY confer_sessions``.

A serving process keeps the sessions it checked lately in memory for a few seconds
(``CONFER_AUTH_CACHE_SECONDS``, :mod:`gateway.services.session_cache`), so a request with a
signed access token needs no database round trip to authenticate. For revocation to stay
exact, whatever ends a session or changes its user must reach every process at once: these
triggers send the user's id on the ``confer_sessions`` channel when a ``sessions`` row is
deleted or its ``expires_at`` changes, when a ``users`` row changes (deleted, renamed,
password changed) and when an account is disabled or enabled (``disabled_users``). The
notification is delivered at commit, whichever code (or SQL console) made the change; one
per user and transaction (PostgreSQL folds identical ones).

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE FUNCTION confer_notify_session_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('confer_sessions', to_jsonb(COALESCE(OLD, NEW)) ->> TG_ARGV[0]);
      RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER sessions_notify AFTER DELETE OR UPDATE OF expires_at ON sessions
    FOR EACH ROW EXECUTE FUNCTION confer_notify_session_change('user_id')
    """,
    """
    CREATE TRIGGER users_notify AFTER UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION confer_notify_session_change('id')
    """,
    """
    CREATE TRIGGER disabled_users_notify AFTER INSERT OR DELETE ON disabled_users
    FOR EACH ROW EXECUTE FUNCTION confer_notify_session_change('user_id')
    """,
)

DOWNGRADE = (
    "DROP TRIGGER disabled_users_notify ON disabled_users",
    "DROP TRIGGER users_notify ON users",
    "DROP TRIGGER sessions_notify ON sessions",
    "DROP FUNCTION confer_notify_session_change()",
)


def upgrade() -> None:
    """Create the function and its triggers."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them (processes then authenticate every request against the database)."""
    for statement in DOWNGRADE:
        op.execute(statement)
