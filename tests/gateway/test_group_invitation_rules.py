"""Consent to a group's home, rule by rule (docs/federation.md, "Consent to a group's home"), on
in-process instances (tests/gateway/harness.py): who is asked and who is not (a contact on the
home, the home trusted, requests off), the role the home gives kept until accepting, an
invitation withdrawn by the home, declined, given again, declined with a block, and a replica
member adding a neighbour through the home. The end-to-end flow across ``confer serve``
processes is tests/gateway/test_group_invitations.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.gateway.harness import User, run_instance
from tests.gateway.test_group_membership import (
    eventually,
    groups_of,
    new_group,
    participant_id,
    the_group,
    view,
)


async def invitations(user: User) -> list[dict[str, Any]]:
    response = await user.request("GET", "/v1/message-requests")
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def invited(user: User, count: int = 1) -> list[dict[str, Any]]:
    """The user's pending requests once there are ``count`` of them."""
    found: list[dict[str, Any]] = []

    async def arrived() -> bool:
        found[:] = await invitations(user)
        return len(found) == count

    await settle_until(arrived, f"{count} request(s) for {user.did}")
    return found


async def settle_until(check: Any, what: str) -> None:
    for _ in range(600):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def decided_events(user: User) -> list[dict[str, Any]]:
    async with user.instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT data_json FROM user_events e
               JOIN event_payloads p ON p.id = e.event_id WHERE user_id = $1
               AND type = 'message_request.decided' ORDER BY seq""",
            user.profile["id"],
        )
    return [json.loads(r[0]) if isinstance(r[0], str) else dict(r[0]) for r in rows]


async def test_who_is_asked_and_who_is_not(make_database) -> None:
    async with (
        run_instance(await make_database(), message_requests_default=True) as a,
        run_instance(await make_database(), message_requests_default=True) as b,
    ):
        alice, zoe = await a.register("alice"), await a.register("zoe")
        bob, carl, dina, fred = (
            await b.register("bob"),
            await b.register("carl"),
            await b.register("dina"),
            await b.register("fred"),
        )
        # carl trusts the home instance itself; dina turned requests off; zoe (on A) is
        # fred's contact: each knows the home, or does not want to be asked.
        trusted = await carl.request(
            "POST", "/v1/contacts", json={"did": a.did, "trust_level": "trusted"}
        )
        assert trusted.status_code == 201, trusted.text
        off = await dina.request(
            "PATCH", "/v1/me", json={"preferences": {"privacy": {"message_requests": False}}}
        )
        assert off.status_code == 200, off.text
        assert (
            await fred.request("POST", "/v1/contacts", json={"did": zoe.did})
        ).status_code == 201
        g1 = await new_group(alice, "G1", [bob.did, carl.did, dina.did, fred.did])
        for user in (carl, dina, fred):
            await the_group(user)
        (invitation,) = await invited(bob)
        assert invitation["kind"] == "group" and invitation["sender_did"] == alice.did
        replica = invitation["conversation_id"]
        assert await groups_of(bob) == []
        for user in (carl, dina, fred):
            assert await invitations(user) == [], user.did

        # Added as an observer while held: the role the home gave is taken on accepting.
        home_view = await view(alice, g1)
        assert home_view is not None
        (bob_row,) = [p for p in home_view["participants"] if p.get("did") == bob.did]
        role = await alice.request(
            "PATCH", f"/v1/conversations/{g1}/participants/{bob_row['id']}",
            json={"role": "observer"},
        )  # fmt: skip
        assert role.status_code in (200, 204), role.text

        async def observer_announced() -> bool:
            async with b.state.pool.acquire() as conn:
                roles = await conn.fetchval(
                    "SELECT roles FROM group_replicas WHERE conversation_id = $1", replica
                )
            return dict(roles or {}).get(bob.did) == "observer"

        await eventually(observer_announced, "the observer role kept on B")
        assert len(await invitations(bob)) == 1  # the same invitation, not another
        accepted = await bob.request("POST", f"/v1/message-requests/{replica}/accept")
        assert accepted.status_code == 200, accepted.text
        mine = await view(bob, replica)
        assert mine is not None
        (me,) = [p for p in mine["participants"] if p.get("did") == bob.did]
        assert me["role"] == "observer"
        # Accepting made the inviter a contact: bob knows A from now on.
        contacts = (await bob.request("GET", "/v1/contacts")).json()
        assert alice.did in {c["did"] for c in contacts}
        g2 = await new_group(alice, "G2", [bob.did])
        await eventually(lambda: _in_groups(bob, 2), "G2 joined directly")
        assert await invitations(bob) == []
        assert g2


async def _in_groups(user: User, count: int) -> bool:
    return len(await groups_of(user)) == count


async def test_an_invitation_is_withdrawn_declined_again_and_blocked(make_database) -> None:
    async with (
        run_instance(await make_database(), message_requests_default=True) as a,
        run_instance(await make_database(), message_requests_default=True) as b,
    ):
        alice, bob, erin = (
            await a.register("alice"),
            await b.register("bob"),
            await b.register("erin"),
        )
        g1 = await new_group(alice, "G1", [bob.did, erin.did])
        (bob_inv,) = await invited(bob)
        (erin_inv,) = await invited(erin)
        replica = bob_inv["conversation_id"]
        assert erin_inv["conversation_id"] == replica

        # The home removes bob before he decides: his invitation is withdrawn.
        home_view = await view(alice, g1)
        assert home_view is not None
        (bob_row,) = [p for p in home_view["participants"] if p.get("did") == bob.did]
        kicked = await alice.request(
            "DELETE", f"/v1/conversations/{g1}/participants/{bob_row['id']}"
        )
        assert kicked.status_code in (200, 204), kicked.text
        await invited(bob, 0)
        assert [e["state"] for e in await decided_events(bob)] == ["withdrawn"]
        gone = await bob.request("POST", f"/v1/message-requests/{replica}/accept")
        assert gone.status_code == 404, gone.text

        # erin declines: the home takes her out; invited again, she is asked again.
        declined = await erin.request("POST", f"/v1/message-requests/{replica}/decline")
        assert declined.status_code == 200, declined.text

        async def erin_out() -> bool:
            seen = await view(alice, g1)
            return seen is not None and erin.did not in {p.get("did") for p in seen["participants"]}

        await eventually(erin_out, "erin out at the home")
        added = await alice.request(
            "POST", f"/v1/conversations/{g1}/participants", json={"did": erin.did}
        )
        assert added.status_code in (200, 201), added.text
        (again,) = await invited(erin)
        assert again["conversation_id"] == replica and again["state"] == "pending"

        # Declined and blocked: the home is blocked, and takes her out again.
        blocked = await erin.request("POST", f"/v1/message-requests/{replica}/decline?block=true")
        assert blocked.status_code == 200, blocked.text
        await eventually(erin_out, "erin out at the home again")
        contacts = (await erin.request("GET", "/v1/contacts")).json()
        assert {c["did"]: c["trust_level"] for c in contacts}.get(a.did) == "blocked"
        # A blocked home invites her to nothing: no request, no group.
        await new_group(alice, "G3", [erin.did, bob.did])
        await invited(bob, 1)
        assert await invitations(erin) == [] and await groups_of(erin) == []
        assert await view(erin, replica) is None


async def test_a_member_adding_a_neighbour_who_does_not_know_the_home(make_database) -> None:
    async with (
        run_instance(await make_database(), message_requests_default=True) as a,
        run_instance(await make_database(), message_requests_default=True) as b,
    ):
        alice, bob, frank = (
            await a.register("alice"),
            await b.register("bob"),
            await b.register("frank"),
        )
        assert (
            await bob.request("POST", "/v1/contacts", json={"did": alice.did})
        ).status_code == 201
        g1 = await new_group(alice, "G1", [bob.did])
        replica = (await the_group(bob))["id"]
        home_view = await view(alice, g1)
        assert home_view is not None
        admin = await alice.request(
            "PATCH",
            f"/v1/conversations/{g1}/participants/{participant_id(home_view, bob.did)}",
            json={"role": "admin"},
        )
        assert admin.status_code in (200, 204), admin.text
        await eventually(lambda: _role_is(bob, replica, "admin"), "bob an admin on B")
        # bob (on B) adds frank through the home: frank does not know A, so he is asked,
        # by bob; the home lists him meanwhile.
        added = await bob.request(
            "POST", f"/v1/conversations/{replica}/participants", json={"did": frank.did}
        )
        assert added.status_code in (200, 201), added.text
        (invitation,) = await invited(frank)
        assert invitation["sender_did"] == bob.did and invitation["group_name"] == "G1"
        assert await groups_of(frank) == []
        seen = await view(bob, replica)
        assert seen is not None and frank.did not in {p.get("did") for p in seen["participants"]}
        accepted = await frank.request("POST", f"/v1/message-requests/{replica}/accept")
        assert accepted.status_code == 200, accepted.text
        assert await groups_of(frank) != []


async def _role_is(user: User, cid: str, role: str) -> bool:
    seen = await view(user, cid)
    return seen is not None and any(
        p.get("did") == user.did and p["role"] == role for p in seen["participants"]
    )


async def test_the_history_sent_for_an_invited_user_waits_for_them(make_database) -> None:
    async with (
        run_instance(await make_database(), message_requests_default=True) as a,
        run_instance(await make_database(), message_requests_default=True) as b,
    ):
        alice, zoe, bob = (
            await a.register("alice"),
            await a.register("zoe"),
            await b.register("bob"),
        )
        g1 = await new_group(alice, "G1", [zoe.did])
        for text in ("old news", "older news"):
            await alice.send(g1, text)
        # bob joins later: the home sends B the group's history behind the join event, and
        # B keeps it for bob, who is asked first.
        added = await alice.request(
            "POST", f"/v1/conversations/{g1}/participants", json={"did": bob.did}
        )
        assert added.status_code in (200, 201), added.text
        (invitation,) = await invited(bob)
        replica = invitation["conversation_id"]

        async def kept() -> bool:
            async with b.state.pool.acquire() as conn:
                count = await conn.fetchval(
                    "SELECT count(*) FROM messages WHERE conversation_id = $1", replica
                )
            return int(count) == 2

        await eventually(kept, "the history kept on B")
        assert await groups_of(bob) == []
        accepted = await bob.request("POST", f"/v1/message-requests/{replica}/accept")
        assert accepted.status_code == 200, accepted.text
        page = (await bob.request("GET", f"/v1/conversations/{replica}/messages")).json()
        assert [m["content"] for m in reversed(page["items"])] == ["old news", "older news"]
        seen = await view(bob, replica)
        assert seen is not None and seen["membership"]["unread"] == 0  # history, not unread
        await alice.send(g1, "welcome bob")

        async def unread_one() -> bool:
            now = await view(bob, replica)
            return now is not None and now["membership"]["unread"] == 1

        await eventually(unread_one, "a later message unread for bob")
