"""An agent's policy decides for local users too: a ``deny`` refuses another local user over
REST as it refuses the same user over A2A (with an API key) and a peer; an ``ask`` holds the
agent's answer for the owner's consent; contacts' trust and overrides count."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gateway.harness import Instance, User, next_event, run_instance
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


async def messages_of(user: User, cid: str) -> list[dict[str, Any]]:
    page = await user.request("GET", f"/v1/conversations/{cid}/messages?limit=100")
    assert page.status_code == 200, page.text
    return list(reversed(page.json()["items"]))


async def agent_tasks(b: Instance) -> list[str]:
    async with b.state.pool.acquire() as conn:
        rows = await conn.fetch("SELECT status FROM agent_tasks ORDER BY id")
    return [r["status"] for r in rows]


async def answered(user: User, cid: str, count: int = 1) -> list[dict[str, Any]]:
    """The agent's answers in ``cid`` once there are ``count`` of them (generous deadline)."""
    for _ in range(400):
        answers = [m for m in await messages_of(user, cid) if m["sender_type"] == "own_agent"]
        if len(answers) >= count:
            return answers
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {count} agent answers in {cid}")


async def test_ask_holds_the_agents_answer_until_the_owner_allows(database_url: str) -> None:
    async with run_instance(database_url) as b:
        bob, carol = await b.register("bob"), await b.register("carol")
        await publish_agent(carol)  # default policy: ask
        conversation = await with_agent(bob, carol.profile["agent_did"])
        cid = conversation["id"]
        async with carol.websocket() as carol_ws:
            posted = await bob.request(
                "POST", f"/v1/conversations/{cid}/messages", json={"content": "Lunch on Friday?"}
            )
            assert posted.status_code == 201, posted.text
            notice = (await next_event(carol_ws, "message.created"))["data"]
            requested = (await next_event(carol_ws, "permission.requested"))["data"]
        # bob sees his message; the agent has not answered, no task waits
        assert [m["content"] for m in await messages_of(bob, cid)] == ["Lunch on Friday?"]
        assert await agent_tasks(b) == []
        assert requested["peer_id"] is None and requested["requested_by"] == bob.profile["id"]
        scope = requested["scope_json"]
        assert scope["kind"] == "local_message" and scope["message_id"] == posted.json()["id"]
        assert scope["requester_did"] == bob.did and scope["conversation_id"] == cid
        # the notice is in carol's own conversation with her agent, not in bob's
        assert notice["content_type"] == "permission_request"
        assert notice["conversation_id"] == scope["notice_conversation_id"] != cid
        assert notice["content_json"]["permission_id"] == requested["id"]
        mine = await carol.request("GET", f"/v1/conversations/{notice['conversation_id']}")
        assert mine.status_code == 200, mine.text
        [pending] = (await carol.request("GET", "/v1/permissions?pending=true")).json()
        assert pending["id"] == requested["id"]

        async with bob.websocket() as bob_ws:
            decided = await carol.request(
                "POST",
                f"/v1/permissions/{requested['id']}/decision",
                json={"decision": "allow_once"},
            )
            assert decided.status_code == 200, decided.text
            created = (await next_event(bob_ws, "message.created", within=30))["data"]
        assert created["sender_type"] == "own_agent" and created["conversation_id"] == cid
        [answer] = await answered(bob, cid)
        assert answer["in_reply_to"] in (None, posted.json()["id"])
        # allow_once is not remembered: the next message asks again
        again = await bob.request(
            "POST", f"/v1/conversations/{cid}/messages", json={"content": "and Saturday?"}
        )
        assert again.status_code == 201, again.text
        assert len((await carol.request("GET", "/v1/permissions?pending=true")).json()) == 1


async def test_a_denied_request_tells_the_sender_and_the_agent_says_nothing(
    database_url: str,
) -> None:
    async with run_instance(database_url) as b:
        bob, carol = await b.register("bob"), await b.register("carol")
        await publish_agent(carol)
        cid = (await with_agent(bob, carol.profile["agent_did"]))["id"]
        posted = await bob.request(
            "POST", f"/v1/conversations/{cid}/messages", json={"content": "your notes, please"}
        )
        assert posted.status_code == 201, posted.text
        [pending] = (await carol.request("GET", "/v1/permissions?pending=true")).json()
        async with bob.websocket() as bob_ws:
            decided = await carol.request(
                "POST", f"/v1/permissions/{pending['id']}/decision", json={"decision": "deny"}
            )
            assert decided.status_code == 200, decided.text
            told = (await next_event(bob_ws, "message.created"))["data"]
        assert told["content_type"] == "system_notice" and told["conversation_id"] == cid
        assert told["content_json"]["notice"] == "agent_policy_denied"
        assert told["content_json"]["decided"] == "owner"
        assert told["in_reply_to"] == posted.json()["id"]
        kinds = [(m["sender_type"], m["content_type"]) for m in await messages_of(bob, cid)]
        assert kinds == [("user", "text"), ("system", "system_notice")]
        assert await agent_tasks(b) == []
        again = await carol.request(
            "POST", f"/v1/permissions/{pending['id']}/decision", json={"decision": "allow_once"}
        )
        assert again.status_code == 409


async def test_allow_always_and_a_trusted_contact_let_the_agent_answer(database_url: str) -> None:
    async with run_instance(database_url) as b:
        bob, carol, dave = [await b.register(n) for n in ("bob", "carol", "dave")]
        await publish_agent(carol)
        agent_did = carol.profile["agent_did"]
        cid = (await with_agent(bob, agent_did))["id"]
        await bob.send(cid, "first")
        [pending] = (await carol.request("GET", "/v1/permissions?pending=true")).json()
        decided = await carol.request(
            "POST",
            f"/v1/permissions/{pending['id']}/decision",
            json={"decision": "allow_always", "scope": "peer"},
        )
        assert decided.status_code == 200, decided.text
        await answered(bob, cid)
        await bob.send(cid, "second")  # remembered for bob: no new request
        await answered(bob, cid, 2)
        # carol saves dave as a trusted contact: the contact's trust decides for him too
        saved = await carol.request(
            "POST", "/v1/contacts", json={"did": dave.did, "trust_level": "trusted"}
        )
        assert saved.status_code in (200, 201), saved.text
        theirs = (await with_agent(dave, agent_did))["id"]
        await dave.send(theirs, "hello from a trusted contact")
        await answered(dave, theirs)
        assert (await carol.request("GET", "/v1/permissions?pending=true")).json() == []
        # a contact override may deny a local user as it denies a peer
        overrides = {"rules": [{"action": "ask", "effect": "deny"}]}
        [contact] = (await carol.request("GET", "/v1/contacts")).json()
        changed = await carol.request(
            "PATCH", f"/v1/contacts/{contact['id']}", json={"policy_overrides": overrides}
        )
        assert changed.status_code == 200, changed.text
        refused = await dave.request(
            "POST", f"/v1/conversations/{theirs}/messages", json={"content": "again"}
        )
        assert refused.status_code == 403 and refused.json()["code"] == "agent_policy_denied"
