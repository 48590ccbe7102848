"""Delivery status for the sender: per-peer states in the message API, ``message.delivery_updated``
on the sender's socket, and the admin's outbox, destinations and "retry now" — two Confer
instances on loopback, the peer stopped and restarted."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.gateway.harness import User, next_event, run_instance


async def delivery_event(ws: Any, message_id: str, state: str) -> dict[str, Any]:
    """The next ``message.delivery_updated`` of ``message_id`` in ``state`` (others skipped)."""
    async with asyncio.timeout(40):
        while True:
            event = (await next_event(ws, "message.delivery_updated", 40))["data"]
            if event["message_id"] == message_id and event["delivery"]["state"] == state:
                return dict(event)


async def deliveries(user: User, cid: str, mid: str) -> list[dict[str, Any]]:
    response = await user.request("GET", f"/v1/conversations/{cid}/messages/{mid}/deliveries")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def test_the_sender_sees_each_delivery_state_and_an_admin_retries_now(
    make_database,
) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_a, admin_usernames="alice", delivery_park_after_failures=2) as a:
        alice = await a.register("alice")
        carol = await a.register("carol")
        async with run_instance(db_b) as b, alice.websocket() as ws:
            port = int(b.base_url.rsplit(":", 1)[1])
            destination = f"localhost:{port}"
            bob = await b.register("bob")
            cid = (await alice.direct_with(bob.did))["id"]

            one = await alice.send(cid, "one")
            event = await delivery_event(ws, one["id"], "delivered")
            assert event["conversation_id"] == cid
            assert event["delivery"]["peer_did"] == bob.did
            assert event["delivery"]["destination"] == destination
            [status] = await deliveries(alice, cid, one["id"])
            assert status["state"] == "delivered" and status["attempts"] == 1
            assert status["delivered_at"] and status["reason"] is None
            detail = await alice.request("GET", f"/v1/conversations/{cid}/messages/{one['id']}")
            assert [d["state"] for d in detail.json()["deliveries"]] == ["delivered"]

            # Bob blocks Alice: B refuses her next message, for good, and she hears so.
            [contact] = (await bob.request("GET", "/v1/contacts")).json()
            blocked = await bob.request(
                "PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "blocked"}
            )
            assert blocked.status_code == 200, blocked.text
            two = await alice.send(cid, "two")
            failed = (await delivery_event(ws, two["id"], "failed"))["delivery"]
            assert "HTTP 403" in failed["reason"] and failed["failed_at"]
            [status] = await deliveries(alice, cid, two["id"])
            assert status["state"] == "failed" and "HTTP 403" in status["reason"]
            await bob.request(
                "PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "known"}
            )

        # B is down: Alice's next message is retried, then its destination parked.
        async with alice.websocket() as ws:
            three = await alice.send(cid, "three")
            retrying = (await delivery_event(ws, three["id"], "retrying"))["delivery"]
            assert retrying["next_attempt_at"] and retrying["reason"]
            assert retrying["attempts"] == 1
            while not retrying["parked"]:
                retrying = (await delivery_event(ws, three["id"], "retrying"))["delivery"]

            parked = await alice.request(
                "GET", "/v1/admin/federation/destinations", params={"parked": "true"}
            )
            assert parked.status_code == 200, parked.text
            [health] = parked.json()["items"]
            assert health["destination"] == destination and health["pending"] == 1
            assert health["parked_at"] and health["failures"] == 2
            outbox = await alice.request(
                "GET", "/v1/admin/federation/outbox", params={"status": "pending"}
            )
            [pending] = outbox.json()["items"]
            assert pending["message_id"] == three["id"] and pending["state"] == "retrying"
            assert pending["endpoint"] == f"http://localhost:{port}/users/bob/a2a"
            everything = await alice.request("GET", "/v1/admin/federation/outbox")
            assert [e["message_id"] for e in everything.json()["items"]] == [
                three["id"],
                two["id"],
                one["id"],
            ]
            failed_only = await alice.request(
                "GET", "/v1/admin/federation/outbox", params={"status": "failed"}
            )
            assert [e["message_id"] for e in failed_only.json()["items"]] == [two["id"]]

            # Only admins; an unknown destination is a 404.
            refused = await carol.request("GET", "/v1/admin/federation/outbox")
            assert refused.status_code == 403
            unknown = await alice.request(
                "POST", "/v1/admin/federation/destinations/nowhere.example/retry"
            )
            assert unknown.status_code == 404 and unknown.json()["code"] == "destination_not_found"

            # B is back; nothing reaches it until the admin says "retry now" (the probe is
            # ten minutes away and B does not write to A).
            async with run_instance(db_b, port=port):
                await asyncio.sleep(1.0)
                [status] = await deliveries(alice, cid, three["id"])
                assert status["state"] == "retrying" and status["parked"] is True
                retried = await alice.request(
                    "POST", f"/v1/admin/federation/destinations/{destination}/retry"
                )
                assert retried.status_code == 200, retried.text
                assert retried.json()["parked_at"] is None and retried.json()["failures"] == 0
                delivered = await delivery_event(ws, three["id"], "delivered")
                assert delivered["delivery"]["attempts"] == 3
        [status] = await deliveries(alice, cid, three["id"])
        assert status["state"] == "delivered" and status["parked"] is False
        async with a.state.pool.acquire() as conn:
            audit = await conn.fetchrow(
                "SELECT user_id, details_json FROM audit_log"
                " WHERE action = 'admin.destination_retry'"
            )
        assert audit["details_json"]["destination"] == destination
        assert audit["details_json"]["pending"] == 1
