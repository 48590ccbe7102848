"""Typing and presence across instances: ephemeral, rate limited, never in the outbox."""

from __future__ import annotations

import json

from tests.gateway.harness import Instance, next_event, run_instance
from tests.gateway.test_group_membership import new_group, the_group
from tests.gateway.test_group_replicas import arrived


async def outbox_rows(instance: Instance) -> int:
    async with instance.state.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM federation_outbox"))


async def test_typing_and_presence_reach_the_other_instance(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        direct = await alice.direct_with(bob.did)
        await alice.send(direct["id"], "hello bob")
        (copy,) = await arrived(b, "hello bob")
        b_direct = copy["conversation_id"]
        g1 = await new_group(alice, "G1", [bob.did])
        replica = (await the_group(bob))["id"]
        async with bob.websocket() as ws_bob:
            # Presence: alice's first device reaches bob, who shares a direct conversation.
            before = await outbox_rows(a)
            async with alice.websocket() as ws_alice:
                online = await next_event(ws_bob, "presence", within=20)
                assert online["data"] == {"user_id": None, "did": alice.did, "status": "online"}

                # Typing in the direct conversation: bob's copy of it, alice's DID.
                for _ in range(3):  # rate limited: one signal
                    await ws_alice.send(
                        json.dumps({"type": "typing", "conversation_id": direct["id"]})
                    )
                typing = await next_event(ws_bob, "typing", within=20)
                assert typing["data"]["conversation_id"] == b_direct
                assert typing["data"]["did"] == alice.did and typing["data"]["user_id"] is None

                # Typing in the group: bob's replica.
                await ws_alice.send(json.dumps({"type": "typing", "conversation_id": g1}))
                typing = await next_event(ws_bob, "typing", within=20)
                assert typing["data"]["conversation_id"] == replica
                assert typing["data"]["did"] == alice.did
            offline = await next_event(ws_bob, "presence", within=20)
            assert offline["data"]["status"] == "offline" and offline["data"]["did"] == alice.did
            # Nothing of it went through the durable outbox.
            assert await outbox_rows(a) == before
