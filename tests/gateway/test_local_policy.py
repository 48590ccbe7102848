"""An agent's policy decides for local users too: a ``deny`` refuses another local user over
REST as it refuses the same user over A2A (with an API key) and a peer."""

from __future__ import annotations

from typing import Any

from tests.gateway.harness import User, run_instance
from tests.gateway.test_key_consent import issue_key, publish_agent, send


async def with_agent(user: User, agent_did: str) -> dict[str, Any]:
    response = await user.request(
        "POST",
        "/v1/conversations",
        json={"type": "direct_user_agent", "participant_did": agent_did},
    )
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def test_a_deny_policy_refuses_a_local_user_over_rest_and_a2a(database_url: str) -> None:
    async with run_instance(database_url) as b:
        bob, carol, dave = [await b.register(n) for n in ("bob", "carol", "dave")]
        rules = [{"peer": bob.did, "action": "ask", "effect": "deny"}]
        agent_id = await publish_agent(carol, {"default": "auto", "rules": rules})
        agent_did = carol.profile["agent_did"]

        conversation = await with_agent(bob, agent_did)
        refused = await bob.request(
            "POST",
            f"/v1/conversations/{conversation['id']}/messages",
            json={"content": "let me in"},
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "agent_policy_denied"
        task = await send(b, agent_id, await issue_key(bob), "let me in by key")
        assert task["status"]["state"] == "TASK_STATE_REJECTED"

        # Someone the rule does not name gets the agent's default (auto: allow).
        theirs = await with_agent(dave, agent_did)
        allowed = await dave.request(
            "POST", f"/v1/conversations/{theirs['id']}/messages", json={"content": "hello"}
        )
        assert allowed.status_code == 201, allowed.text
        # The owner talking to her own agent meets no policy.
        own = await with_agent(carol, agent_did)
        mine = await carol.request(
            "POST", f"/v1/conversations/{own['id']}/messages", json={"content": "note to self"}
        )
        assert mine.status_code == 201, mine.text

        async with b.state.pool.acquire() as conn:
            stored = await conn.fetch(
                "SELECT content FROM messages WHERE sender_type = 'user' ORDER BY id"
            )
            details = await conn.fetch(
                "SELECT details_json FROM audit_log WHERE action = 'policy.evaluated' ORDER BY id"
            )
        assert [r["content"] for r in stored] == ["hello", "note to self"]
        effects = [d["details_json"]["effect"] for d in details]
        assert effects == ["deny", "deny", "allow"]
