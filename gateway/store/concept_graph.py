"""The edges and history of the concept graph: relations, frame references, occurrences, and the
reads that walk them (graph around a concept, domain summary). Tables of migration 0013."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from gateway.store.concepts import CONCEPT_COLUMNS


async def upsert_relation(
    conn: asyncpg.Connection,
    *,
    id: str,
    agent_id: str,
    source_id: str,
    target_id: str,
    kind: str,
    notes: str | None,
) -> str:
    """Insert the edge, or replace the notes of the same edge; returns its id."""
    return str(
        await conn.fetchval(
            """INSERT INTO concept_relations (id, agent_id, source_id, target_id, kind, notes)
               VALUES ($1, $2, $3, $4, $5, $6)
               ON CONFLICT (source_id, target_id, kind) DO UPDATE SET notes = EXCLUDED.notes
               RETURNING id""",
            id,
            agent_id,
            source_id,
            target_id,
            kind,
            notes,
        )
    )


async def upsert_frame_reference(
    conn: asyncpg.Connection,
    *,
    frame_id: str,
    reference_id: str,
    agent_id: str,
    alias: str,
    concept_id: str,
    notes: str | None,
) -> str:
    """``concept interpreted_under frame:<alias>`` (the frame is created if new); returns the
    reference id."""
    await conn.execute(
        """INSERT INTO concept_frames (id, agent_id, alias) VALUES ($1, $2, $3)
           ON CONFLICT (agent_id, alias) DO NOTHING""",
        frame_id,
        agent_id,
        alias,
    )
    return str(
        await conn.fetchval(
            """INSERT INTO concept_frame_references (id, concept_id, frame_id, notes)
               SELECT $1, $2, f.id, $5 FROM concept_frames f WHERE f.agent_id = $3 AND f.alias = $4
               ON CONFLICT (concept_id, frame_id) DO UPDATE SET notes = EXCLUDED.notes
               RETURNING id""",
            reference_id,
            concept_id,
            agent_id,
            alias,
            notes,
        )
    )


async def insert_occurrence(
    conn: asyncpg.Connection,
    *,
    id: str,
    concept_id: str,
    session: str | None,
    conversation_id: str | None,
    project: str | None,
    note: str | None,
    seen_at: datetime,
) -> None:
    """Record one occurrence of a concept."""
    await conn.execute(
        """INSERT INTO concept_occurrences (id, concept_id, session, conversation_id, project,
                                            note, seen_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7)""",
        id,
        concept_id,
        session,
        conversation_id,
        project,
        note,
        seen_at,
    )


async def list_edges(conn: asyncpg.Connection, *, concept_ids: list[str]) -> list[dict[str, Any]]:
    """Every relation touching one of ``concept_ids`` (either end), plus their frame references:
    source, source_id, target, target_id, kind, notes, target_status (None for a frame)."""
    rows = await conn.fetch(
        """SELECT s.name AS source, s.id AS source_id, t.name AS target, t.id AS target_id,
                  r.kind, r.notes, t.status AS target_status
           FROM concept_relations r
           JOIN concepts s ON s.id = r.source_id JOIN concepts t ON t.id = r.target_id
           WHERE r.source_id = ANY($1::char(26)[]) OR r.target_id = ANY($1::char(26)[])
           UNION ALL
           SELECT c.name, c.id, 'frame:' || f.alias, NULL, 'interpreted_under', fr.notes, NULL
           FROM concept_frame_references fr
           JOIN concepts c ON c.id = fr.concept_id JOIN concept_frames f ON f.id = fr.frame_id
           WHERE fr.concept_id = ANY($1::char(26)[])
           ORDER BY 1, 5, 3""",
        concept_ids,
    )
    return [dict(r) for r in rows]


async def list_concepts_by_id(
    conn: asyncpg.Connection, *, concept_ids: list[str]
) -> list[dict[str, Any]]:
    """Concept rows for ``concept_ids`` (any order)."""
    rows = await conn.fetch(
        f"SELECT {CONCEPT_COLUMNS} FROM concepts c WHERE c.id = ANY($1::char(26)[])", concept_ids
    )
    return [dict(r) for r in rows]


async def list_recent_occurrences(
    conn: asyncpg.Connection, *, concept_ids: list[str], per_concept: int
) -> list[dict[str, Any]]:
    """The latest ``per_concept`` occurrences of each concept, newest first."""
    rows = await conn.fetch(
        """SELECT concept, session, conversation_id, project, note, seen_at FROM (
             SELECT c.name AS concept, o.session, o.conversation_id, o.project, o.note, o.seen_at,
                    row_number() OVER (PARTITION BY o.concept_id ORDER BY o.seen_at DESC, o.id DESC)
                      AS rn
             FROM concept_occurrences o JOIN concepts c ON c.id = o.concept_id
             WHERE o.concept_id = ANY($1::char(26)[])) ranked
           WHERE rn <= $2 ORDER BY seen_at DESC""",
        concept_ids,
        per_concept,
    )
    return [dict(r) for r in rows]


async def get_domain_summary(
    conn: asyncpg.Connection, *, agent_id: str, slug: str, top: int, sessions: int
) -> dict[str, Any] | None:
    """``{"counts": [{type, status, n}], "top": [concept…], "recent_sessions": [{session,
    conversation_id, last_seen, concepts}]}`` of one domain, or None when it does not exist."""
    domain_id = await conn.fetchval(
        "SELECT id FROM concept_domains WHERE agent_id = $1 AND slug = $2", agent_id, slug
    )
    if domain_id is None:
        return None
    in_domain = "c.id IN (SELECT concept_id FROM concept_domain_links WHERE domain_id = $1)"
    counts = await conn.fetch(
        f"""SELECT c.type, c.status, count(*) AS n FROM concepts c WHERE {in_domain}
            GROUP BY c.type, c.status ORDER BY c.type, c.status""",
        domain_id,
    )
    top_rows = await conn.fetch(
        f"""SELECT {CONCEPT_COLUMNS} FROM concepts c WHERE {in_domain}
            ORDER BY c.weight DESC, c.name LIMIT $2""",
        domain_id,
        top,
    )
    recent = await conn.fetch(
        f"""SELECT o.session, o.conversation_id, max(o.seen_at) AS last_seen,
                   count(DISTINCT o.concept_id) AS concepts
            FROM concept_occurrences o JOIN concepts c ON c.id = o.concept_id
            WHERE {in_domain}
            GROUP BY o.session, o.conversation_id ORDER BY last_seen DESC LIMIT $2""",
        domain_id,
        sessions,
    )
    return {
        "counts": [dict(r) for r in counts],
        "top": [dict(r) for r in top_rows],
        "recent_sessions": [dict(r) for r in recent],
    }
