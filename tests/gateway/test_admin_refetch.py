"""Admin: "refetch this peer's DID document" takes a rotated key at once."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import run_instance


async def test_an_admin_refetch_takes_a_rotated_key_at_once(database_url: str) -> None:
    async with (
        run_instance(database_url, admin_usernames="root") as b,
        run_fake_peer() as peer,
    ):
        root, bob = await b.register("root"), await b.register("bob")
        url = f"{b.base_url}/users/bob/a2a"
        first = peer.rpc("before the rotation")
        sent = await b.client.post(
            "/users/bob/a2a", content=first, headers=peer.signed_headers(url, first)
        )
        assert sent.status_code == 200, sent.text

        # The peer rotates: key-1 is gone from its document, key-2 signs.
        new_key = Ed25519PrivateKey.generate()
        peer.publish(new_key, fragment="key-2")
        second = peer.rpc("after the rotation")

        def signed(body: bytes) -> dict[str, str]:
            return peer.signed_headers(url, body, key=new_key, keyid=f"{peer.did}#key-2")

        stale = await b.client.post("/users/bob/a2a", content=second, headers=signed(second))
        assert stale.status_code == 401, stale.text  # the cached document has no key-2 yet

        path = "/v1/admin/federation/peers/refetch"
        refused = await bob.request("POST", path, json={"did": peer.did})
        assert refused.status_code == 403, refused.text
        unknown = await root.request("POST", path, json={"did": peer.did + "x"})
        assert unknown.status_code == 404 and unknown.json()["code"] == "peer_not_found"
        refetched = await root.request("POST", path, json={"did": peer.did})
        assert refetched.status_code == 200, refetched.text
        body = refetched.json()
        assert body["key_ids"] == [f"{peer.did}#key-2"] and body["not_modified"] is False

        again = await b.client.post("/users/bob/a2a", content=second, headers=signed(second))
        assert again.status_code == 200, again.text
        async with b.state.pool.acquire() as conn:
            audited = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'admin.peer_refetch'"
            )
        assert audited == 1
