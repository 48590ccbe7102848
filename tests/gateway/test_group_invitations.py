"""Consent before a user is put into a group by an instance they do not know, across real
``confer serve`` processes on loopback (docs/federation.md, "Consent to a group's home").

A group's home that lists a user of another instance who does not know it gets them held as a
message request: not in the replica, nothing of the group on their devices, the invitation in
``GET /v1/message-requests``. Accepting puts them in the group; declining has the home take
them out of its member list. A user who knows the home is added directly, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.gateway.harness import free_port
from tests.gateway.serving import confer_serve, serve_env
from tests.gateway.test_three_instances import (
    Person,
    eventually,
    messages,
    register,
    state,
    the_group,
)

REQUESTS_ON = {"CONFER_MESSAGE_REQUESTS_DEFAULT": "true"}


async def requests_of(person: Person) -> list[dict[str, Any]]:
    body = await person.ok("GET", "/v1/message-requests")
    return list(body["items"])


async def groups_of(person: Person) -> list[str]:
    body = await person.ok("GET", "/v1/conversations")
    items = body["items"] if isinstance(body, dict) else body
    return [c["id"] for c in items if c["type"] == "group"]


async def frames(ws: Any, within: float = 0.5) -> list[dict[str, Any]]:
    """Every frame ``ws`` receives until it is quiet for ``within`` s."""
    seen: list[dict[str, Any]] = []
    with contextlib.suppress(TimeoutError):
        while True:
            seen.append(json.loads(await asyncio.wait_for(ws.recv(), within)))
    return seen


async def texts_of(person: Person, cid: str) -> list[str | None]:
    return [m["content"] for m in await messages(person, cid)]


@contextlib.asynccontextmanager
async def two_instances(make_database: Any) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    """A and B as ``confer serve`` processes, message requests on by default on both."""
    ports = [free_port() for _ in range(2)]
    envs = [serve_env(port, await make_database(), **REQUESTS_ON) for port in ports]
    async with (
        confer_serve(envs[0]) as a,
        confer_serve(envs[1]) as b,
        httpx.AsyncClient(base_url=a.base_url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=60) as on_b,
    ):
        yield on_a, on_b


async def test_an_unknown_home_invites_and_the_invited_decide(make_database: Any) -> None:
    async with two_instances(make_database) as (on_a, on_b):
        a_url, b_url = str(on_a.base_url), str(on_b.base_url)
        alice = await register(on_a, a_url, "alice")
        bob = await register(on_b, b_url, "bob")  # no relation to A
        erin = await register(on_b, b_url, "erin")  # no relation to A either
        dave = await register(on_b, b_url, "dave")  # alice is his contact: he knows A
        await dave.ok("POST", "/v1/contacts", 201, json={"did": alice.did})

        async with bob.websocket() as bob_ws:
            created = await alice.ok(
                "POST",
                "/v1/conversations",
                201,
                json={
                    "type": "group",
                    "name": "Launch",
                    "participant_dids": [bob.did, erin.did, dave.did],
                },
            )
            g = created["id"]
            # dave knows the home: in the group at once, as before.
            gd = await the_group(dave)

            # bob and erin do not: each sees an invitation, and no group.
            for person in (bob, erin):
                (invitation,) = await eventually(lambda p=person: requests_of(p), "a request")
                assert invitation["kind"] == "group"
                assert invitation["group_name"] == "Launch"
                assert invitation["group_home"] == alice.did.rsplit(":", 2)[0]  # A's DID
                assert invitation["sender_did"] == alice.did
                assert invitation["state"] == "pending"
                assert invitation["conversation_id"] == gd  # the replica dave is in
                assert await groups_of(person) == []
                assert await state(person, gd) is None  # 404: not a member
                listed = await person.ok("GET", "/v1/conversations", params={"requests": "true"})
                assert [c["id"] for c in listed] == []

            # A message to the group: dave reads it; bob's devices get nothing of it.
            await alice.ok("POST", f"/v1/conversations/{g}/messages", 201, json={"content": "hi"})
            await eventually(lambda: _has(dave, gd, "hi"), "'hi' for dave on B")
            seen = await frames(bob_ws, 1.0)
            kinds = [f.get("type") for f in seen]
            assert "message_request.created" in kinds, kinds
            created_frame = next(f for f in seen if f.get("type") == "message_request.created")
            assert created_frame["data"]["kind"] == "group"
            assert created_frame["data"]["group_name"] == "Launch"
            assert "message.created" not in kinds and "conversation.changed" not in kinds, kinds
            bob_reads = await bob.call("GET", f"/v1/conversations/{gd}/messages")
            assert bob_reads.status_code == 404, bob_reads.text

            # The home lists everyone: it is the home's group, and no one has said no yet.
            home = await state(alice, g)
            assert home is not None
            assert set(home["members"]) == {alice.did, bob.did, erin.did, dave.did}

            # bob accepts: he is a member, with the home's latest state, and reads what
            # was said meanwhile (kept for him like a stranger's first messages) and what
            # follows.
            accepted = await bob.ok("POST", f"/v1/message-requests/{gd}/accept")
            assert accepted["state"] == "accepted" and accepted["kind"] == "group"
            assert await groups_of(bob) == [gd]
            mine = await state(bob, gd)
            assert mine is not None and mine["name"] == "Launch"
            assert mine["members"][alice.did] == "admin"
            assert mine["members"][bob.did] == "member"
            assert erin.did not in mine["members"]  # still held apart
            await alice.ok(
                "POST", f"/v1/conversations/{g}/messages", 201, json={"content": "welcome"}
            )
            await eventually(lambda: _has(bob, gd, "welcome"), "'welcome' for bob on B")
            assert await texts_of(bob, gd) == ["hi", "welcome"]
            later = await frames(bob_ws, 1.0)
            assert any(
                f.get("type") == "message.created" and f["data"]["content"] == "welcome"
                for f in later
            ), later
            assert await requests_of(bob) == []

        # erin declines: the home drops her from its member list, B keeps nothing for her.
        declined = await erin.ok("POST", f"/v1/message-requests/{gd}/decline")
        assert declined["state"] == "declined"

        async def erin_gone_at_home() -> bool:
            seen = await state(alice, g)
            return seen is not None and erin.did not in seen["members"]

        await eventually(erin_gone_at_home, "erin out of the group at A")
        home = await state(alice, g)
        assert home is not None
        assert set(home["members"]) == {alice.did, bob.did, dave.did}
        assert await requests_of(erin) == [] and await groups_of(erin) == []
        assert await state(erin, gd) is None
        # The replica's other local members are unaffected.
        for person in (bob, dave):
            seen = await state(person, gd)
            assert seen is not None and set(seen["members"]) == {alice.did, bob.did, dave.did}
        await alice.ok("POST", f"/v1/conversations/{g}/messages", 201, json={"content": "bye"})
        await eventually(lambda: _has(dave, gd, "bye"), "'bye' for dave on B")
        assert await state(erin, gd) is None


async def _has(person: Person, cid: str, text: str) -> bool:
    response = await person.call("GET", f"/v1/conversations/{cid}/messages")
    return response.status_code == 200 and any(
        m["content"] == text for m in response.json()["items"]
    )
