"""Memories, knowledge and ambient context of a user's own agent (context-tables spec), owner-only.

Every operation checks that the caller owns the agent or entry; someone else's id answers 404,
exactly like an id that does not exist. Writes commit first and then, when an embeddings
endpoint is configured and pgvector is present, index the text for semantic search; a failed
embedding is logged and leaves full-text search working.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta

import asyncpg

from gateway.agents.embeddings import Embedder, EmbeddingError
from gateway.clock import Clock
from gateway.errors import (
    AgentNotFoundError,
    KnowledgeDuplicateError,
    KnowledgeNotFoundError,
    MemoryNotFoundError,
    ValidationFailedError,
)
from gateway.ids import new_id
from gateway.store import conversations as conv_store
from gateway.store import knowledge as knowledge_store
from gateway.store import memories as memories_store
from gateway.store import search as search_store
from gateway.store import users as users_store
from models import Agent, User
from models.context import (
    AmbientContextCreate,
    AmbientContextRow,
    KnowledgeCreate,
    KnowledgeRow,
    KnowledgeUpdate,
    MemoryCreate,
    MemoryRow,
    MemoryUpdate,
)

log = logging.getLogger(__name__)


def content_hash(content: str) -> str:
    """SHA-256 of the UTF-8 content, 64 hex characters (knowledge de-duplication)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


async def owned_agent(conn: asyncpg.Connection, user: User, agent_id: str) -> Agent:
    """The agent ``agent_id`` if ``user`` owns it. Raises AgentNotFoundError (404) otherwise."""
    agent = await users_store.get_agent(conn, id=agent_id)
    if agent is None or agent.user_id != user.id:
        raise AgentNotFoundError(f"no agent {agent_id} of yours")
    return agent


async def index_text(
    pool: asyncpg.Pool, embedder: Embedder, *, owner_table: str, owner_id: str, text: str
) -> bool:
    """Embed ``text`` and store it for semantic search; False when not possible (logged)."""
    if not embedder.enabled:
        return False
    async with pool.acquire() as conn:
        if not await search_store.vector_available(conn):
            return False
    try:
        [vector] = await embedder.embed([text])
    except EmbeddingError as exc:
        log.warning("no embedding for %s %s: %s", owner_table, owner_id, exc)
        return False
    async with pool.acquire() as conn:
        await search_store.upsert_embedding(
            conn, owner_table=owner_table, owner_id=owner_id, model=embedder.model, vector=vector
        )
    return True


class MemoryService:
    """CRUD of agent memories, knowledge and ambient context for their owner."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, clock: Clock) -> None:
        self._pool = pool
        self._embedder = embedder
        self._clock = clock

    async def create_memory(self, user: User, agent_id: str, data: MemoryCreate) -> MemoryRow:
        """Store a memory of the caller's agent. 404 for another user's agent."""
        async with self._pool.acquire() as conn, conn.transaction():
            await owned_agent(conn, user, agent_id)
            if data.origin_conversation_id and not await _takes_part(
                conn, user, data.origin_conversation_id
            ):
                raise ValidationFailedError("origin_conversation_id: not one of your conversations")
            memory = await memories_store.insert_memory(
                conn, id=new_id(), agent_id=agent_id, fields=data.model_dump()
            )
        await index_text(
            self._pool,
            self._embedder,
            owner_table="memory",
            owner_id=memory.id,
            text=memory.content,
        )
        return memory

    async def list_memories(
        self, user: User, agent_id: str, *, type: str | None, include_expired: bool, limit: int
    ) -> list[MemoryRow]:
        """The agent's memories, most important first."""
        async with self._pool.acquire() as conn:
            await owned_agent(conn, user, agent_id)
            return await memories_store.list_memories(
                conn,
                agent_id=agent_id,
                type=type,
                include_expired=include_expired,
                now=self._clock.now(),
                limit=limit,
            )

    async def get_memory(self, user: User, agent_id: str, memory_id: str) -> MemoryRow:
        """One memory. Raises AgentNotFoundError / MemoryNotFoundError (404)."""
        async with self._pool.acquire() as conn:
            await owned_agent(conn, user, agent_id)
            memory = await memories_store.get_memory(conn, id=memory_id, agent_id=agent_id)
        if memory is None:
            raise MemoryNotFoundError(f"no memory {memory_id}")
        return memory

    async def update_memory(
        self, user: User, agent_id: str, memory_id: str, data: MemoryUpdate
    ) -> MemoryRow:
        """Change a memory's fields (those sent). Raises 404 as :meth:`get_memory`."""
        changes = data.model_dump(exclude_unset=True)
        if any(changes.get(k) is None for k in ("type", "content", "importance") if k in changes):
            raise ValidationFailedError("type, content and importance cannot be null")
        async with self._pool.acquire() as conn, conn.transaction():
            await owned_agent(conn, user, agent_id)
            memory = await memories_store.update_memory(
                conn, id=memory_id, agent_id=agent_id, changes=changes
            )
        if memory is None:
            raise MemoryNotFoundError(f"no memory {memory_id}")
        if "content" in changes:
            await index_text(
                self._pool,
                self._embedder,
                owner_table="memory",
                owner_id=memory.id,
                text=memory.content,
            )
        return memory

    async def delete_memory(self, user: User, agent_id: str, memory_id: str) -> None:
        """Delete a memory and its embeddings. Raises 404 as :meth:`get_memory`."""
        async with self._pool.acquire() as conn, conn.transaction():
            await owned_agent(conn, user, agent_id)
            await search_store.delete_embeddings(conn, owner_table="memory", owner_id=memory_id)
            if not await memories_store.delete_memory(conn, id=memory_id, agent_id=agent_id):
                raise MemoryNotFoundError(f"no memory {memory_id}")

    async def create_knowledge(
        self, user: User, data: KnowledgeCreate
    ) -> tuple[KnowledgeRow, bool]:
        """Add an entry, or return the existing one with the same content: ``(row, created)``."""
        async with self._pool.acquire() as conn, conn.transaction():
            await _check_agents(conn, user, data.allowed_agents)
            entry, created = await knowledge_store.insert_knowledge(
                conn,
                id=new_id(),
                user_id=user.id,
                content_hash=content_hash(data.content),
                fields=data.model_dump(),
            )
        if created:
            await index_text(
                self._pool,
                self._embedder,
                owner_table="knowledge",
                owner_id=entry.id,
                text=_knowledge_text(entry),
            )
        return entry, created

    async def list_knowledge(
        self, user: User, *, category: str | None, agent_id: str | None, limit: int
    ) -> list[KnowledgeRow]:
        """Entries by priority; with ``agent_id`` only those that agent may read."""
        async with self._pool.acquire() as conn:
            if agent_id is not None:
                await owned_agent(conn, user, agent_id)
            return await knowledge_store.list_knowledge(
                conn, user_id=user.id, category=category, readable_by=agent_id, limit=limit
            )

    async def get_knowledge(self, user: User, entry_id: str) -> KnowledgeRow:
        """One entry of the caller's. Raises KnowledgeNotFoundError (404)."""
        async with self._pool.acquire() as conn:
            entry = await knowledge_store.get_knowledge(conn, id=entry_id, user_id=user.id)
        if entry is None:
            raise KnowledgeNotFoundError(f"no knowledge entry {entry_id}")
        return entry

    async def update_knowledge(
        self, user: User, entry_id: str, data: KnowledgeUpdate
    ) -> KnowledgeRow:
        """Change an entry. Raises 404, or KnowledgeDuplicateError (409) for duplicate content."""
        changes = data.model_dump(exclude_unset=True)
        for name in ("category", "content", "tags", "priority"):
            if name in changes and changes[name] is None:
                raise ValidationFailedError(f"{name} cannot be null")
        if "content" in changes:
            changes["content_hash"] = content_hash(changes["content"])
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await _check_agents(conn, user, changes.get("allowed_agents"))
                entry = await knowledge_store.update_knowledge(
                    conn, id=entry_id, user_id=user.id, changes=changes
                )
        except asyncpg.UniqueViolationError as exc:
            raise KnowledgeDuplicateError("another entry has exactly this content") from exc
        if entry is None:
            raise KnowledgeNotFoundError(f"no knowledge entry {entry_id}")
        if "content" in changes or "title" in changes:
            await index_text(
                self._pool,
                self._embedder,
                owner_table="knowledge",
                owner_id=entry.id,
                text=_knowledge_text(entry),
            )
        return entry

    async def delete_knowledge(self, user: User, entry_id: str) -> None:
        """Delete an entry and its embeddings. Raises KnowledgeNotFoundError (404)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await search_store.delete_embeddings(conn, owner_table="knowledge", owner_id=entry_id)
            if not await knowledge_store.delete_knowledge(conn, id=entry_id, user_id=user.id):
                raise KnowledgeNotFoundError(f"no knowledge entry {entry_id}")

    async def record_ambient(self, user: User, data: AmbientContextCreate) -> AmbientContextRow:
        """Store a snapshot that expires ``ttl_seconds`` from now."""
        now = self._clock.now()
        async with self._pool.acquire() as conn:
            return await knowledge_store.insert_ambient(
                conn,
                id=new_id(),
                user_id=user.id,
                captured_at=now,
                expires_at=now + timedelta(seconds=data.ttl_seconds),
                fields=data.model_dump(exclude={"ttl_seconds"}),
            )

    async def latest_ambient(self, user: User) -> AmbientContextRow | None:
        """The newest unexpired snapshot, or None."""
        async with self._pool.acquire() as conn:
            return await knowledge_store.get_latest_ambient(
                conn, user_id=user.id, now=self._clock.now()
            )


def _knowledge_text(entry: KnowledgeRow) -> str:
    return f"{entry.title}\n{entry.content}" if entry.title else entry.content


async def _takes_part(conn: asyncpg.Connection, user: User, conversation_id: str) -> bool:
    membership = await conv_store.get_membership(
        conn, conversation_id=conversation_id, user_id=user.id
    )
    return membership is not None


async def _check_agents(conn: asyncpg.Connection, user: User, agent_ids: list[str] | None) -> None:
    for agent_id in agent_ids or ():
        agent = await users_store.get_agent(conn, id=agent_id)
        if agent is None or agent.user_id != user.id:
            raise ValidationFailedError(f"allowed_agents: {agent_id} is not one of your agents")
