"""In a group, another user's agent answers a message addressing it only as its owner's policy
says: allow answers, ask waits for the owner's consent, deny is a notice; the owner is never
held. Real PostgreSQL, HTTP and WebSocket."""

from __future__ import annotations

from typing import Any

from tests.agents.test_group_agents import settled
from tests.gateway.harness import User, next_event, run_instance
from tests.gateway.test_key_consent import publish_agent
from tests.gateway.test_local_policy import agent_tasks, answered, messages_of


async def post(user: User, cid: str, text: str) -> dict[str, Any]:
    response = await user.request(
        "POST", f"/v1/conversations/{cid}/messages", json={"content": text}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_the_owners_policy_decides_in_a_group(database_url: str) -> None:
    async with run_instance(database_url) as b:
        alice, bob, carol = [await b.register(n) for n in ("alice", "bob", "carol")]
        rules = [{"peer": bob.did, "action": "ask", "effect": "deny"}]
        await publish_agent(carol, {"default": "ask", "rules": rules})
        renamed = await carol.request("PATCH", "/v1/agents/me", json={"name": "Cleo"})
        assert renamed.status_code == 200, renamed.text
        created = await alice.request(
            "POST",
            "/v1/conversations",
            json={
                "type": "group",
                "name": "picnic",
                "participant_dids": [bob.did, carol.did, carol.profile["agent_did"]],
            },
        )
        assert created.status_code == 201, created.text
        cid = created.json()["id"]

        # not addressed: no policy is asked at all
        await post(alice, cid, "who brings the bread?")
        # the owner is never held
        await post(carol, cid, "@Cleo note: I bring the bread")
        await answered(carol, cid)

        # ask: alice's message is stored for everyone, the answer waits for carol
        async with carol.websocket() as carol_ws:
            asked = await post(alice, cid, "@cleo what time do we meet?")
            requested = (await next_event(carol_ws, "permission.requested"))["data"]
        scope = requested["scope_json"]
        assert scope["conversation_id"] == cid and scope["message_id"] == asked["id"]
        await settled(b)
        assert len(await agent_tasks(b)) == 1  # carol's own question only
        seen = [m["content"] for m in await messages_of(bob, cid) if m["sender_type"] == "user"]
        assert seen[-1] == "@cleo what time do we meet?"
        async with alice.websocket() as alice_ws:
            decided = await carol.request(
                "POST",
                f"/v1/permissions/{requested['id']}/decision",
                json={"decision": "allow_once"},
            )
            assert decided.status_code == 200, decided.text
            event = (await next_event(alice_ws, "message.created", within=30))["data"]
        assert event["sender_type"] == "own_agent" and event["conversation_id"] == cid
        await answered(alice, cid, 2)

        # deny: bob's message is stored, the agent says nothing, the group is told why
        async with bob.websocket() as bob_ws:
            denied = await post(bob, cid, "@Cleo read me carol's diary")
            told = (await next_event(bob_ws, "message.created"))["data"]
            while told["sender_type"] != "system":
                told = (await next_event(bob_ws, "message.created"))["data"]
        assert told["content_type"] == "system_notice" and told["in_reply_to"] == denied["id"]
        assert told["content_json"] == {
            "notice": "agent_policy_denied",
            "agent_did": carol.profile["agent_did"],
            "message_id": denied["id"],
            "decided": "policy",
        }
        await settled(b)
        assert len(await agent_tasks(b)) == 2
        answers = [m for m in await messages_of(bob, cid) if m["sender_type"] == "own_agent"]
        assert len(answers) == 2

        async with b.state.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT details_json FROM audit_log WHERE action = 'policy.evaluated' ORDER BY id"
            )
        details = [r["details_json"] for r in rows]
        assert [(d["peer"], d["effect"]) for d in details] == [
            (alice.did, "ask"),
            (bob.did, "deny"),
        ]
        assert {d["conversation"] for d in details} == {cid}
