"""The own-agent runtime's tables (context-tables spec's tables, the MCP server spec's audit log).

- ``agent_memories``: long-term memory per agent (context-tables spec ``memoria``), with full-text
  search.
- ``knowledge``: a user's knowledge base (context-tables spec ``conocimiento``), readable by the
  agents in ``allowed_agents`` (NULL = all of the owner's agents); de-duplicated by
  ``content_hash``.
- ``ambient_context``: periodic snapshots of the owner's environment (context-tables spec
  ``contexto_ambiental``) that expire.
- ``conversation_summaries`` and ``message_compactions``: the context-tables spec's
  ``conversaciones.resumen`` and ``mensajes_v2.compactado``, kept beside the data model's tables so
  those stay exactly as the spec writes them (tests/test_schema.py); a message is compacted when it
  has a row here.
- ``message_search``: a trigger-maintained full-text index of ``messages.content``, for the same
  reason (no extra column or index on ``messages``).
- ``project_memory_versions``: every version of a ``project_memory`` document.
- ``agent_tasks``: the ``agent.{agent_id}.tasks`` queue, durable; at most one queued and one
  running task per conversation.
- ``mcp_audit_log``: append-only audit of MCP write tools (MCP server spec); a trigger refuses
  UPDATE and DELETE.
- ``embeddings``: vectors for semantic search, only when the ``vector`` extension (pgvector) is
  available on the server; Confer detects the table at run time and falls back to full-text.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

FTS = "'english'"

UPGRADE = (
    f"""
    CREATE TABLE agent_memories (
      id                     CHAR(26) PRIMARY KEY,
      agent_id               CHAR(26) NOT NULL REFERENCES agents(id),
      type                   VARCHAR(16) NOT NULL,
      content                TEXT NOT NULL,
      importance             INTEGER NOT NULL DEFAULT 5,
      uses                   INTEGER NOT NULL DEFAULT 0,
      last_used_at           TIMESTAMPTZ,
      origin_conversation_id CHAR(26) REFERENCES conversations(id),
      project_id             VARCHAR(255),
      domain                 VARCHAR(64),
      expires_at             TIMESTAMPTZ,
      created_at             TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      updated_at             TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      search_tsv             TSVECTOR GENERATED ALWAYS AS (to_tsvector({FTS}, content)) STORED,
      CONSTRAINT ck_agent_memories_type
        CHECK (type IN ('preference', 'fact', 'decision', 'learning', 'procedure')),
      CONSTRAINT ck_agent_memories_importance CHECK (importance BETWEEN 1 AND 10)
    )
    """,
    "CREATE INDEX idx_agent_memories_agent ON agent_memories (agent_id, importance DESC)",
    "CREATE INDEX idx_agent_memories_type ON agent_memories (agent_id, type)",
    "CREATE INDEX idx_agent_memories_search ON agent_memories USING GIN (search_tsv)",
    f"""
    CREATE TABLE knowledge (
      id             CHAR(26) PRIMARY KEY,
      user_id        CHAR(26) NOT NULL REFERENCES users(id),
      category       VARCHAR(50) NOT NULL,
      title          VARCHAR(200),
      content        TEXT NOT NULL,
      tags           TEXT[] NOT NULL DEFAULT '{{}}',
      allowed_agents CHAR(26)[],
      priority       INTEGER NOT NULL DEFAULT 0,
      source         VARCHAR(200),
      content_hash   CHAR(64) NOT NULL,
      project_id     VARCHAR(255),
      domain         VARCHAR(64),
      created_at     TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      updated_at     TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      search_tsv     TSVECTOR GENERATED ALWAYS AS
                       (to_tsvector({FTS}, coalesce(title, '') || ' ' || content)) STORED,
      UNIQUE (user_id, content_hash)
    )
    """,
    "CREATE INDEX idx_knowledge_user_priority ON knowledge (user_id, priority DESC)",
    "CREATE INDEX idx_knowledge_category ON knowledge (user_id, category)",
    "CREATE INDEX idx_knowledge_tags ON knowledge USING GIN (tags)",
    "CREATE INDEX idx_knowledge_search ON knowledge USING GIN (search_tsv)",
    """
    CREATE TABLE ambient_context (
      id            CHAR(26) PRIMARY KEY,
      user_id       CHAR(26) NOT NULL REFERENCES users(id),
      captured_at   TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      servers       JSONB,
      services      JSONB,
      pending_tasks JSONB,
      alerts        JSONB,
      git_state     JSONB,
      expires_at    TIMESTAMPTZ NOT NULL DEFAULT NOW() + INTERVAL '1 hour'
    )
    """,
    "CREATE INDEX idx_ambient_context_user ON ambient_context (user_id, captured_at DESC)",
    """
    CREATE TABLE conversation_summaries (
      conversation_id   CHAR(26) PRIMARY KEY REFERENCES conversations(id),
      summary           TEXT NOT NULL,
      compacted_through CHAR(26) NOT NULL REFERENCES messages(id),
      provider          VARCHAR(64),
      model             VARCHAR(128),
      updated_at        TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    """
    CREATE TABLE message_compactions (
      message_id      CHAR(26) PRIMARY KEY REFERENCES messages(id),
      conversation_id CHAR(26) NOT NULL REFERENCES conversations(id),
      compacted_at    TIMESTAMPTZ NOT NULL DEFAULT NOW()
    )
    """,
    "CREATE INDEX idx_message_compactions_conv ON message_compactions (conversation_id)",
    """
    CREATE TABLE message_search (
      message_id      CHAR(26) PRIMARY KEY REFERENCES messages(id),
      conversation_id CHAR(26) NOT NULL REFERENCES conversations(id),
      search_tsv      TSVECTOR NOT NULL
    )
    """,
    "CREATE INDEX idx_message_search_tsv ON message_search USING GIN (search_tsv)",
    "CREATE INDEX idx_message_search_conv ON message_search (conversation_id)",
    f"""
    CREATE FUNCTION confer_index_message() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO message_search (message_id, conversation_id, search_tsv)
      VALUES (NEW.id, NEW.conversation_id, to_tsvector({FTS}, coalesce(NEW.content, '')))
      ON CONFLICT (message_id) DO UPDATE SET search_tsv = EXCLUDED.search_tsv;
      RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER trg_messages_search AFTER INSERT OR UPDATE OF content ON messages
      FOR EACH ROW EXECUTE FUNCTION confer_index_message()
    """,
    """
    CREATE TABLE project_memory_versions (
      id                CHAR(26) PRIMARY KEY,
      project_memory_id CHAR(26) NOT NULL REFERENCES project_memory(id),
      version           INTEGER NOT NULL,
      facts_md          TEXT,
      decisions_md      TEXT,
      meta_json         JSONB,
      written_via       VARCHAR(32),
      created_at        TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      UNIQUE (project_memory_id, version)
    )
    """,
    """
    CREATE TABLE agent_tasks (
      id                 CHAR(26) PRIMARY KEY,
      agent_id           CHAR(26) NOT NULL REFERENCES agents(id),
      conversation_id    CHAR(26) NOT NULL REFERENCES conversations(id),
      trigger_message_id CHAR(26) NOT NULL REFERENCES messages(id),
      status             VARCHAR(16) NOT NULL DEFAULT 'queued',
      attempts           INTEGER NOT NULL DEFAULT 0,
      error              TEXT,
      reply_message_id   CHAR(26) REFERENCES messages(id),
      created_at         TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      started_at         TIMESTAMPTZ,
      finished_at        TIMESTAMPTZ,
      CONSTRAINT ck_agent_tasks_status
        CHECK (status IN ('queued', 'running', 'done', 'failed'))
    )
    """,
    """
    CREATE UNIQUE INDEX uq_agent_tasks_queued ON agent_tasks (conversation_id)
      WHERE status = 'queued'
    """,
    """
    CREATE UNIQUE INDEX uq_agent_tasks_running ON agent_tasks (conversation_id)
      WHERE status = 'running'
    """,
    "CREATE INDEX idx_agent_tasks_status ON agent_tasks (status, id)",
    """
    CREATE TABLE mcp_audit_log (
      id            CHAR(26) PRIMARY KEY,
      created_at    TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      user_id       CHAR(26) NOT NULL REFERENCES users(id),
      agent         VARCHAR(128) NOT NULL,
      tool_name     VARCHAR(64) NOT NULL,
      payload_json  JSONB NOT NULL,
      target_id     VARCHAR(255),
      target_table  VARCHAR(64),
      success       BOOLEAN NOT NULL,
      error_message TEXT
    )
    """,
    "CREATE INDEX idx_mcp_audit_user ON mcp_audit_log (user_id, created_at DESC)",
    """
    CREATE FUNCTION confer_refuse_audit_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'mcp_audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
    END $$
    """,
    """
    CREATE TRIGGER trg_mcp_audit_append_only BEFORE UPDATE OR DELETE ON mcp_audit_log
      FOR EACH ROW EXECUTE FUNCTION confer_refuse_audit_change()
    """,
    """
    CREATE TRIGGER trg_mcp_audit_no_truncate BEFORE TRUNCATE ON mcp_audit_log
      FOR EACH STATEMENT EXECUTE FUNCTION confer_refuse_audit_change()
    """,
)

EMBEDDINGS = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    """
    CREATE TABLE embeddings (
      owner_table VARCHAR(16) NOT NULL,
      owner_id    CHAR(26) NOT NULL,
      model       VARCHAR(128) NOT NULL,
      dims        INTEGER NOT NULL,
      embedding   vector NOT NULL,
      created_at  TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      PRIMARY KEY (owner_table, owner_id, model)
    )
    """,
)

DOWNGRADE = (
    "DROP TABLE IF EXISTS embeddings",
    "DROP TABLE mcp_audit_log",
    "DROP FUNCTION confer_refuse_audit_change()",
    "DROP TABLE agent_tasks",
    "DROP TABLE project_memory_versions",
    "DROP TRIGGER trg_messages_search ON messages",
    "DROP FUNCTION confer_index_message()",
    "DROP TABLE message_search",
    "DROP TABLE message_compactions",
    "DROP TABLE conversation_summaries",
    "DROP TABLE ambient_context",
    "DROP TABLE knowledge",
    "DROP TABLE agent_memories",
)


def _pgvector_usable() -> bool:
    """True when ``vector`` is installed, or available and we may create it (superuser)."""
    bind = op.get_bind()
    installed = bind.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'vector'"))
    if installed.scalar() is not None:
        return True
    available = bind.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    superuser = bind.execute(
        text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    ).scalar()
    return available is not None and bool(superuser)


def upgrade() -> None:
    """Create the agent runtime's tables (and ``embeddings`` when pgvector is usable)."""
    for statement in UPGRADE:
        op.execute(statement)
    if _pgvector_usable():
        for statement in EMBEDDINGS:
            op.execute(statement)


def downgrade() -> None:
    """Drop them again; the ``vector`` extension itself is left installed."""
    for statement in DOWNGRADE:
        op.execute(statement)
