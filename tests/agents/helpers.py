"""Small helpers shared by the agent-runtime tests."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from tests.gateway.harness import User


def agent_id(user: User) -> str:
    """The id of ``user``'s main agent (the last segment of its did:web)."""
    return str(user.profile["agent_did"]).rsplit(":", 1)[-1]


async def set_model(database_url: str, user: User, job: str, provider: str, model: str) -> None:
    """Point one job of ``user``'s agent at ``provider``/``model`` (the agents PATCH API is the
    accounts work; until then tests set ``model_config_json`` directly)."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            """UPDATE agents SET model_config_json = jsonb_set(model_config_json, $2::text[], $3)
               WHERE id = $1""",
            agent_id(user),
            [job],
            json.dumps({"provider": provider, "model": model}),
        )
    finally:
        await conn.close()


async def talk_to_agent(user: User) -> str:
    """Create (or find) the user's direct conversation with their own agent; its id."""
    response = await user.request(
        "POST",
        "/v1/conversations",
        json={"type": "direct_user_agent", "participant_did": user.profile["agent_did"]},
    )
    assert response.status_code in (200, 201), response.text
    return str(response.json()["id"])


async def wait_for_reply(user: User, conversation_id: str, count: int = 1) -> list[dict]:
    """Poll until the conversation holds ``count`` messages not sent by a user; oldest first."""
    for _ in range(200):
        page = (await user.request("GET", f"/v1/conversations/{conversation_id}/messages")).json()
        replies = [m for m in page["items"] if m["sender_type"] != "user"]
        if len(replies) >= count:
            return list(reversed(replies))
        await asyncio.sleep(0.05)
    raise AssertionError(f"no reply in {conversation_id}")
