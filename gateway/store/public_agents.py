"""Public agents (``agents.is_public``): the ones with an Agent Card and AgentFacts."""

from __future__ import annotations

import asyncpg

from gateway.store.users import ACTIVE_OWNER, account_active, get_agent
from models import Agent


async def get_public_agent(conn: asyncpg.Connection, *, id: str) -> Agent | None:
    """The agent ``id`` if it is public and its owner's account is active, else None."""
    agent = await get_agent(conn, id=id)
    if agent is None or not agent.is_public:
        return None
    return agent if await account_active(conn, user_id=agent.user_id) else None


async def list_public_agent_ids(conn: asyncpg.Connection, *, limit: int = 100) -> list[str]:
    """Ids of public agents of active accounts, oldest first (at most ``limit``)."""
    condition = ACTIVE_OWNER.format(user_id="agents.user_id")
    records = await conn.fetch(
        f"SELECT id FROM agents WHERE is_public AND {condition} ORDER BY id LIMIT $1", limit
    )
    return [r["id"] for r in records]
