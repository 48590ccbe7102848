"""Public agents (``agents.is_public``): the ones with an Agent Card and AgentFacts."""

from __future__ import annotations

import asyncpg

from gateway.store.users import get_agent
from models import Agent


async def get_public_agent(conn: asyncpg.Connection, *, id: str) -> Agent | None:
    """The agent ``id`` if it is public, else None."""
    agent = await get_agent(conn, id=id)
    return agent if agent is not None and agent.is_public else None


async def list_public_agent_ids(conn: asyncpg.Connection, *, limit: int = 100) -> list[str]:
    """Ids of public agents, oldest first (at most ``limit``)."""
    records = await conn.fetch("SELECT id FROM agents WHERE is_public ORDER BY id LIMIT $1", limit)
    return [r["id"] for r in records]
