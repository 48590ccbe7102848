"""Health of the concept graph (fractures, vaccines) and measurements (migration 0013)."""

from __future__ import annotations

from typing import Any

import asyncpg


async def list_fractures(
    conn: asyncpg.Connection, *, agent_id: str, project: str | None
) -> list[dict[str, Any]]:
    """Dormant or archived concepts that active concepts ``depends_on``: concept (its name),
    status, weight, peak_weight and ``dependents`` ``[{name, weight, occurrence_count}]``.
    With ``project``, only fractures where the weakened concept or a dependent belongs to it."""
    rows = await conn.fetch(
        """SELECT t.name AS concept, t.status, t.weight, t.peak_weight,
                  jsonb_agg(jsonb_build_object('name', s.name, 'weight', s.weight,
                                               'occurrence_count', s.occurrence_count)
                            ORDER BY s.weight DESC, s.name) AS dependents
           FROM concept_relations r
           JOIN concepts t ON t.id = r.target_id JOIN concepts s ON s.id = r.source_id
           WHERE r.agent_id = $1 AND r.kind = 'depends_on'
             AND t.status IN ('dormant', 'archived') AND s.status = 'active'
             AND ($2::text IS NULL OR $2 = ANY(t.projects) OR $2 = ANY(s.projects))
           GROUP BY t.id, t.name, t.status, t.weight, t.peak_weight
           ORDER BY t.peak_weight DESC, t.name""",
        agent_id,
        project,
    )
    return [dict(r) for r in rows]


async def insert_vaccine(
    conn: asyncpg.Connection, *, id: str, agent_id: str, fields: dict[str, Any]
) -> str:
    """Declare (or redeclare, by name) a vaccine; ``terms`` already folded. Returns its id."""
    return str(
        await conn.fetchval(
            """INSERT INTO concept_vaccines (id, agent_id, name, terms, scope,
                                             applicable_projects, min_weight, description)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
               ON CONFLICT (agent_id, name) DO UPDATE SET terms = EXCLUDED.terms,
                 scope = EXCLUDED.scope, applicable_projects = EXCLUDED.applicable_projects,
                 min_weight = EXCLUDED.min_weight, description = EXCLUDED.description
               RETURNING id""",
            id,
            agent_id,
            fields["name"],
            fields["terms"],
            fields["scope"],
            fields["applicable_projects"],
            fields["min_weight"],
            fields["description"],
        )
    )


async def list_vaccine_coverage(
    conn: asyncpg.Connection, *, agent_id: str, project: str | None
) -> list[dict[str, Any]]:
    """Each vaccine that applies (global ones always; project-specific ones only when
    ``project`` is one of their projects) with ``best_weight``: the highest weight of an active
    concept whose folded name contains a term — anywhere in the graph for a global vaccine,
    within ``project`` for a project-specific one (None when no concept matches)."""
    rows = await conn.fetch(
        """SELECT v.name, v.scope, v.applicable_projects, v.terms, v.min_weight,
                  (SELECT max(c.weight) FROM concepts c
                   WHERE c.agent_id = v.agent_id AND c.status = 'active'
                     AND EXISTS (SELECT 1 FROM unnest(v.terms) AS term
                                 WHERE strpos(c.name_key, term) > 0)
                     AND (v.scope = 'global' OR $2 = ANY(c.projects))) AS best_weight
           FROM concept_vaccines v
           WHERE v.agent_id = $1
             AND (v.scope = 'global' OR ($2::text IS NOT NULL AND $2 = ANY(v.applicable_projects)))
           ORDER BY v.name""",
        agent_id,
        project,
    )
    return [dict(r) for r in rows]


async def insert_measurement(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    agent_id: str,
    fields: dict[str, Any],
    declared_agent: str,
    domain_ids: list[str],
) -> Any:
    """Insert a measurement and its domain links; returns its ``created_at``."""
    created_at = await conn.fetchval(
        """INSERT INTO concept_measurements (id, user_id, agent_id, context, outcome,
                                             ai_contribution, human_contribution, project,
                                             declared_agent)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING created_at""",
        id,
        user_id,
        agent_id,
        fields["context"],
        fields["outcome"],
        fields["ai_contribution"],
        fields["human_contribution"],
        fields["project"],
        declared_agent,
    )
    await conn.execute(
        """INSERT INTO concept_measurement_domains (measurement_id, domain_id)
           SELECT $1, unnest($2::char(26)[])""",
        id,
        domain_ids,
    )
    return created_at
