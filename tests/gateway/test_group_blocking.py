"""Blocking a group's home is checked when its traffic arrives: a member who blocked the home
instance receives nothing it signs and is added to none of its groups; an instance whose
federation policy refuses the home (or a relayed author's instance) takes none of its events
or messages. And a message whose Confer recipient is not its endpoint's user is refused.
Real instances on loopback, each with its own database."""

from __future__ import annotations

import json
from typing import Any

from gateway.db import transaction
from gateway.services import group_order
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.test_group_membership import eventually, groups_of, new_group, the_group, view
from tests.gateway.test_group_replicas import arrived, placed, settle


async def audits(instance: Instance, action: str) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT details_json FROM audit_log WHERE action = $1 ORDER BY id", action
        )
    return [json.loads(r[0]) if isinstance(r[0], str) else dict(r[0]) for r in rows]


async def told(user: User, content: str) -> bool:
    """Whether ``user`` got a ``message.created`` event for ``content``."""
    async with user.instance.state.pool.acquire() as conn:
        found = await conn.fetchval(
            """SELECT count(*) FROM user_events e
               JOIN event_payloads p ON p.id = e.event_id WHERE user_id = $1
               AND type = 'message.created' AND data_json ->> 'content' = $2""",
            user.profile["id"],
            content,
        )
    return bool(found)


async def failed_to(home: Instance, replica: Instance) -> int:
    """How many of the home's deliveries to ``replica`` failed for good."""
    async with home.state.pool.acquire() as conn:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM federation_outbox WHERE endpoint = $1"
                " AND failed_at IS NOT NULL",
                f"{replica.base_url}/a2a",
            )
        )


async def block(user: User, did: str) -> None:
    added = await user.request("POST", "/v1/contacts", json={"did": did, "trust_level": "blocked"})
    assert added.status_code == 201, added.text


async def deny(admin: User, instance: Instance, other: Instance) -> None:
    """``instance``'s admin denies ``other``'s domain; waits until the policy applies."""
    port = other.base_url.rsplit(":", 1)[1]
    entry = await admin.request(
        "POST",
        "/v1/admin/federation/policy/entries",
        json={"pattern": f"localhost:{port}", "list": "deny"},
    )
    assert entry.status_code == 201, entry.text
    mode = await admin.request("PATCH", "/v1/admin/federation/policy", json={"mode": "denylist"})
    assert mode.status_code == 200, mode.text

    async def applied() -> bool:
        return not instance.state.federation_policy.verdict(other.did).allowed

    await eventually(applied, f"{instance.base_url} refusing {other.base_url}")


async def test_members_who_block_the_home_and_instances_that_refuse_it(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database(), admin_usernames="bob") as b,
        run_instance(await make_database()) as c,
    ):
        alice = await a.register("alice")
        bob, bea = await b.register("bob"), await b.register("bea")
        carol = await c.register("carol")
        g1 = await new_group(alice, "G1", [bob.did, bea.did, carol.did])
        rb, rc = (await the_group(bob))["id"], (await the_group(carol))["id"]
        await alice.send(g1, "before")
        await arrived(c, "before")
        await eventually(lambda: told(bea, "before"), "bea told on B")

        # Carol (alone on C) and bea (beside bob on B) block the home instance.
        await block(carol, a.did)
        await block(bea, a.did)
        await alice.send(g1, "after the blocks")
        await bob.send(rb, "bob, relayed")
        await arrived(b, "after the blocks")
        await settle(a, b, c)
        # B stores the group's message once, for bob; bea is not told of it.
        assert len(await placed(b, "after the blocks")) == 1
        assert await told(bob, "after the blocks") and not await told(bea, "after the blocks")
        # C has nobody left to deliver to: nothing stored, the home's deliveries refused.
        assert await placed(c, "after the blocks") == [] and await placed(c, "bob, relayed") == []
        assert await failed_to(a, c) == 2
        assert [d["code"] for d in await audits(c, "federation.inbound.rejected")][-2:] == [
            "peer_blocked",
            "peer_blocked",
        ]
        # A blocked home adds nobody to its groups: G2's create event leaves carol out.
        g2 = await new_group(alice, "G2", [bob.did, carol.did])

        async def g2_on_b() -> bool:
            return len(await groups_of(bob)) == 2

        await eventually(g2_on_b, "G2 on B")
        await settle(a, b, c)
        assert [g["id"] for g in await groups_of(carol)] == [rc]
        home_g2 = await view(alice, g2)
        assert home_g2 is not None  # the home still lists her: it is the home's to decide

        # B's admin refuses C's domain: carol's post, relayed by A, is refused at B's door.
        await block_free_carol(carol, a)
        await deny(bob, b, c)
        await carol.send(rc, "carol, relayed")
        await arrived(a, "carol, relayed")
        await settle(a, b, c)
        assert await placed(b, "carol, relayed") == []
        # B refuses A itself: its rename event and its members' messages stop at the door.
        await deny(bob, b, a)
        renamed = await alice.request("PATCH", f"/v1/conversations/{g1}", json={"name": "G9"})
        assert renamed.status_code == 200, renamed.text
        await alice.send(g1, "after B refused A")
        await settle(a, b, c)
        seen = await view(bob, rb)
        assert seen is not None and seen["name"] == "G1"
        assert await placed(b, "after B refused A") == []
        codes = [d["code"] for d in await audits(b, "federation.inbound.rejected")]
        assert codes.count("federation_refused") == 3  # the relayed author, the event, the post


async def block_free_carol(carol: User, home: Instance) -> None:
    """Carol lifts her block of the home, so her posts reach it again."""
    contacts = await carol.request("GET", "/v1/contacts")
    assert contacts.status_code == 200, contacts.text
    body = contacts.json()
    items = body["items"] if isinstance(body, dict) else body
    (contact,) = [x for x in items if x["did"] == home.did]
    lifted = await carol.request(
        "PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "unknown"}
    )
    assert lifted.status_code == 200, lifted.text


async def test_a_message_for_another_recipient_is_refused(make_database) -> None:
    async with run_instance(await make_database()) as b, run_fake_peer() as mallory:
        bob, bea = await b.register("bob"), await b.register("bea")
        url = f"{b.base_url}/users/bob/a2a"

        async def post(text: str, **meta: Any) -> Any:
            raw = mallory.rpc(text, **meta)
            answer = await b.client.post(
                "/users/bob/a2a", content=raw, headers=mallory.signed_headers(url, raw)
            )
            assert answer.status_code == 200, answer.text
            return answer.json()

        for text, meta in (
            ("for bea", {"recipient": bea.did}),
            ("for bea too", {"recipients": [bea.did]}),
        ):
            error = (await post(text, **meta))["error"]
            assert error["code"] == -32602
            assert bob.did in error["message"]
            assert await placed(b, text) == []
        rejected = await audits(b, "federation.inbound.rejected")
        assert [(d["code"], d["remote_message_id"] is not None) for d in rejected] == [
            (-32602, True),
            (-32602, True),
        ]
        assert "addressed to" in rejected[0]["detail"]
        # Addressed to bob (or to nobody in particular), it is delivered to bob.
        assert "result" in await post("for bob", recipient=bob.did)
        assert "result" in await post("for whoever", recipients=[bea.did, bob.did])
        assert len(await placed(b, "for bob")) == 1


async def test_a_post_the_home_refuses_is_taken_out_of_its_replica(make_database) -> None:
    """carol's post is stored on C at once (201), but the home refuses it for good (here its
    federation policy denies C): no instance may show what the home's order lacks, so C takes
    it out, telling its members why (``message.deleted``, ``reason`` ``refused_by_home``)."""
    async with (
        run_instance(await make_database(), admin_usernames="alice") as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
    ):
        alice, bob, carol = (
            await a.register("alice"),
            await b.register("bob"),
            await c.register("carol"),
        )
        await new_group(alice, "G1", [bob.did, carol.did])
        rc = (await the_group(carol))["id"]
        await the_group(bob)
        await deny(alice, a, c)
        posted = await carol.request(
            "POST", f"/v1/conversations/{rc}/messages", json={"content": "refused by the home"}
        )
        assert posted.status_code == 201, posted.text
        message_id = posted.json()["id"]

        async def taken_out() -> bool:
            return await placed(c, "refused by the home") == []

        await eventually(taken_out, "the refused post taken out of C's replica")
        async with c.state.pool.acquire() as conn:
            tombstone = await conn.fetchval(
                """SELECT data_json FROM user_events e
                   JOIN event_payloads p ON p.id = e.event_id WHERE user_id = $1
                   AND type = 'message.deleted' AND data_json ->> 'id' = $2""",
                carol.profile["id"],
                message_id,
            )
        tombstone = json.loads(tombstone) if isinstance(tombstone, str) else tombstone
        assert tombstone["reason"] == "refused_by_home", tombstone
        deliveries = await carol.request("GET", f"/v1/conversations/{rc}/messages")
        assert "refused by the home" not in deliveries.text
        assert await placed(a, "refused by the home") == []
        assert await placed(b, "refused by the home") == []


async def test_an_author_removed_before_the_refusal_arrives_is_told_too(make_database) -> None:
    """The home refused carol's post because it had removed her, and the removal reached her
    instance first: she is no longer a member of the replica there, but the post taken out is
    hers, so her devices still get its ``message.deleted`` (``refused_by_home``)."""
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as c,
    ):
        alice, carol = await a.register("alice"), await c.register("carol")
        await new_group(alice, "G1", [carol.did])
        rc = (await the_group(carol))["id"]
        message_id = (await carol.send(rc, "posted as she was removed"))["id"]
        async with c.state.pool.acquire() as conn:  # what the removal did on C
            await conn.execute(
                "DELETE FROM conversation_participants WHERE conversation_id = $1 AND user_id = $2",
                rc,
                carol.profile["id"],
            )
        async with transaction(c.state.pool) as tx:
            home = a.base_url.split("//", 1)[1]
            assert await group_order.retract_refused(
                tx, c.state.hub, message_id=message_id, destination=home, reason="not a member"
            )
        async with c.state.pool.acquire() as conn:
            tombstone = await conn.fetchval(
                """SELECT data_json FROM user_events e
                   JOIN event_payloads p ON p.id = e.event_id WHERE user_id = $1
                   AND type = 'message.deleted' AND data_json ->> 'id' = $2""",
                carol.profile["id"],
                message_id,
            )
        assert tombstone is not None, "the removed author was not told"
        tombstone = json.loads(tombstone) if isinstance(tombstone, str) else tombstone
        assert tombstone["reason"] == "refused_by_home", tombstone
