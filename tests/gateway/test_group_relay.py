"""A group's home relays: a remote member's post goes to the home only, and the home sends it
to every other member instance once per instance, signed by the home instance, as the
author's message; receivers accept that only for groups homed at the signer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, run_instance
from tests.gateway.test_group_membership import new_group, the_group
from tests.gateway.test_group_replicas import arrived, placed, settle


async def outbox(instance: Instance, message_id: str) -> list[dict[str, Any]]:
    """The outbox rows that send ``message_id`` itself (not edits or deletes)."""
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT endpoint, sender_did, payload_json FROM federation_outbox
               WHERE message_id = $1 AND payload_json #>> '{message,messageId}' = $1""",
            message_id,
        )
    out = []
    for r in rows:
        payload = r["payload_json"]
        payload = json.loads(payload) if isinstance(payload, str) else payload
        confer = payload["message"]["metadata"]["confer"]
        out.append({"endpoint": r["endpoint"], "signer": r["sender_did"], "confer": confer})
    return out


async def sender_of(instance: Instance, message_id: str) -> str:
    async with instance.state.pool.acquire() as conn:
        return str(await conn.fetchval("SELECT sender_did FROM messages WHERE id = $1", message_id))


async def test_the_home_relays_a_remote_post_once_per_instance(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, dave = await a.register("alice"), await a.register("dave")
        bob, bea = await b.register("bob"), await b.register("bea")
        carol, erin = await c.register("carol"), await c.register("erin")
        members = [bob.did, bea.did, carol.did, erin.did, dave.did]
        g1 = await new_group(alice, "G1", members)
        rb, rc = (await the_group(bob))["id"], (await the_group(carol))["id"]
        assert (await the_group(bea))["id"] == rb and (await the_group(erin))["id"] == rc

        # Alice's post: one request per member instance, naming both members there.
        mine = await alice.send(g1, "from alice")
        rows = await outbox(a, mine["id"])
        assert sorted(r["endpoint"] for r in rows) == sorted(
            [f"{b.base_url}/a2a", f"{c.base_url}/a2a"]
        )
        assert {r["signer"] for r in rows} == {alice.did}
        by_host = {r["endpoint"]: set(r["confer"]["recipients"]) for r in rows}
        assert by_host[f"{b.base_url}/a2a"] == {bob.did, bea.did}
        assert by_host[f"{c.base_url}/a2a"] == {carol.did, erin.did}
        (on_c,) = await arrived(c, "from alice")
        assert on_c["conversation_id"] == rc

        # Bob's post goes to the home only ...
        posted = await bob.send(rb, "from bob")
        (sent,) = await outbox(b, posted["id"])
        assert sent["endpoint"] == f"{a.base_url}/a2a" and sent["signer"] == bob.did
        assert set(sent["confer"]["recipients"]) == {alice.did, dave.did}
        (home_copy,) = await arrived(a, "from bob")
        assert home_copy["conversation_id"] == g1
        # ... which relays it to C once, signed as the home, carrying bob as the author.
        (relayed,) = await outbox(a, home_copy["id"])
        assert relayed["endpoint"] == f"{c.base_url}/a2a"
        assert relayed["signer"] == a.did
        assert relayed["confer"]["sender"] == bob.did
        assert set(relayed["confer"]["recipients"]) == {carol.did, erin.did}
        (c_copy,) = await arrived(c, "from bob")
        assert c_copy["conversation_id"] == rc
        assert await sender_of(c, c_copy["id"]) == bob.did
        for reader in (carol, erin):
            seen = await reader.request("GET", f"/v1/conversations/{rc}/messages")
            items = seen.json()["items"] if isinstance(seen.json(), dict) else seen.json()
            assert [m["content"] for m in items].count("from bob") == 1
        await settle(a, b, c)
        # Exactly once everywhere: bob's instance got nothing back, A and C one copy each.
        assert len(await placed(b, "from bob")) == 1
        assert len(await placed(a, "from bob")) == 1
        assert len(await placed(c, "from bob")) == 1
        assert len(await placed(b, "from alice")) == 1

        # Bob edits and deletes his post on B: the home relays both to C.
        edited = await bob.request(
            "PATCH",
            f"/v1/conversations/{rb}/messages/{posted['id']}",
            json={"content": "bob, edited", "version": 1},
        )
        assert edited.status_code == 200, edited.text
        (c_edited,) = await arrived(c, "bob, edited")
        assert c_edited["id"] == c_copy["id"]
        deleted = await bob.request("DELETE", f"/v1/conversations/{rb}/messages/{posted['id']}")
        assert deleted.status_code == 204, deleted.text
        for _ in range(600):
            if await placed(c, "bob, edited") == [] and await placed(a, "bob, edited") == []:
                break
            await asyncio.sleep(0.05)
        assert await placed(c, "bob, edited") == [] and await placed(a, "bob, edited") == []

        # Carol's answer: to the home only; the home relays it to B once.
        answer = await carol.send(rc, "from carol")
        (to_home,) = await outbox(c, answer["id"])
        assert to_home["endpoint"] == f"{a.base_url}/a2a"
        (b_copy,) = await arrived(b, "from carol")
        assert b_copy["conversation_id"] == rb
        assert await sender_of(b, b_copy["id"]) == carol.did
        await settle(a, b, c)
        assert len(await placed(c, "from carol")) == 1


async def test_a_relay_is_accepted_only_from_the_groups_home(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_fake_peer() as mallory,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        g1 = await new_group(alice, "G1", [bob.did])
        await the_group(bob)

        async def forge(text: str, conversation: dict[str, Any]) -> Any:
            body = json.loads(mallory.rpc(text))
            message = body["params"]["message"]
            message["contextId"] = conversation["id"]
            message["metadata"]["confer"].update(
                sender=alice.did, recipient=bob.did, conversation=conversation
            )
            raw = json.dumps(body).encode()
            url = f"{b.base_url}/a2a"
            return await b.client.post(
                "/a2a", content=raw, headers=mallory.signed_headers(url, raw)
            )

        # Mallory is not A: claiming alice's authorship in A's group is a forged sender.
        claim = {"id": g1, "home": a.did, "members": [alice.did, bob.did]}
        refused = await forge("forged relay", claim)
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "signature_sender_mismatch"
        # A home's relay names a remote author; mallory's DID is no instance DID, so she
        # homes no group, and her "relay" is a forged sender again.
        own: dict[str, Any] = {"id": "01J00000000000000000000000", "home": mallory.did}
        own["members"] = [alice.did, bob.did]
        refused = await forge("own group relay", own)
        assert refused.status_code == 401, refused.text
        assert refused.json()["code"] == "signature_sender_mismatch"
        assert await placed(b, "forged relay") == []
        assert await placed(b, "own group relay") == []
