"""Groups across three instances: each member instance keeps a replica of the home's group,
and nothing written in a direct conversation ever lands in a group (or the other way round)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, run_instance


async def placed(instance: Instance, content: str) -> list[dict[str, Any]]:
    """Where ``content`` is stored on ``instance``: one row per copy, with its conversation."""
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT m.id, m.conversation_id, c.type, c.name FROM messages m
               JOIN conversations c ON c.id = m.conversation_id
               WHERE m.content = $1 AND m.deleted_at IS NULL ORDER BY m.id""",
            content,
        )
    return [dict(r) for r in rows]


async def arrived(instance: Instance, content: str, count: int = 1) -> list[dict[str, Any]]:
    for _ in range(600):
        found = await placed(instance, content)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{content!r} never reached {instance.base_url}")


async def reads(user: User, conversation_id: str) -> list[str]:
    """The texts ``user`` can read in a conversation (empty when they may not read it)."""
    response = await user.request("GET", f"/v1/conversations/{conversation_id}/messages")
    if response.status_code != 200:
        return []
    body = response.json()
    items = body["items"] if isinstance(body, dict) else body
    return [m["content"] for m in items]


async def settle(*instances: Instance) -> None:
    """Wait until every outbox is drained (delivered or failed for good)."""
    for _ in range(600):
        pending = 0
        for instance in instances:
            async with instance.state.pool.acquire() as conn:
                pending += await conn.fetchval(
                    "SELECT count(*) FROM federation_outbox"
                    " WHERE delivered_at IS NULL AND failed_at IS NULL"
                )
        if pending == 0:
            return
        await asyncio.sleep(0.05)


async def test_a_direct_reply_never_lands_in_the_group_and_group_replies_reach_everyone(
    make_database,
) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, dave = await a.register("alice"), await a.register("dave")
        bob, carol = await b.register("bob"), await c.register("carol")

        # Two direct conversations that already carry traffic both ways.
        a_direct_bob = await alice.direct_with(bob.did)
        await alice.send(a_direct_bob["id"], "hello bob")
        b_direct = (await arrived(b, "hello bob"))[0]["conversation_id"]
        a_direct_carol = await dave.direct_with(carol.did)
        await dave.send(a_direct_carol["id"], "hello carol")
        c_direct = (await arrived(c, "hello carol"))[0]["conversation_id"]

        created = await alice.request(
            "POST",
            "/v1/conversations",
            json={
                "type": "group",
                "name": "G1",
                "participant_dids": [bob.did, carol.did, dave.did],
            },
        )
        assert created.status_code == 201, created.text
        g1 = created.json()["id"]
        await alice.send(g1, "alice to the group")
        await dave.send(g1, "dave to the group")

        # On B and C the group's messages land in a replica named like the group.
        for instance, direct in ((b, b_direct), (c, c_direct)):
            for text in ("alice to the group", "dave to the group"):
                (copy,) = await arrived(instance, text)
                assert copy["type"] == "group" and copy["name"] == "G1"
                assert copy["conversation_id"] != direct
        replica_b = (await placed(b, "alice to the group"))[0]["conversation_id"]
        replica_c = (await placed(c, "alice to the group"))[0]["conversation_id"]
        assert (await placed(b, "dave to the group"))[0]["conversation_id"] == replica_b

        # Bob answers Alice privately; Carol answers Dave privately.
        await bob.send(b_direct, "private to alice")
        await carol.send(c_direct, "private to dave")
        (bob_private,) = await arrived(a, "private to alice")
        (carol_private,) = await arrived(a, "private to dave")
        assert bob_private["conversation_id"] == a_direct_bob["id"]
        assert carol_private["conversation_id"] == a_direct_carol["id"]
        assert "private to alice" not in await reads(dave, g1)
        assert "private to dave" not in await reads(alice, g1)

        # A reply in the replica reaches the home group once, and the other replica.
        await bob.send(replica_b, "bob to the group")
        (home_copy,) = await arrived(a, "bob to the group")
        assert home_copy["conversation_id"] == g1
        (c_copy,) = await arrived(c, "bob to the group")
        assert c_copy["conversation_id"] == replica_c
        assert "bob to the group" in await reads(alice, g1)
        assert "bob to the group" in await reads(dave, g1)
        await settle(a, b, c)
        assert len(await placed(a, "bob to the group")) == 1
        assert "dave to the group" not in await reads(alice, a_direct_bob["id"])


async def test_a_forged_group_claim_is_refused(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_fake_peer() as mallory,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        created = await alice.request(
            "POST",
            "/v1/conversations",
            json={"type": "group", "name": "G1", "participant_dids": [bob.did]},
        )
        assert created.status_code == 201, created.text
        g1 = created.json()["id"]
        await alice.send(g1, "members only")
        await arrived(b, "members only")
        claim = {"id": g1, "type": "group", "home": a.did, "members": [alice.did, bob.did]}

        async def forge(instance: Instance, user: str, text: str, **confer: Any) -> Any:
            body = json.loads(mallory.rpc(text))
            body["params"]["message"]["contextId"] = g1
            body["params"]["message"]["metadata"]["confer"].update(confer)
            raw = json.dumps(body).encode()
            url = f"{instance.base_url}/users/{user}/a2a"
            return await instance.client.post(
                f"/users/{user}/a2a", content=raw, headers=mallory.signed_headers(url, raw)
            )

        # A non-member claiming the home's group, at the home and at a replica: refused.
        for instance, user in ((a, "alice"), (b, "bob")):
            refused = await forge(instance, user, f"forged {user}", conversation=claim)
            assert refused.status_code == 403, refused.text
            assert refused.json()["code"] == "not_group_member"
            assert await placed(instance, f"forged {user}") == []
        # A malformed claim never falls back to a direct conversation.
        refused = await forge(a, "alice", "malformed", conversation="G1")
        assert refused.status_code == 403, refused.text
        # The group's id as a bare context, without a claim: a direct message, not the group.
        bare = "bare context " + uuid.uuid4().hex[:6]
        plain = await forge(a, "alice", bare)
        assert plain.status_code == 200, plain.text
        (stored,) = await placed(a, bare)
        assert stored["conversation_id"] != g1 and stored["type"].startswith("direct")


async def test_a_message_claiming_a_group_nobody_announced_creates_nothing(make_database) -> None:
    """A stranger's instance is the home of whatever group it claims, but only its signed
    membership event makes a replica: a post claiming a new group of its own, naming the
    recipient, is refused — it would otherwise skip the recipient's message requests."""
    async with run_instance(await make_database()) as b, run_fake_peer() as mallory:
        bob = await b.register("bob")
        home = mallory.did.split(":users:")[0]
        claim = {
            "id": "01J00000000000000000000000",
            "type": "group",
            "home": home,
            "name": "Free prizes",
            "members": [mallory.did, bob.did],
        }
        for path in ("/users/bob/a2a", "/a2a"):
            body = json.loads(mallory.rpc("claim a prize"))
            body["params"]["message"]["contextId"] = claim["id"]
            body["params"]["message"]["metadata"]["confer"].update(
                conversation=claim, recipients=[bob.did]
            )
            raw = json.dumps(body).encode()
            url = f"{b.base_url}{path}"
            refused = await b.client.post(
                path, content=raw, headers=mallory.signed_headers(url, raw)
            )
            assert refused.status_code == 403, refused.text
            assert refused.json()["code"] == "not_group_member"
        assert await placed(b, "claim a prize") == []
        listed = await bob.request("GET", "/v1/conversations")
        assert listed.status_code == 200 and listed.json() == [], listed.text


async def test_a_replica_follows_the_homes_name_and_members(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, bob, carol = (
            await a.register("alice"),
            await b.register("bob"),
            await c.register("carol"),
        )
        created = await alice.request(
            "POST",
            "/v1/conversations",
            json={"type": "group", "name": "G1", "participant_dids": [bob.did, carol.did]},
        )
        g1 = created.json()["id"]
        await alice.send(g1, "first")
        (first,) = await arrived(b, "first")
        replica_b = first["conversation_id"]

        renamed = await alice.request("PATCH", f"/v1/conversations/{g1}", json={"name": "G2"})
        assert renamed.status_code == 200, renamed.text
        conversation = (await alice.request("GET", f"/v1/conversations/{g1}")).json()
        (carol_row,) = [p for p in conversation["participants"] if p.get("did") == carol.did]
        removed = await alice.request(
            "DELETE", f"/v1/conversations/{g1}/participants/{carol_row['id']}"
        )
        assert removed.status_code in (200, 204), removed.text
        await alice.send(g1, "second")
        (second,) = await arrived(b, "second")
        assert second["conversation_id"] == replica_b and second["name"] == "G2"
        async with b.state.pool.acquire() as conn:
            dids = await conn.fetch(
                """SELECT pa.did FROM conversation_participants p
                   JOIN peer_agents pa ON pa.id = p.peer_id WHERE p.conversation_id = $1""",
                replica_b,
            )
        assert carol.did not in {r["did"] for r in dids}
        # Carol, removed at home, is out of her own replica too (the kick event reached C),
        # and may no longer write into the group anywhere.
        replica_c = (await placed(c, "first"))[0]["conversation_id"]
        for _ in range(600):
            seen = await carol.request("GET", f"/v1/conversations/{replica_c}")
            if seen.status_code == 404:
                break
            await asyncio.sleep(0.05)
        refused = await carol.request(
            "POST", f"/v1/conversations/{replica_c}/messages", json={"content": "after removal"}
        )
        assert refused.status_code == 404, refused.text
        await settle(a, b, c)
        assert await placed(a, "after removal") == []
        assert await placed(b, "after removal") == []
