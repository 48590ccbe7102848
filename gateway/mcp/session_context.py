"""``get_session_context``: what a coding agent should know when a session opens (MCP server spec).

Composes several searches (one per query, memories and knowledge), the project memory of the
project, and the most recent conversations, then fills a token budget in that order of
importance: project memory, ranked memories/knowledge (best similarity across queries, semantic
before full-text), recent threads. Read-only.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.agents.tokens import estimate_tokens
from gateway.services.search import SearchService
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from gateway.store import project_memory as project_memory_store
from models import User
from models.context import SearchHit


def _rank(per_query: dict[str, list[SearchHit]]) -> list[SearchHit]:
    best: dict[tuple[str, str], SearchHit] = {}
    for hits in per_query.values():
        for hit in hits:
            key = (hit.kind, hit.id)
            seen = best.get(key)
            if seen is None or (hit.method, hit.score) > (seen.method, seen.score):
                best[key] = hit
    return sorted(best.values(), key=lambda h: (h.method == "semantic", h.score), reverse=True)


async def _searches(
    search: SearchService,
    user: User,
    queries: list[str],
    project: str | None,
    domain: str | None,
    limit: int,
) -> dict[str, list[SearchHit]]:
    per_query: dict[str, list[SearchHit]] = {}
    for query in queries:
        results = await search.search(
            user,
            query,
            scopes=("memories", "knowledge"),
            project=project,
            domain=domain,
            limit=limit,
        )
        per_query[query] = results.hits
    return per_query


async def _threads(pool: asyncpg.Pool, user: User, count: int) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        conversations = await conv_store.list_conversations_for_user(
            conn, user_id=user.id, limit=count
        )
        threads = []
        for conversation in conversations:
            recent = await messages_store.list_messages(
                conn, conversation_id=conversation.id, before=None, limit=3
            )
            threads.append(
                {
                    "conversation_id": conversation.id,
                    "name": conversation.name,
                    "type": conversation.type,
                    "recent": [
                        {"sender_type": m.sender_type, "content": m.content}
                        for m in reversed(recent)
                    ],
                }
            )
    return threads


async def session_context(
    pool: asyncpg.Pool,
    search: SearchService,
    user: User,
    *,
    topic: str,
    queries: list[str],
    project: str | None,
    domain: str | None,
    token_budget: int,
    limit_per_query: int = 5,
) -> dict[str, Any]:
    """The session-opening context as a JSON-able dict (see module docstring): ``search``
    ranks memories and knowledge, ``pool`` gives project memory and recent threads."""
    per_query = await _searches(search, user, queries, project, domain, limit_per_query)
    async with pool.acquire() as conn:
        documents = await project_memory_store.list_for_user(
            conn, user_id=user.id, project_id=project, limit=10
        )
    candidates: list[tuple[str, dict[str, Any]]] = [
        (
            "project_memory",
            {
                "project_id": d["project_id"],
                "peer_did": d["peer_did"],
                "version": d["version"],
                "facts_md": d["facts_md"],
                "decisions_md": d["decisions_md"],
            },
        )
        for d in documents
    ]
    candidates += [("memories", h.model_dump(mode="json")) for h in _rank(per_query)]
    candidates += [("recent_threads", t) for t in await _threads(pool, user, 5)]
    sections: dict[str, list[dict[str, Any]]] = {
        "project_memory": [],
        "memories": [],
        "recent_threads": [],
    }
    used, dropped = estimate_tokens(topic), 0
    for section, item in candidates:
        cost = estimate_tokens(str(item))
        if used + cost > token_budget:
            dropped += 1
            continue
        sections[section].append(item)
        used += cost
    return {
        "topic": topic,
        "token_budget": token_budget,
        "tokens": used,
        "dropped": dropped,
        "per_query": {q: [h.id for h in hits] for q, hits in per_query.items()},
        **sections,
    }
