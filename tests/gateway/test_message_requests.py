"""Message requests: a stranger's first message is held apart until the user accepts it —
remote strangers across two instances on loopback, local strangers, and the exemptions
(contacts, a shared group, the preference off)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.gateway.harness import Instance, User, next_event, run_instance
from tests.gateway.test_delivery_status import delivery_event


async def event_types(instance: Instance, user: User) -> list[str]:
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT type FROM user_events e JOIN event_payloads p ON p.id = e.event_id"
            " WHERE user_id = $1 ORDER BY seq",
            user.profile["id"],
        )
    return [r["type"] for r in rows]


async def listed(user: User, **params: Any) -> dict[str, dict[str, Any]]:
    response = await user.request("GET", "/v1/conversations", params=params)
    assert response.status_code == 200, response.text
    return {c["id"]: c for c in response.json()}


async def arrived(user: User, count: int, **params: Any) -> dict[str, dict[str, Any]]:
    """The user's conversations once ``count`` of them are listed (deliveries take a moment)."""
    deadline = time.monotonic() + 30
    while len(found := await listed(user, **params)) < count:
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.1)
    return found


async def messages(user: User, cid: str) -> list[str]:
    page = (await user.request("GET", f"/v1/conversations/{cid}/messages")).json()
    return [m["content"] for m in reversed(page["items"])]


async def test_a_remote_strangers_messages_wait_until_accepted(make_database) -> None:
    async with (
        run_instance(await make_database(), message_requests_default=True) as a,
        run_instance(await make_database(), message_requests_default=True) as b,
    ):
        alice, carol = await a.register("alice"), await a.register("carol")
        bob, dave = await b.register("bob"), await b.register("dave")
        # carol is bob's contact (added by DID); dave turned requests off.
        added = await bob.request("POST", "/v1/contacts", json={"did": carol.did})
        assert added.status_code in (200, 201), added.text
        off = await dave.request(
            "PATCH", "/v1/me", json={"preferences": {"privacy": {"message_requests": False}}}
        )
        assert off.status_code == 200 and off.json()["preferences"]["privacy"] == {
            "allow_offline_response": False,
            "notification_preview": True,
            "message_requests": False,
        }
        strict = await dave.request(
            "PATCH", "/v1/me", json={"preferences": {"privacy": {"message_requests": 0}}}
        )
        assert strict.status_code == 422

        async with bob.websocket() as ws:
            cid = (await alice.direct_with(bob.did))["id"]
            await alice.send(cid, "hello, we have not met")
            event = (await next_event(ws, "message_request.created", 30))["data"]
            assert event["sender_did"] == alice.did
            assert event["message"]["content"] == "hello, we have not met"
            held = event["conversation_id"]
            await alice.send(cid, "still there?")
            # Held apart: not listed, no unread count, no message.created for bob.
            everything = await arrived(bob, 1, requests="true")
            assert everything[held]["request"] == "pending"
            assert everything[held]["membership"]["unread"] == 0
            assert held not in await listed(bob)
            deadline = time.monotonic() + 30
            while len(await messages(bob, held)) < 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
            assert "message.created" not in await event_types(b, bob)
            [request] = (await bob.request("GET", "/v1/message-requests")).json()["items"]
            assert request["conversation_id"] == held and request["sender_did"] == alice.did

            # Exempt: a contact, and a user with the preference off.
            await carol.send((await carol.direct_with(bob.did))["id"], "hi bob, carol here")
            await dave_inbox(alice, dave)
            await arrived(bob, 1)  # carol's conversation is in bob's inbox

            accepted = await bob.request("POST", f"/v1/message-requests/{held}/accept")
            assert accepted.status_code == 200 and accepted.json()["state"] == "accepted"
            assert (await next_event(ws, "message_request.decided", 10))["data"] == {
                "conversation_id": held,
                "state": "accepted",
                "blocked": False,
            }
            inbox = await listed(bob)
            assert inbox[held]["request"] is None and inbox[held]["membership"]["unread"] == 2
            contacts = (await bob.request("GET", "/v1/contacts")).json()
            assert {c["did"]: c["added_via"] for c in contacts}[alice.did] == "message_request"
            await alice.send(cid, "thanks for accepting")
            created = (await next_event(ws, "message.created", 30))["data"]
            assert created["content"] == "thanks for accepting"
            assert (await bob.request("GET", "/v1/message-requests")).json()["items"] == []
            again = await bob.request("POST", f"/v1/message-requests/{alice.profile['id']}/accept")
            assert again.status_code == 404

        # Decline and block: the stranger's next message is refused at B's door.
        eve = await a.register("eve")
        async with eve.websocket() as eve_ws, bob.websocket() as ws:
            eve_cid = (await eve.direct_with(bob.did))["id"]
            await eve.send(eve_cid, "hello from eve")
            request = (await next_event(ws, "message_request.created", 30))["data"]
            blocked = await bob.request(
                "POST",
                f"/v1/message-requests/{request['conversation_id']}/decline",
                params={"block": "true"},
            )
            assert blocked.status_code == 200 and blocked.json()["state"] == "declined"
            refused = await eve.send(eve_cid, "hello again")
            failed = (await delivery_event(eve_ws, refused["id"], "failed"))["delivery"]
            assert "HTTP 403" in failed["reason"] and "peer_blocked" in failed["reason"]


async def dave_inbox(alice: User, dave: User) -> None:
    """alice writes to dave (requests off): it lands in his inbox."""
    await alice.send((await alice.direct_with(dave.did))["id"], "hi dave")
    inbox = await arrived(dave, 1)
    assert [c["request"] for c in inbox.values()] == [None]


async def test_local_strangers_and_a_shared_group(database_url: str) -> None:
    async with run_instance(database_url, message_requests_default=True) as instance:
        erin, frank, gina = [await instance.register(n) for n in ("erin", "frank", "gina")]
        group = await gina.request(
            "POST",
            "/v1/conversations",
            json={"type": "group", "name": "club", "participant_dids": [frank.did]},
        )
        assert group.status_code == 201, group.text

        stranger = (await erin.direct_with(frank.did))["id"]
        await erin.send(stranger, "hi frank")
        member = (await gina.direct_with(frank.did))["id"]
        await gina.send(member, "hi frank, it's gina from the club")

        everything = await listed(frank, requests="true")
        assert everything[stranger]["request"] == "pending"
        assert everything[member]["request"] is None  # a shared group: no request
        assert stranger not in await listed(frank)
        types = await event_types(instance, frank)
        assert types.count("message_request.created") == 1 and types.count("message.created") == 1

        declined = await frank.request("POST", f"/v1/message-requests/{stranger}/decline")
        assert declined.status_code == 200 and declined.json()["state"] == "declined"
        await erin.send(stranger, "please?")
        assert stranger not in await listed(frank)
        assert (await listed(frank, requests="true"))[stranger]["request"] == "declined"
        assert (await event_types(instance, frank)).count("message.created") == 1

        # Frank's reply in a conversation he started is never a request for the other side.
        started = (await frank.direct_with(erin.did))["id"]
        assert started == stranger  # one direct conversation per pair
        own = (await frank.direct_with(gina.did))["id"]
        assert own == member


async def _writes_back(user: User, held: str, ws: Any) -> None:
    """``user`` has a pending request in ``held`` and writes there: the request is accepted as
    the accept endpoint accepts it (event, contact, inbox)."""
    posted = await user.request(
        "POST", f"/v1/conversations/{held}/messages", json={"content": "hi, who is this?"}
    )
    assert posted.status_code == 201, posted.text
    assert (await next_event(ws, "message_request.decided", 10))["data"] == {
        "conversation_id": held,
        "state": "accepted",
        "blocked": False,
    }
    assert (await user.request("GET", "/v1/message-requests")).json()["items"] == []
    inbox = await listed(user)
    assert held in inbox and inbox[held]["request"] is None


async def test_writing_in_a_request_accepts_it(make_database) -> None:
    """One is a stranger to whom the user never wrote there: a user who writes in a pending
    (or declined) request's conversation has accepted it — locally and from another instance."""
    async with (
        run_instance(await make_database(), message_requests_default=True) as a,
        run_instance(await make_database(), message_requests_default=True) as b,
    ):
        alice, eve, frank = [await a.register(n) for n in ("alice", "eve", "frank")]
        mallory = await b.register("mallory")
        async with alice.websocket() as ws:
            local = (await eve.direct_with(alice.did))["id"]
            await eve.send(local, "hi alice, eve here")
            assert (await next_event(ws, "message_request.created", 10))["data"][
                "conversation_id"
            ] == local
            await _writes_back(alice, local, ws)
            await eve.send(local, "glad you answered")  # now reaches alice as any message
            while (await next_event(ws, "message.created", 10))["data"]["sender_id"] != (
                eve.profile["id"]
            ):
                pass

            # declined, then written in after all
            declined = (await frank.direct_with(alice.did))["id"]
            await frank.send(declined, "hello?")
            await next_event(ws, "message_request.created", 10)
            refused = await alice.request("POST", f"/v1/message-requests/{declined}/decline")
            assert refused.status_code == 200 and refused.json()["state"] == "declined"
            await next_event(ws, "message_request.decided", 10)
            await _writes_back(alice, declined, ws)

            # a stranger on another instance
            await mallory.send((await mallory.direct_with(alice.did))["id"], "from b")
            remote = (await next_event(ws, "message_request.created", 30))["data"]
            await _writes_back(alice, remote["conversation_id"], ws)
            contacts = (await alice.request("GET", "/v1/contacts")).json()
            assert {c["did"]: c["added_via"] for c in contacts}[mallory.did] == "message_request"
            types = await event_types(a, alice)
            assert types.count("message_request.decided") == 4  # frank's decline and 3 accepts
