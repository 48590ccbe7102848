"""A durable event's payload stored once: ``event_payloads``; ``user_events`` rows point to it.

An event appended to many streams (a message to a group of 1,000) was one ``user_events`` row
per user, each with its own copy of ``type`` and ``data_json``. Now the event's ``type`` and
``data_json`` are one ``event_payloads`` row, and each user's stream row is ``(user_id, seq,
event_id, created_at)``: the offsets, their order and the replay window are as before, and
a fan-out writes one copy of the data instead of one per member.

- ``event_payloads``: ``id`` (from its sequence), ``type``, ``data_json``, ``created_at`` and
  ``refs``, how many ``user_events`` rows point to it. A payload is written with its rows, in
  one statement, and gets no new ones later; rows leave it when the retention worker trims
  them, or when a rewrite (a deleted message's tombstone, a held message's edited text) gives
  some of its users a copy of their own. The one removing rows lowers ``refs`` by as many; a
  payload at 0 is nobody's any more and the retention worker deletes it (the partial index
  finds those).
- ``user_events``: ``event_id`` names the payload (no foreign key: the append writes both in
  one statement, and a key would cost a check per row of a fan-out).

Existing rows are carried over: the rows of one event (same type, data and time, the time of
the transaction that appended them) share one payload; ``user_id``, ``seq`` and ``created_at``
are kept, so per-user offsets stay gapless and in order, and a replay returns what it did.
Downgrade writes each row's payload back into it.

Revision ID: 0031
Revises: 0030
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

UPGRADE = (
    "ALTER TABLE user_events RENAME TO user_events_0030",
    "ALTER TABLE user_events_0030 RENAME CONSTRAINT user_events_pkey TO user_events_0030_pkey",
    "ALTER INDEX idx_user_events_created RENAME TO idx_user_events_0030_created",
    """
    CREATE TABLE event_payloads (
      id         BIGSERIAL PRIMARY KEY,
      type       VARCHAR(64) NOT NULL,
      data_json  JSONB NOT NULL,
      refs       INTEGER NOT NULL,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    "CREATE INDEX idx_event_payloads_unreferenced ON event_payloads (id) WHERE refs <= 0",
    """
    CREATE TABLE user_events (
      user_id    CHAR(26) NOT NULL,
      seq        BIGINT NOT NULL,
      event_id   BIGINT NOT NULL,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (user_id, seq)
    )
    """,
    # one payload per event: the rows one append wrote have the same type, data and time
    """
    WITH payload AS MATERIALIZED (
      SELECT nextval('event_payloads_id_seq') AS id, type, data_json, created_at,
             count(*) AS refs
      FROM user_events_0030 GROUP BY type, data_json, created_at
    ), stored AS (
      INSERT INTO event_payloads (id, type, data_json, refs, created_at)
      SELECT id, type, data_json, refs, created_at FROM payload
    )
    INSERT INTO user_events (user_id, seq, event_id, created_at)
    SELECT e.user_id, e.seq, p.id, e.created_at
    FROM user_events_0030 e
    JOIN payload p
      ON p.type = e.type AND p.data_json = e.data_json AND p.created_at = e.created_at
    """,
    "CREATE INDEX idx_user_events_created ON user_events (created_at)",
    "DROP TABLE user_events_0030",
)

DOWNGRADE = (
    "ALTER TABLE user_events RENAME TO user_events_0031",
    "ALTER TABLE user_events_0031 RENAME CONSTRAINT user_events_pkey TO user_events_0031_pkey",
    "ALTER INDEX idx_user_events_created RENAME TO idx_user_events_0031_created",
    """
    CREATE TABLE user_events (
      user_id    CHAR(26) NOT NULL,
      seq        BIGINT NOT NULL,
      type       VARCHAR(64) NOT NULL,
      data_json  JSONB NOT NULL,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (user_id, seq)
    )
    """,
    """
    INSERT INTO user_events (user_id, seq, type, data_json, created_at)
    SELECT e.user_id, e.seq, p.type, p.data_json, e.created_at
    FROM user_events_0031 e JOIN event_payloads p ON p.id = e.event_id
    """,
    "CREATE INDEX idx_user_events_created ON user_events (created_at)",
    "DROP TABLE user_events_0031",
    "DROP TABLE event_payloads",
)


def upgrade() -> None:
    """Create ``event_payloads``, rebuild ``user_events`` pointing to it, carrying rows over."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Rebuild ``user_events`` with each row's type and data, drop ``event_payloads``."""
    for statement in DOWNGRADE:
        op.execute(statement)
