"""Full-text (tsvector) and semantic (pgvector) search over memories, knowledge and messages.

Full-text search uses ``websearch_to_tsquery('english', …)`` against the ``search_tsv`` columns
of migration 0006 and ranks with ``ts_rank``. Semantic search needs the ``embeddings`` table
(created only where the ``vector`` extension exists) and ranks by cosine similarity
``1 - (embedding <=> query)`` (pgvector ``<=>`` is cosine distance).

Memories and knowledge are embedded when written; messages by the background indexer
(:mod:`gateway.workers.message_embeddings`), which finds them with
:func:`list_unembedded_messages`. A message whose content changes loses its embeddings
(:func:`forget_message_embeddings`) and is announced on :data:`MESSAGE_EMBEDDINGS_CHANNEL`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

_TSQUERY = "websearch_to_tsquery('english', $2)"


def vector_literal(vector: list[float]) -> str:
    """pgvector's text form of ``vector``: ``[0.1,0.2,…]``."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


async def vector_available(conn: asyncpg.Connection) -> bool:
    """True when this database has the ``embeddings`` table (pgvector was usable)."""
    return bool(await conn.fetchval("SELECT to_regclass('embeddings') IS NOT NULL"))


async def upsert_embedding(
    conn: asyncpg.Connection, *, owner_table: str, owner_id: str, model: str, vector: list[float]
) -> None:
    """Store (or replace) the ``model`` embedding of one memory/knowledge/message row."""
    await conn.execute(
        """INSERT INTO embeddings (owner_table, owner_id, model, dims, embedding)
           VALUES ($1, $2, $3, $4, $5::vector)
           ON CONFLICT (owner_table, owner_id, model)
           DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding,
                         created_at = NOW()""",
        owner_table,
        owner_id,
        model,
        len(vector),
        vector_literal(vector),
    )


async def delete_embeddings(conn: asyncpg.Connection, *, owner_table: str, owner_id: str) -> None:
    """Forget every embedding of one row (no-op without pgvector)."""
    if await vector_available(conn):
        await conn.execute(
            "DELETE FROM embeddings WHERE owner_table = $1 AND owner_id = $2",
            owner_table,
            owner_id,
        )


MESSAGE_EMBEDDINGS_CHANNEL = "confer_message_embeddings"

# Messages worth embedding: visible text a person or agent wrote (no notices, no tool data).
_EMBEDDABLE_MESSAGE = """m.deleted_at IS NULL AND m.content IS NOT NULL AND btrim(m.content) <> ''
    AND m.content_type IN ('text', 'code') AND m.sender_type <> 'system'
    AND NOT (m.id = ANY($2::char(26)[]))
    AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.owner_table = 'message'
                    AND e.owner_id = m.id AND e.model = $1)"""


async def list_unembedded_messages(
    conn: asyncpg.Connection,
    *,
    model: str,
    after: str = "",
    ids: list[str] | None = None,
    skip: list[str] | None = None,
    limit: int,
) -> list[asyncpg.Record]:
    """Embeddable messages without a ``model`` embedding, ``(id, content)`` in id order.

    Only ids above ``after`` (exclusive; ``""`` = from the first), or only ``ids`` when given;
    never ``skip``. Walks the ``messages`` primary key from ``after`` and probes the
    ``embeddings`` primary key per row, so the cost follows the rows after ``after``.
    """
    if ids is not None:
        where = "m.id = ANY($3::char(26)[])"
        bound: Any = ids
    else:
        where = "m.id > $3::char(26)"
        bound = after
    records = await conn.fetch(
        f"""SELECT m.id, m.content FROM messages m
            WHERE {where} AND {_EMBEDDABLE_MESSAGE}
            ORDER BY m.id LIMIT $4""",
        model,
        skip or [],
        bound,
        limit,
    )
    return list(records)


async def store_message_embeddings(
    conn: asyncpg.Connection, *, model: str, items: list[tuple[str, str, list[float]]]
) -> list[str]:
    """Upsert ``(message_id, embedded content, vector)`` items; returns the ids stored.

    An item is stored only when its message is still visible with exactly that content: the
    rows are read ``FOR SHARE`` (in id order, skipping rows another transaction is changing),
    so an edit or delete either committed first and the item is dropped, or waits for this
    transaction and then deletes the embedding itself. Call inside a transaction.
    """
    rows = await conn.fetch(
        """SELECT id, content FROM messages WHERE id = ANY($1::char(26)[]) AND deleted_at IS NULL
           ORDER BY id FOR SHARE SKIP LOCKED""",
        [item[0] for item in items],
    )
    current = {r["id"]: r["content"] for r in rows}
    stored = []
    for message_id, content, vector in sorted(items, key=lambda item: item[0]):
        if current.get(message_id) == content:
            await upsert_embedding(
                conn, owner_table="message", owner_id=message_id, model=model, vector=vector
            )
            stored.append(message_id)
    return stored


async def forget_message_embeddings(
    conn: asyncpg.Connection, *, message_id: str, reembed: bool
) -> None:
    """Delete a message's embeddings after its content changed (no-op without pgvector).

    With ``reembed`` (an edit) the indexer is told on :data:`MESSAGE_EMBEDDINGS_CHANNEL` when
    the transaction commits (PostgreSQL ``NOTIFY`` is transactional).
    """
    if not await vector_available(conn):
        return
    await conn.execute(
        "DELETE FROM embeddings WHERE owner_table = 'message' AND owner_id = $1", message_id
    )
    if reembed:
        await conn.execute("SELECT pg_notify($1, $2)", MESSAGE_EMBEDDINGS_CHANNEL, message_id)


_MEMORY_FILTER = """m.agent_id IN (SELECT id FROM agents WHERE user_id = $1)
                    AND (m.expires_at IS NULL OR m.expires_at > $3)
                    AND ($4::text IS NULL OR m.project_id = $4)
                    AND ($5::text IS NULL OR m.domain = $5)"""
_KNOWLEDGE_FILTER = """k.user_id = $1 AND ($4::text IS NULL OR k.project_id = $4)
                       AND ($5::text IS NULL OR k.domain = $5)"""
# Messages have no project or domain, so either filter excludes them.
_MESSAGE_FILTER = """msg.deleted_at IS NULL
                     AND msg.conversation_id IN (SELECT conversation_id
                                                 FROM conversation_participants WHERE user_id = $1)
                     AND $3::timestamptz IS NOT NULL AND $4::text IS NULL AND $5::text IS NULL"""


async def fulltext(
    conn: asyncpg.Connection,
    *,
    scope: str,
    user_id: str,
    query: str,
    now: datetime,
    project: str | None,
    domain: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Full-text hits of ``scope`` (memories | knowledge | messages) visible to ``user_id``.

    Each hit: kind, id, text, title, conversation_id, project_id, domain, score (ts_rank).
    Messages have no project or domain, so those filters exclude them.
    """
    if scope == "memories":
        sql = f"""SELECT 'memory' AS kind, m.id, m.content AS text, NULL AS title,
                         m.origin_conversation_id AS conversation_id, m.project_id, m.domain,
                         ts_rank(m.search_tsv, {_TSQUERY}) AS score
                  FROM agent_memories m
                  WHERE m.search_tsv @@ {_TSQUERY} AND {_MEMORY_FILTER}"""
    elif scope == "knowledge":
        sql = f"""SELECT 'knowledge' AS kind, k.id, k.content AS text, k.title,
                         NULL AS conversation_id, k.project_id, k.domain,
                         ts_rank(k.search_tsv, {_TSQUERY}) AS score
                  FROM knowledge k
                  WHERE k.search_tsv @@ {_TSQUERY} AND {_KNOWLEDGE_FILTER}
                    AND $3::timestamptz IS NOT NULL"""
    else:
        sql = f"""SELECT 'message' AS kind, s.message_id AS id, msg.content AS text,
                         NULL AS title, s.conversation_id, NULL AS project_id, NULL AS domain,
                         ts_rank(s.search_tsv, {_TSQUERY}) AS score
                  FROM message_search s JOIN messages msg ON msg.id = s.message_id
                  WHERE s.search_tsv @@ {_TSQUERY} AND {_MESSAGE_FILTER}"""
    records = await conn.fetch(
        sql + " ORDER BY score DESC, id DESC LIMIT $6", user_id, query, now, project, domain, limit
    )
    return [dict(r) for r in records]


async def semantic(
    conn: asyncpg.Connection,
    *,
    scope: str,
    user_id: str,
    vector: list[float],
    model: str,
    threshold: float,
    now: datetime,
    project: str | None,
    domain: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Semantic hits of ``scope`` (memories | knowledge | messages) with cosine similarity
    ≥ ``threshold``.

    Only embeddings made by ``model`` with the query's dimension are compared. Hits have the
    same keys as :func:`fulltext`; ``score`` is the similarity in [−1, 1]. Messages come only
    from conversations ``user_id`` takes part in, and never when a project or domain is given.
    """
    if scope == "memories":
        select = """'memory' AS kind, m.id, m.content AS text, NULL AS title,
                    m.origin_conversation_id AS conversation_id, m.project_id, m.domain"""
        source = f"agent_memories m JOIN embeddings e ON e.owner_table = 'memory' AND e.owner_id = m.id WHERE {_MEMORY_FILTER}"  # noqa: E501
    elif scope == "knowledge":
        select = """'knowledge' AS kind, k.id, k.content AS text, k.title,
                    NULL AS conversation_id, k.project_id, k.domain"""
        source = f"knowledge k JOIN embeddings e ON e.owner_table = 'knowledge' AND e.owner_id = k.id WHERE {_KNOWLEDGE_FILTER} AND $3::timestamptz IS NOT NULL"  # noqa: E501
    else:
        select = """'message' AS kind, msg.id, msg.content AS text, NULL AS title,
                    msg.conversation_id, NULL AS project_id, NULL AS domain"""
        source = f"messages msg JOIN embeddings e ON e.owner_table = 'message' AND e.owner_id = msg.id WHERE {_MESSAGE_FILTER}"  # noqa: E501
    records = await conn.fetch(
        f"""SELECT * FROM (
              SELECT {select}, 1 - (e.embedding <=> $2::vector) AS score
              FROM {source} AND e.model = $6 AND e.dims = $7) hits
            WHERE score >= $8 ORDER BY score DESC, id DESC LIMIT $9""",
        user_id,
        vector_literal(vector),
        now,
        project,
        domain,
        model,
        len(vector),
        threshold,
        limit,
    )
    return [dict(r) for r in records]


async def try_advisory_lock(conn: asyncpg.Connection, *, key: str) -> bool:
    """Take the session-level advisory lock named ``key`` if free; True when this connection
    holds it (until :func:`advisory_unlock` or the connection closes)."""
    return bool(await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key))


async def advisory_unlock(conn: asyncpg.Connection, *, key: str) -> None:
    """Release the advisory lock named ``key`` held by this connection."""
    await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
