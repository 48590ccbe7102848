"""Concept memory: a graph of concepts per agent, with health signals (semantic-memory MCP spec).

- ``concept_domains``: the domain slugs of one agent's graph.
- ``concepts``: name, type (principle | pattern | event), status (active | dormant | archived),
  ``weight`` (as of ``weight_at``; the decay schedule is in :mod:`gateway.services.concept_weight`)
  and ``peak_weight`` (the highest weight it ever had, for fracture severity), description,
  projects, ``name_key`` (the name folded to lower case without accents, written by Python so
  matching never depends on the ``unaccent`` extension) and a full-text ``search_tsv``.
  Semantic vectors live in the existing ``embeddings`` table (``owner_table = 'concept'``), which
  exists only where pgvector does.
- ``concept_domain_links``, ``concept_occurrences`` (which session or conversation saw a concept,
  when), ``concept_relations`` (depends_on, refines, contradicts, supersedes, related_to, with
  notes: a correction lives on the edge), ``concept_frames`` and ``concept_frame_references``
  (``interpreted_under``, kept apart from the relations).
- ``concept_vaccines``: declared directives (global, or project-specific with their projects)
  that the graph should hold with enough weight.
- ``concept_measurements`` + ``concept_measurement_domains``: AI-human measurements, outside the
  concept tables and so outside search.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UPGRADE = (
    """
    CREATE TABLE concept_domains (
      id         CHAR(26) PRIMARY KEY,
      agent_id   CHAR(26) NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      slug       VARCHAR(64) NOT NULL,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      UNIQUE (agent_id, slug),
      CONSTRAINT ck_concept_domains_slug CHECK (slug ~ '^[a-z0-9][a-z0-9_.-]*$')
    )
    """,
    """
    CREATE TABLE concepts (
      id               CHAR(26) PRIMARY KEY,
      user_id          CHAR(26) NOT NULL REFERENCES users(id),
      agent_id         CHAR(26) NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      name             VARCHAR(200) NOT NULL,
      name_key         VARCHAR(200) NOT NULL,
      type             VARCHAR(16) NOT NULL,
      status           VARCHAR(16) NOT NULL DEFAULT 'active',
      weight           DOUBLE PRECISION NOT NULL DEFAULT 1.0,
      weight_at        TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      peak_weight      DOUBLE PRECISION NOT NULL DEFAULT 1.0,
      description      TEXT NOT NULL DEFAULT '',
      projects         TEXT[] NOT NULL DEFAULT '{}',
      occurrence_count INTEGER NOT NULL DEFAULT 0,
      last_seen_at     TIMESTAMPTZ,
      created_at       TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      updated_at       TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      search_tsv       TSVECTOR GENERATED ALWAYS AS
                         (to_tsvector('english', name || ' ' || description)) STORED,
      UNIQUE (agent_id, name),
      CONSTRAINT ck_concepts_type CHECK (type IN ('principle', 'pattern', 'event')),
      CONSTRAINT ck_concepts_status CHECK (status IN ('active', 'dormant', 'archived')),
      CONSTRAINT ck_concepts_weight CHECK (weight >= 0 AND peak_weight >= weight)
    )
    """,
    "CREATE INDEX idx_concepts_agent_status ON concepts (agent_id, status, weight DESC)",
    "CREATE INDEX idx_concepts_name_key ON concepts (agent_id, name_key)",
    "CREATE INDEX idx_concepts_projects ON concepts USING GIN (projects)",
    "CREATE INDEX idx_concepts_search ON concepts USING GIN (search_tsv)",
    """
    CREATE TABLE concept_domain_links (
      concept_id CHAR(26) NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
      domain_id  CHAR(26) NOT NULL REFERENCES concept_domains(id) ON DELETE CASCADE,
      PRIMARY KEY (concept_id, domain_id)
    )
    """,
    "CREATE INDEX idx_concept_domain_links_domain ON concept_domain_links (domain_id)",
    """
    CREATE TABLE concept_occurrences (
      id              CHAR(26) PRIMARY KEY,
      concept_id      CHAR(26) NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
      session         VARCHAR(200),
      conversation_id CHAR(26) REFERENCES conversations(id),
      project         VARCHAR(200),
      note            TEXT,
      seen_at         TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      CONSTRAINT ck_concept_occurrences_source
        CHECK (session IS NOT NULL OR conversation_id IS NOT NULL)
    )
    """,
    """CREATE INDEX idx_concept_occurrences_concept
         ON concept_occurrences (concept_id, seen_at DESC)""",
    """
    CREATE TABLE concept_relations (
      id         CHAR(26) PRIMARY KEY,
      agent_id   CHAR(26) NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      source_id  CHAR(26) NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
      target_id  CHAR(26) NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
      kind       VARCHAR(16) NOT NULL,
      notes      TEXT,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      UNIQUE (source_id, target_id, kind),
      CONSTRAINT ck_concept_relations_kind
        CHECK (kind IN ('depends_on', 'refines', 'contradicts', 'supersedes', 'related_to')),
      CONSTRAINT ck_concept_relations_not_self CHECK (source_id <> target_id)
    )
    """,
    "CREATE INDEX idx_concept_relations_target ON concept_relations (target_id, kind)",
    """
    CREATE TABLE concept_frames (
      id         CHAR(26) PRIMARY KEY,
      agent_id   CHAR(26) NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      alias      VARCHAR(200) NOT NULL,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      UNIQUE (agent_id, alias)
    )
    """,
    """
    CREATE TABLE concept_frame_references (
      id         CHAR(26) PRIMARY KEY,
      concept_id CHAR(26) NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
      frame_id   CHAR(26) NOT NULL REFERENCES concept_frames(id) ON DELETE CASCADE,
      notes      TEXT,
      created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      UNIQUE (concept_id, frame_id)
    )
    """,
    """
    CREATE TABLE concept_vaccines (
      id                  CHAR(26) PRIMARY KEY,
      agent_id            CHAR(26) NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      name                VARCHAR(200) NOT NULL,
      terms               TEXT[] NOT NULL,
      scope               VARCHAR(16) NOT NULL,
      applicable_projects TEXT[] NOT NULL DEFAULT '{}',
      min_weight          DOUBLE PRECISION NOT NULL DEFAULT 1.0,
      description         TEXT NOT NULL DEFAULT '',
      created_at          TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      UNIQUE (agent_id, name),
      CONSTRAINT ck_concept_vaccines_scope CHECK (
        (scope = 'global' AND cardinality(applicable_projects) = 0)
        OR (scope = 'project_specific' AND cardinality(applicable_projects) > 0)),
      CONSTRAINT ck_concept_vaccines_terms CHECK (cardinality(terms) > 0)
    )
    """,
    """
    CREATE TABLE concept_measurements (
      id                 CHAR(26) PRIMARY KEY,
      user_id            CHAR(26) NOT NULL REFERENCES users(id),
      agent_id           CHAR(26) NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      context            TEXT NOT NULL,
      outcome            VARCHAR(24) NOT NULL,
      ai_contribution    TEXT NOT NULL DEFAULT '',
      human_contribution TEXT NOT NULL DEFAULT '',
      project            VARCHAR(200) NOT NULL DEFAULT '',
      declared_agent     VARCHAR(128) NOT NULL,
      created_at         TIMESTAMPTZ NOT NULL DEFAULT NOW(),
      CONSTRAINT ck_concept_measurements_context CHECK (btrim(context) <> ''),
      CONSTRAINT ck_concept_measurements_outcome CHECK (outcome IN
        ('resolved', 'partially_resolved', 'not_resolved', 'not_yet_observable'))
    )
    """,
    """
    CREATE TABLE concept_measurement_domains (
      measurement_id CHAR(26) NOT NULL REFERENCES concept_measurements(id) ON DELETE CASCADE,
      domain_id      CHAR(26) NOT NULL REFERENCES concept_domains(id),
      PRIMARY KEY (measurement_id, domain_id)
    )
    """,
)

DOWNGRADE = (
    "DROP TABLE concept_measurement_domains",
    "DROP TABLE concept_measurements",
    "DROP TABLE concept_vaccines",
    "DROP TABLE concept_frame_references",
    "DROP TABLE concept_frames",
    "DROP TABLE concept_relations",
    "DROP TABLE concept_occurrences",
    "DROP TABLE concept_domain_links",
    "DROP TABLE concepts",
    "DROP TABLE concept_domains",
)


def upgrade() -> None:
    """Create the concept-memory tables."""
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    """Drop them again (and the concepts' embeddings, when that table exists)."""
    op.execute(
        """DO $$ BEGIN
             IF to_regclass('embeddings') IS NOT NULL THEN
               DELETE FROM embeddings WHERE owner_table = 'concept';
             END IF;
           END $$"""
    )
    for statement in DOWNGRADE:
        op.execute(statement)
