"""Federation on the open internet (docs/federation.md): A2A tasks, API keys, destination health.

- ``a2a_tasks``: the A2A 1.0 tasks (spec §4.5) created by ``SendMessage`` on a local user or
  agent endpoint. ``caller`` is who may see the task: ``peer:<did>`` for a signed Confer peer,
  ``key:<api key id>`` for a stock A2A client. ``permission_id`` links a task waiting in
  ``TASK_STATE_AUTH_REQUIRED`` to its ``permissions`` row; (``caller``, ``remote_message_id``)
  de-duplicates retries, including of requests that stored no message (denied, pending).
- ``api_keys``: bearer keys a user issues for stock A2A clients; only a SHA-256 of the key is
  kept (the key itself is shown once).
- ``federation_destinations``: per-destination delivery health; a destination that keeps
  failing is parked (``parked_at``) and resumed on recovery or inbound contact.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TASK_STATES = (
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)

UPGRADE = (
    """
    CREATE TABLE api_keys (
      id           CHAR(26) PRIMARY KEY,
      user_id      CHAR(26) NOT NULL REFERENCES users(id),
      name         VARCHAR(128) NOT NULL,
      prefix       VARCHAR(16) NOT NULL,
      key_hash     CHAR(64) NOT NULL UNIQUE,
      created_at   TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      last_used_at TIMESTAMPTZ,
      revoked_at   TIMESTAMPTZ
    )
    """,
    """
    CREATE INDEX idx_api_keys_user ON api_keys (user_id)
    """,
    f"""
    CREATE TABLE a2a_tasks (
      id                  CHAR(26) PRIMARY KEY,
      user_id             CHAR(26) NOT NULL REFERENCES users(id),
      agent_id            CHAR(26) REFERENCES agents(id),
      caller              VARCHAR(300) NOT NULL,
      context_id          VARCHAR(128) NOT NULL,
      state               VARCHAR(32) NOT NULL,
      message_id          CHAR(26) REFERENCES messages(id),
      remote_message_id   VARCHAR(128),
      permission_id       CHAR(26) REFERENCES permissions(id),
      history_json        JSONB NOT NULL DEFAULT '[]',
      status_message_json JSONB,
      artifacts_json      JSONB NOT NULL DEFAULT '[]',
      metadata_json       JSONB,
      created_at          TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      updated_at          TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      CONSTRAINT ck_a2a_tasks_state CHECK (state IN ({", ".join(f"'{s}'" for s in TASK_STATES)}))
    )
    """,
    """
    CREATE INDEX idx_a2a_tasks_caller ON a2a_tasks (caller, updated_at DESC, id DESC)
    """,
    """
    CREATE INDEX idx_a2a_tasks_message ON a2a_tasks (message_id)
    """,
    """
    CREATE UNIQUE INDEX uq_a2a_tasks_remote ON a2a_tasks (caller, remote_message_id)
      WHERE remote_message_id IS NOT NULL
    """,
    """
    CREATE INDEX idx_a2a_tasks_permission ON a2a_tasks (permission_id)
      WHERE permission_id IS NOT NULL
    """,
    """
    CREATE TABLE federation_destinations (
      destination    VARCHAR(255) PRIMARY KEY,
      failures       INTEGER NOT NULL DEFAULT 0,
      failing_since  TIMESTAMPTZ,
      parked_at      TIMESTAMPTZ,
      last_error     TEXT,
      updated_at     TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
)


def upgrade() -> None:
    # asyncpg prepares each statement: one per call.
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for table in ("federation_destinations", "a2a_tasks", "api_keys"):
        op.execute(f"DROP TABLE {table}")
