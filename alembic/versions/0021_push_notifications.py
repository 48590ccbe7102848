"""A2A push notifications: per-task webhook configs and their durable outbox (A2A 1.0 §4.3).

- ``a2a_push_configs``: one ``TaskPushNotificationConfig`` of a task, keyed by (``task_id``,
  ``id``): the webhook ``url``, the client's ``token`` (sent back as
  ``X-A2A-Notification-Token``), the ``authentication`` scheme and credentials (sent as
  ``Authorization: <scheme> <credentials>``), the consecutive ``failures`` of its deliveries,
  the ``last_error``, and ``disabled_at`` once it failed too often (then nothing more is
  queued for it; Get/List show it). Only the task's caller may see or change them (through
  the task's ``caller``). Deleted with the task.
- ``a2a_push_outbox``: one ``StreamResponse`` to deliver to one config, written in the
  transaction that changed the task; ``state`` ``pending`` → ``failed`` (a delivered row is
  deleted), ``attempts`` and ``next_attempt_at`` for the worker's exponential backoff.
  Deliveries of one config go out in order (ids are ULIDs). Deleted with the config.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE a2a_push_configs (
      task_id          CHAR(26) NOT NULL REFERENCES a2a_tasks(id) ON DELETE CASCADE,
      id               VARCHAR(128) NOT NULL,
      url              VARCHAR(2048) NOT NULL,
      token            VARCHAR(512),
      auth_scheme      VARCHAR(64),
      auth_credentials VARCHAR(4096),
      failures         INTEGER NOT NULL DEFAULT 0,
      last_error       TEXT,
      disabled_at      TIMESTAMPTZ,
      created_at       TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (task_id, id)
    )
    """,
    """
    CREATE TABLE a2a_push_outbox (
      id              CHAR(26) PRIMARY KEY,
      task_id         CHAR(26) NOT NULL,
      config_id       VARCHAR(128) NOT NULL,
      payload_json    JSONB NOT NULL,
      state           VARCHAR(16) NOT NULL DEFAULT 'pending',
      attempts        INTEGER NOT NULL DEFAULT 0,
      next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      last_error      TEXT,
      created_at      TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      delivered_at    TIMESTAMPTZ,
      FOREIGN KEY (task_id, config_id) REFERENCES a2a_push_configs (task_id, id)
        ON DELETE CASCADE
    )
    """,
    """CREATE INDEX idx_a2a_push_outbox_due ON a2a_push_outbox (next_attempt_at)
         WHERE state = 'pending'""",
    """CREATE INDEX idx_a2a_push_outbox_config ON a2a_push_outbox (task_id, config_id, id)
         WHERE state = 'pending'""",
)

DOWNGRADE = ("DROP TABLE a2a_push_outbox", "DROP TABLE a2a_push_configs")


def upgrade() -> None:
    """Create the config and outbox tables."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them (queued notifications are lost)."""
    for statement in DOWNGRADE:
        op.execute(statement)
