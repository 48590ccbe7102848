"""Read receipts in a federated group travel like its messages: to the home, which applies them
and relays them once per member instance, so every instance sees who read what — three real
instances on loopback (A home, B and C members), each with its own database."""

from __future__ import annotations

import json
from typing import Any

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance
from tests.gateway.test_group_membership import eventually, group_of_three, new_group, the_group
from tests.gateway.test_group_replicas import arrived, settle


async def read_position(instance: Instance, conversation_id: str, did: str) -> str | None:
    """The message the participant ``did`` read up to in ``conversation_id`` (None: nothing)."""
    async with instance.state.pool.acquire() as conn:
        value = await conn.fetchval(
            """SELECT r.message_id FROM conversation_reads r
               JOIN conversation_participants p ON p.id = r.participant_id
               LEFT JOIN users u ON u.id = p.user_id
               LEFT JOIN peer_agents pa ON pa.id = p.peer_id
               WHERE p.conversation_id = $1 AND COALESCE(u.did, pa.did) = $2""",
            conversation_id,
            did,
        )
    return str(value) if value is not None else None


async def readers(user: User, conversation_id: str, message_id: str) -> list[str]:
    """The ``read_by`` ids of a message as ``user`` sees it."""
    detail = await user.request("GET", f"/v1/conversations/{conversation_id}/messages/{message_id}")
    assert detail.status_code == 200, detail.text
    return [r["user_id"] for r in detail.json()["read_by"]]


async def peer_id(instance: Instance, did: str) -> str:
    async with instance.state.pool.acquire() as conn:
        return str(await conn.fetchval("SELECT id FROM peer_agents WHERE did = $1", did))


async def unread(user: User, conversation_id: str) -> int:
    response = await user.request("GET", f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return int(response.json()["membership"]["unread"])


async def signed_post(instance: Instance, sender: Instance, did: str, body: dict[str, Any]) -> Any:
    """POST ``body`` to ``instance``'s ``/a2a``, signed by ``sender``'s key for ``did``."""
    raw = json.dumps(body).encode()
    url = f"{instance.base_url}/a2a"
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    headers |= sender.state.identity.signer_for(did).headers_for("POST", url, headers, raw)
    return await instance.client.post("/a2a", content=raw, headers=headers)


def receipt_body(sender: str, group: str, home: str, named: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": f"r-{named}-{sender[-6:]}",
                "role": "ROLE_USER",
                "contextId": group,
                "parts": [{"text": "(read)"}],
                "metadata": {
                    "confer": {
                        "sender": sender,
                        "conversation": {"id": group, "home": home},
                        "read": {"messageId": named},
                    }
                },
            }
        },
    }


async def test_a_read_on_c_reaches_the_author_on_b_and_the_home(make_database) -> None:
    async with group_of_three(make_database) as (a, b, c, alice, bob, carol, g1, rb, rc):
        posted = await bob.send(rb, "from bob")
        (home_copy,) = await arrived(a, "from bob")
        (c_copy,) = await arrived(c, "from bob")
        assert await unread(carol, rc) == 1 and await unread(alice, g1) == 1

        # Carol reads on C: bob's devices on B get the receipt for his own message.
        async with bob.websocket() as ws:
            read = await carol.request(
                "POST", f"/v1/conversations/{rc}/read", json={"message_id": c_copy["id"]}
            )
            assert read.status_code == 200, read.text
            receipt = (await next_event(ws, "receipt", 60))["data"]
        assert receipt["conversation_id"] == rb
        assert receipt["message_id"] == posted["id"]
        assert receipt["did"] == carol.did
        assert await unread(carol, rc) == 0
        # The read state moved on B and at the home A, in each one's own ids.
        assert await read_position(b, rb, carol.did) == posted["id"]
        assert await read_position(a, g1, carol.did) == home_copy["id"]
        assert await readers(bob, rb, posted["id"]) == [await peer_id(b, carol.did)]
        assert await readers(alice, g1, home_copy["id"]) == [await peer_id(a, carol.did)]
        # Carol's receipt went to the home only; the home relayed it to B once, as itself.
        async with c.state.pool.acquire() as conn:
            sent = await conn.fetch(
                """SELECT endpoint FROM federation_outbox
                   WHERE payload_json #> '{message,metadata,confer,read}' IS NOT NULL"""
            )
        assert [r["endpoint"] for r in sent] == [f"{a.base_url}/a2a"]
        await settle(a, b, c)
        async with a.state.pool.acquire() as conn:
            relayed = await conn.fetch(
                """SELECT endpoint, sender_did FROM federation_outbox
                   WHERE payload_json #> '{message,metadata,confer,read}' IS NOT NULL"""
            )
        assert [(r["endpoint"], r["sender_did"]) for r in relayed] == [(f"{b.base_url}/a2a", a.did)]

        # Alice reads at the home: B and C both learn it, alice's message unread counts of
        # bob and carol untouched (a read moves the reader's own count only).
        mine = await alice.send(g1, "from alice")
        (b_alice,) = await arrived(b, "from alice")
        (c_alice,) = await arrived(c, "from alice")
        assert await unread(bob, rb) == 1
        read = await alice.request(
            "POST", f"/v1/conversations/{g1}/read", json={"message_id": mine["id"]}
        )
        assert read.status_code == 200, read.text

        async def alice_read_everywhere() -> bool:
            return (
                await read_position(b, rb, alice.did) == b_alice["id"]
                and await read_position(c, rc, alice.did) == c_alice["id"]
            )

        await eventually(alice_read_everywhere, "alice's read on B and C")
        assert await unread(bob, rb) == 1 and await unread(alice, g1) == 0

        # Bob reads on B up to alice's message: carol's copy on C moves (relayed by A).
        read = await bob.request(
            "POST", f"/v1/conversations/{rb}/read", json={"message_id": b_alice["id"]}
        )
        assert read.status_code == 200, read.text

        async def bob_read_everywhere() -> bool:
            return (
                await read_position(a, g1, bob.did) == mine["id"]
                and await read_position(c, rc, bob.did) == c_alice["id"]
            )

        await eventually(bob_read_everywhere, "bob's read at A and on C")
        assert await unread(bob, rb) == 0
        # A repeat changes nothing and travels nowhere.
        again = await bob.request(
            "POST", f"/v1/conversations/{rb}/read", json={"message_id": b_alice["id"]}
        )
        assert again.status_code == 200, again.text
        await settle(a, b, c)
        async with b.state.pool.acquire() as conn:
            count = await conn.fetchval(
                """SELECT count(*) FROM federation_outbox
                   WHERE payload_json #> '{message,metadata,confer,read}' IS NOT NULL"""
            )
        assert count == 1


async def test_group_receipts_only_from_members_and_for_the_groups_messages(
    make_database,
) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
        run_instance(await make_database()) as c,
        run_fake_peer() as mallory,
    ):
        alice, bob, carol = (
            await a.register("alice"),
            await b.register("bob"),
            await c.register("carol"),
        )
        g1 = await new_group(alice, "G1", [bob.did])
        rb = (await the_group(bob))["id"]
        in_group = await alice.send(g1, "in the group")
        await arrived(b, "in the group")
        direct = await alice.direct_with(carol.did)
        elsewhere = await alice.send(direct["id"], "direct to carol")
        await arrived(c, "direct to carol")

        # Carol (C) takes no part in G1: her receipt at the home is refused and audited.
        body = receipt_body(carol.did, g1, a.did, in_group["id"])
        refused = await signed_post(a, c, carol.did, body)
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "not_group_member"
        assert await read_position(a, g1, carol.did) is None
        # Mallory is no instance: she cannot relay a receipt naming bob.
        raw = json.dumps(receipt_body(bob.did, rb, a.did, in_group["id"])).encode()
        url = f"{b.base_url}/a2a"
        forged = await b.client.post("/a2a", content=raw, headers=mallory.signed_headers(url, raw))
        assert forged.status_code == 401 and forged.json()["code"] == "signature_sender_mismatch"

        # Bob is a member, but a receipt naming a message of another conversation moves nothing.
        other = await signed_post(a, b, bob.did, receipt_body(bob.did, g1, a.did, elsewhere["id"]))
        assert other.status_code == 200, other.text
        assert other.json()["result"]["message"]["parts"][-1]["data"]["applied"] is False
        assert await read_position(a, g1, bob.did) is None
        # Naming the group's message, it applies.
        ok = await signed_post(a, b, bob.did, receipt_body(bob.did, g1, a.did, in_group["id"]))
        assert ok.json()["result"]["message"]["parts"][-1]["data"]["applied"] is True
        assert await read_position(a, g1, bob.did) == in_group["id"]
        # A home never takes a relayed receipt for its own group (it relays, it is not relayed).
        relay = await signed_post(a, b, b.did, receipt_body(bob.did, g1, a.did, in_group["id"]))
        assert relay.status_code in (401, 403), relay.text
        # The direct conversation's receipts keep working as before.
        c_direct = (await arrived(c, "direct to carol"))[0]
        read = await carol.request(
            "POST",
            f"/v1/conversations/{c_direct['conversation_id']}/read",
            json={"message_id": c_direct["id"]},
        )
        assert read.status_code == 200, read.text

        async def direct_read() -> bool:
            return await read_position(a, direct["id"], carol.did) == elsewhere["id"]

        await eventually(direct_read, "carol's direct read on A")
