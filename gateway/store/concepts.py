"""Concepts, their domains and their use (tables of migration 0013), scoped to one agent.

Every read returns concept rows as dicts with the columns of ``concepts`` plus ``domains`` (the
sorted slugs). ``name_key`` arguments are already folded (lower case, no accents) by the caller.
Weight arithmetic follows :mod:`gateway.services.concept_weight`: ``weight`` is the value at
``weight_at`` and decays by ``0.5 ** (elapsed / half_life)``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

CONCEPT_COLUMNS = """c.id, c.name, c.type, c.status, c.weight, c.peak_weight, c.weight_at,
    c.description, c.projects, c.occurrence_count, c.last_seen_at,
    ARRAY(SELECT d.slug FROM concept_domain_links l JOIN concept_domains d ON d.id = l.domain_id
          WHERE l.concept_id = c.id ORDER BY d.slug) AS domains"""

# $1 agent, then domain and project filters at the given positions
_FILTERS = """c.agent_id = $1
    AND (${d}::text IS NULL OR EXISTS (SELECT 1 FROM concept_domain_links l
         JOIN concept_domains d ON d.id = l.domain_id WHERE l.concept_id = c.id AND d.slug = ${d}))
    AND (${p}::text IS NULL OR ${p} = ANY(c.projects))"""


def _filters(d: int, p: int) -> str:
    return _FILTERS.replace("${d}", f"${d}").replace("${p}", f"${p}")


async def ensure_domains(
    conn: asyncpg.Connection, *, agent_id: str, slugs: list[str], new_ids: list[str]
) -> dict[str, str]:
    """Create the missing slugs (ids from ``new_ids``, one per slug); ``{slug: id}``.

    The slugs are inserted in sorted order, so two writers of crossed lists wait on each other
    instead of deadlocking."""
    ordered = sorted(zip(slugs, new_ids, strict=True))
    await conn.execute(
        """INSERT INTO concept_domains (id, agent_id, slug)
           SELECT i, $1, s FROM unnest($2::text[], $3::text[]) AS t(s, i)
           ON CONFLICT (agent_id, slug) DO NOTHING""",
        agent_id,
        [slug for slug, _ in ordered],
        [i for _, i in ordered],
    )
    return await get_domain_ids(conn, agent_id=agent_id, slugs=slugs)


async def get_domain_ids(
    conn: asyncpg.Connection, *, agent_id: str, slugs: list[str]
) -> dict[str, str]:
    """``{slug: id}`` of the slugs that exist in the agent's graph."""
    rows = await conn.fetch(
        "SELECT slug, id FROM concept_domains WHERE agent_id = $1 AND slug = ANY($2::text[])",
        agent_id,
        slugs,
    )
    return {r["slug"]: r["id"] for r in rows}


async def get_concept(
    conn: asyncpg.Connection, *, agent_id: str, name: str
) -> dict[str, Any] | None:
    """The concept named exactly ``name``, or None."""
    row = await conn.fetchrow(
        f"SELECT {CONCEPT_COLUMNS} FROM concepts c WHERE c.agent_id = $1 AND c.name = $2",
        agent_id,
        name,
    )
    return dict(row) if row else None


async def list_matching(
    conn: asyncpg.Connection, *, agent_id: str, name_key: str, project: str | None, limit: int
) -> list[dict[str, Any]]:
    """Concepts whose folded name equals or contains ``name_key``: exact matches first, then by
    weight."""
    rows = await conn.fetch(
        f"""SELECT {CONCEPT_COLUMNS}, (c.name_key = $2) AS exact FROM concepts c
            WHERE c.agent_id = $1 AND strpos(c.name_key, $2) > 0
              AND ($3::text IS NULL OR $3 = ANY(c.projects))
            ORDER BY exact DESC, c.weight DESC, c.name LIMIT $4""",
        agent_id,
        name_key,
        project,
        limit,
    )
    return [dict(r) for r in rows]


async def insert_concept(
    conn: asyncpg.Connection,
    *,
    id: str,
    user_id: str,
    agent_id: str,
    name: str,
    name_key: str,
    type: str,
    description: str,
    now: datetime,
) -> bool:
    """Insert a concept with weight 0 (its first use adds the increment); False when the agent
    already has a concept of this ``name`` (a concurrent first use may have created it: the
    insert waits for that writer, so a read after it sees the row)."""
    status: str = await conn.execute(
        """INSERT INTO concepts (id, user_id, agent_id, name, name_key, type, description,
                                 weight, peak_weight, weight_at, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0, $8, $8, $8)
           ON CONFLICT (agent_id, name) DO NOTHING""",
        id,
        user_id,
        agent_id,
        name,
        name_key,
        type,
        description,
        now,
    )
    return status == "INSERT 0 1"


async def link_domains(conn: asyncpg.Connection, *, concept_id: str, domain_ids: list[str]) -> None:
    """Attach domains to a concept (existing links are kept)."""
    await conn.execute(
        """INSERT INTO concept_domain_links (concept_id, domain_id)
           SELECT $1, unnest($2::char(26)[]) ON CONFLICT DO NOTHING""",
        concept_id,
        domain_ids,
    )


async def update_use(
    conn: asyncpg.Connection,
    *,
    concept_id: str,
    now: datetime,
    project: str | None,
    increment: float,
    max_weight: float,
    half_life_s: float,
) -> None:
    """One use: decay to ``now``, add ``increment`` (capped), count it, reactivate a dormant
    concept (archived stays archived), add ``project`` to its projects."""
    await conn.execute(
        """UPDATE concepts SET
             weight = LEAST($4, weight * power(0.5, greatest(0, extract(epoch FROM $2 - weight_at))
                                                   / $5) + $3),
             peak_weight = GREATEST(peak_weight, LEAST($4, weight * power(0.5,
                             greatest(0, extract(epoch FROM $2 - weight_at)) / $5) + $3)),
             weight_at = $2, last_seen_at = $2, updated_at = $2,
             occurrence_count = occurrence_count + 1,
             status = CASE WHEN status = 'dormant' THEN 'active' ELSE status END,
             projects = CASE WHEN $6::text IS NULL OR $6 = ANY(projects) THEN projects
                             ELSE projects || $6::text END
           WHERE id = $1""",
        concept_id,
        now,
        increment,
        max_weight,
        half_life_s,
        project,
    )


async def update_status(
    conn: asyncpg.Connection,
    *,
    concept_id: str,
    status: str,
    now: datetime,
    floor_weight: float | None = None,
    half_life_s: float | None = None,
) -> None:
    """Set a concept's status. With ``floor_weight`` (and ``half_life_s``), also decay the
    weight to ``now`` and raise it to at least ``floor_weight`` (``peak_weight`` follows)."""
    await conn.execute(
        """UPDATE concepts SET status = $2, updated_at = $3,
             weight = CASE WHEN $4::float8 IS NULL THEN weight ELSE GREATEST($4, weight
                        * power(0.5, greatest(0, extract(epoch FROM $3 - weight_at)) / $5)) END,
             weight_at = CASE WHEN $4::float8 IS NULL THEN weight_at ELSE $3 END,
             peak_weight = CASE WHEN $4::float8 IS NULL THEN peak_weight
                                ELSE GREATEST(peak_weight, $4) END
           WHERE id = $1""",
        concept_id,
        status,
        now,
        floor_weight,
        half_life_s,
    )


async def update_decay(
    conn: asyncpg.Connection,
    *,
    now: datetime,
    half_life_s: float,
    dormant_below: float,
    archive_below: float,
) -> int:
    """Decay every concept to ``now`` and move faded ones down (active → dormant below
    ``dormant_below``, dormant → archived below ``archive_below``). Idempotent: exponential
    decay composes, so any schedule of runs gives the same weights. Returns rows changed."""
    result = await conn.execute(
        """WITH decayed AS (
             SELECT id, weight * power(0.5, extract(epoch FROM $1 - weight_at) / $2) AS w
             FROM concepts WHERE weight_at < $1)
           UPDATE concepts c SET weight = d.w, weight_at = $1,
             status = CASE WHEN c.status = 'active' AND d.w < $3 THEN 'dormant'
                           WHEN c.status = 'dormant' AND d.w < $4 THEN 'archived'
                           ELSE c.status END
           FROM decayed d WHERE c.id = d.id""",
        now,
        half_life_s,
        dormant_below,
        archive_below,
    )
    return int(result.split()[-1])


async def search_fulltext(
    conn: asyncpg.Connection,
    *,
    agent_id: str,
    query: str,
    name_key: str,
    domain: str | None,
    project: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Concepts matching ``query`` by full text (``ts_rank``) or by folded name (rank + 1)."""
    rows = await conn.fetch(
        f"""SELECT * FROM (
              SELECT {CONCEPT_COLUMNS},
                     ts_rank(c.search_tsv, websearch_to_tsquery('english', $4))
                       + CASE WHEN strpos(c.name_key, $5) > 0 THEN 1 ELSE 0 END AS score
              FROM concepts c
              WHERE {_filters(2, 3)}
                AND (c.search_tsv @@ websearch_to_tsquery('english', $4)
                     OR strpos(c.name_key, $5) > 0)) hits
            ORDER BY score DESC, weight DESC, id LIMIT $6""",
        agent_id,
        domain,
        project,
        query,
        name_key,
        limit,
    )
    return [dict(r) for r in rows]


async def search_semantic(
    conn: asyncpg.Connection,
    *,
    agent_id: str,
    vector: str,
    dims: int,
    model: str,
    threshold: float,
    domain: str | None,
    project: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Concepts by cosine similarity (``embeddings``, owner ``concept``) >= ``threshold``;
    ``vector`` is pgvector's text form. Needs the ``embeddings`` table."""
    rows = await conn.fetch(
        f"""SELECT * FROM (
              SELECT {CONCEPT_COLUMNS}, 1 - (e.embedding <=> $4::vector) AS score
              FROM concepts c JOIN embeddings e ON e.owner_table = 'concept' AND e.owner_id = c.id
              WHERE {_filters(2, 3)} AND e.model = $5 AND e.dims = $6) hits
            WHERE score >= $7 ORDER BY score DESC, id LIMIT $8""",
        agent_id,
        domain,
        project,
        vector,
        model,
        dims,
        threshold,
        limit,
    )
    return [dict(r) for r in rows]


async def list_challengers(
    conn: asyncpg.Connection, *, concept_ids: list[str]
) -> dict[str, list[dict[str, str]]]:
    """For a batch of concepts, their challengers (sources of ``contradicts``/``supersedes``
    edges pointing at them) with status, in ONE aggregate query: ``{concept_id: [{name,
    status, relation}…]}``; concepts without challengers are absent."""
    rows = await conn.fetch(
        """SELECT r.target_id,
                  jsonb_agg(jsonb_build_object('name', s.name, 'status', s.status,
                                               'relation', r.kind) ORDER BY s.name, r.kind) AS c
           FROM concept_relations r JOIN concepts s ON s.id = r.source_id
           WHERE r.target_id = ANY($1::char(26)[]) AND r.kind IN ('contradicts', 'supersedes')
           GROUP BY r.target_id""",
        concept_ids,
    )
    return {r["target_id"]: list(r["c"]) for r in rows}


async def list_active(
    conn: asyncpg.Connection,
    *,
    agent_id: str,
    domains: list[str] | None,
    project: str | None,
    type: str | None,
    limit_per_type: int,
) -> list[dict[str, Any]]:
    """Active concepts, at most ``limit_per_type`` of each type, by weight; ``domains``: any
    of them (None = all)."""
    rows = await conn.fetch(
        f"""SELECT * FROM (
              SELECT {CONCEPT_COLUMNS},
                     row_number() OVER (PARTITION BY c.type ORDER BY c.weight DESC, c.name) AS rn
              FROM concepts c
              WHERE c.agent_id = $1 AND c.status = 'active'
                AND ($2::text[] IS NULL OR EXISTS (SELECT 1 FROM concept_domain_links l
                     JOIN concept_domains d ON d.id = l.domain_id
                     WHERE l.concept_id = c.id AND d.slug = ANY($2::text[])))
                AND ($3::text IS NULL OR $3 = ANY(c.projects))
                AND ($4::text IS NULL OR c.type = $4)) ranked
            WHERE rn <= $5
            ORDER BY CASE type WHEN 'principle' THEN 0 WHEN 'pattern' THEN 1 ELSE 2 END,
                     weight DESC, name""",
        agent_id,
        domains,
        project,
        type,
        limit_per_type,
    )
    return [dict(r) for r in rows]
