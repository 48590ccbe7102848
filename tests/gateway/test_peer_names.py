"""Remote people have names: the display name a peer signs into its messages is kept for it
(cleaned and bounded) and shown among a conversation's participants."""

from __future__ import annotations

from gateway.services.public_profiles import MAX_NAME_CHARS, display_name
from tests.gateway.harness import run_instance
from tests.gateway.test_group_replicas import arrived


async def test_a_peers_signed_display_name_is_shown(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        named = await alice.request("PATCH", "/v1/me", json={"display_name": "Alice Liddell"})
        assert named.status_code == 200, named.text
        cid = (await alice.direct_with(bob.did))["id"]
        await alice.send(cid, "first")
        (copy,) = await arrived(b, "first")

        async def shown() -> str | None:
            seen = await bob.request("GET", f"/v1/conversations/{copy['conversation_id']}")
            (row,) = [p for p in seen.json()["participants"] if p.get("did") == alice.did]
            return row.get("name")

        assert await shown() == "Alice Liddell"
        renamed = await alice.request("PATCH", "/v1/me", json={"display_name": "Alice L."})
        assert renamed.status_code == 200, renamed.text
        await alice.send(cid, "second")
        await arrived(b, "second")
        assert await shown() == "Alice L."


def test_a_claimed_name_is_cleaned_and_bounded() -> None:
    assert display_name("Alice\u0007\tL.\n") == "Alice L."
    long = display_name("x" * 500)
    assert long is not None and len(long) == MAX_NAME_CHARS
    assert display_name("\u0000\u0001 ") is None and display_name(None) is None
