"""Names for remote people: an instance publishes its users' public profiles (name, avatar),
peers cache them when they resolve a DID and show them for remote participants; a change
reaches them when they revalidate; a hostile profile is refused or cleaned and never stops
resolution. Two real ``confer serve`` processes, and a fake peer serving what a test writes."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import User, free_port, run_instance
from tests.gateway.serving import confer_serve, serve_env


async def register(client: httpx.AsyncClient, username: str) -> dict[str, Any]:
    """``{"token", "did"}`` of a new user of the instance behind ``client``."""
    response = await client.post(
        "/v1/auth/register", json={"username": username, "password": "correct horse battery"}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return {"token": body["access_token"], "did": body["user"]["did"]}


def bearer(user: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {user['token']}"}


async def shown(client: httpx.AsyncClient, user: dict[str, Any], did: str) -> dict[str, Any]:
    """How ``user`` sees ``did`` among the participants of their direct conversation with it
    (opening it resolves ``did`` again, revalidating a stale cache entry)."""
    opened = await client.post(
        "/v1/conversations", json={"participant_did": did}, headers=bearer(user)
    )
    assert opened.status_code in (200, 201), opened.text
    seen = await client.get(f"/v1/conversations/{opened.json()['id']}", headers=bearer(user))
    assert seen.status_code == 200, seen.text
    (row,) = [p for p in seen.json()["participants"] if p.get("did") == did]
    return dict(row)


async def test_a_users_profile_reaches_another_instance_and_follows_changes(
    make_database: Any,
) -> None:
    port_a, port_b = free_port(), free_port()
    env_a = serve_env(port_a, await make_database())
    env_b = serve_env(port_b, await make_database(), CONFER_PEER_CACHE_TTL_SECONDS="1")
    async with (
        confer_serve(env_a) as a,
        confer_serve(env_b) as b,
        httpx.AsyncClient(base_url=a.base_url, timeout=30) as on_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=30) as on_b,
    ):
        alice, bob = await register(on_a, "alice"), await register(on_b, "bob")
        first = {"display_name": "Alice Liddell", "avatar_url": "https://img.example/alice.png"}
        named = await on_a.patch("/v1/me", json=first, headers=bearer(alice))
        assert named.status_code == 200, named.text

        # A publishes the profile, cacheable, and lists it in alice's DID document
        published = await on_a.get("/users/alice/profile.json")
        assert published.status_code == 200, published.text
        assert published.json() == {
            "id": alice["did"],
            "name": "Alice Liddell",
            "avatarUrl": "https://img.example/alice.png",
        }
        tag = published.headers["etag"]
        again = await on_a.get("/users/alice/profile.json", headers={"If-None-Match": tag})
        assert again.status_code == 304
        assert (await on_a.get("/users/nobody/profile.json")).status_code == 404
        document = (await on_a.get("/users/alice/did.json")).json()
        [service] = [s for s in document["service"] if s["type"] == "ConferProfile"]
        assert service["serviceEndpoint"].startswith(f"{a.base_url}/users/alice/profile.json?v=")

        # B resolves alice (no message yet: no signed senderName) and shows her profile
        row = await shown(on_b, bob, alice["did"])
        assert row["name"] == "Alice Liddell"
        assert row["avatar_url"] == "https://img.example/alice.png"

        # a change on A reaches B once B revalidates alice's document
        second = {"display_name": "Alice L.", "avatar_url": "https://img.example/alice-2.png"}
        renamed = await on_a.patch("/v1/me", json=second, headers=bearer(alice))
        assert renamed.status_code == 200, renamed.text
        deadline = time.monotonic() + 60
        while (row := await shown(on_b, bob, alice["did"]))["name"] != "Alice L.":
            assert time.monotonic() < deadline, f"the new name never reached B: {row}"
            await asyncio.sleep(0.5)
        assert row["avatar_url"] == "https://img.example/alice-2.png"


async def test_a_hostile_profile_is_refused_or_cleaned_and_resolution_works(
    database_url: str,
) -> None:
    async with run_fake_peer() as mallory, run_instance(database_url) as b:
        bob = await b.register("bob")
        path = "/users/mallory/profile.json"
        mallory.document["service"].append(
            {
                "id": f"{mallory.did}#profile",
                "type": "ConferProfile",
                "serviceEndpoint": f"{mallory.base_url}{path}",
            }
        )

        async def seen_after(profile: bytes | None) -> dict[str, Any]:
            if profile is None:
                mallory.files.pop(path, None)
            else:
                mallory.files[path] = profile
            await b.state.peers.resolve(mallory.did, force=True)
            return await participant(bob, mallory.did)

        # too big for the resolver's cap: no profile, the peer resolves all the same
        huge = json.dumps({"name": "x" * 200_000}).encode()
        row = await seen_after(huge)
        assert row["name"] is None and row["avatar_url"] is None
        # wrong types: nothing usable is kept
        row = await seen_after(json.dumps({"name": 42, "avatarUrl": ["x"]}).encode())
        assert row["name"] is None and row["avatar_url"] is None
        # control characters are dropped, a javascript: URL refused
        hostile = {"name": "Mal\u0000lo\u202ery\n\t", "avatarUrl": "javascript:alert(1)"}
        row = await seen_after(json.dumps(hostile).encode())
        assert row["name"] == "Mallory" and row["avatar_url"] is None
        for url in (
            "data:image/png;base64,AAAA",
            "/relative.png",
            "https://user:pw@img.example/m.png",
            "https://img.example/a b.png",
            "https://img.example/" + "a" * 3000,
        ):
            row = await seen_after(json.dumps({"name": "Mallory", "avatarUrl": url}).encode())
            assert row["avatar_url"] is None, url
        good = {"name": "Mallory", "avatarUrl": "https://img.example/m.png"}
        row = await seen_after(json.dumps(good).encode())
        assert row["avatar_url"] == "https://img.example/m.png"
        # a profile of another DID is refused: the cached one stays
        other = {"id": "did:web:elsewhere.example", "name": "Someone Else"}
        row = await seen_after(json.dumps(other).encode())
        assert row["name"] == "Mallory"
        # not JSON at all, or gone: resolution still works, the cached profile stays
        row = await seen_after(b"<html>")
        assert row["name"] == "Mallory"
        row = await seen_after(None)
        assert row["name"] == "Mallory"


async def participant(user: User, did: str) -> dict[str, Any]:
    opened = await user.request("POST", "/v1/conversations", json={"participant_did": did})
    assert opened.status_code in (200, 201), opened.text
    seen = await user.request("GET", f"/v1/conversations/{opened.json()['id']}")
    (row,) = [p for p in seen.json()["participants"] if p.get("did") == did]
    return dict(row)
