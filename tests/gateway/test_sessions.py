"""Device sessions over real HTTP: refresh rotation, reuse detection, races, revocation and
every token attack in docs/accounts.md (all 401)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import jwt
import pytest

from gateway.clock import Clock
from tests.gateway.harness import Instance, run_instance

PASSWORD = "correct horse battery"


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def _login(instance: Instance, device: str, username: str = "alice") -> dict:
    response = await instance.client.post(
        "/v1/auth/login",
        json={"username": username, "password": PASSWORD, "device_id": device, "platform": "web"},
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _me(instance: Instance, token: str) -> int:
    response = await instance.client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
    return response.status_code


async def _refresh(instance: Instance, refresh_token: str) -> tuple[int, dict]:
    response = await instance.client.post("/v1/auth/refresh", json={"refresh_token": refresh_token})
    return response.status_code, response.json()


async def test_refresh_rotates_and_only_the_hash_is_stored(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    first = await _login(instance, "phone")
    status, second = await _refresh(instance, first["refresh_token"])
    assert status == 200
    assert second["refresh_token"] != first["refresh_token"]
    assert second["session_id"] == first["session_id"]
    assert await _me(instance, second["access_token"]) == 200
    async with instance.state.pool.acquire() as conn:
        stored = await conn.fetchval(
            "SELECT refresh_token_hash FROM sessions WHERE id = $1", first["session_id"]
        )
    assert len(stored) == 64 and second["refresh_token"] not in stored
    assert second["refresh_token"].split(".", 1)[1] not in stored


async def test_reusing_a_refresh_token_revokes_the_chain(database_url: str) -> None:
    clock = Clock()
    async with run_instance(database_url, clock=clock) as instance:
        await instance.register("alice", PASSWORD)
        first = await _login(instance, "phone")
        status, second = await _refresh(instance, first["refresh_token"])
        assert status == 200
        clock.offset = instance.settings.refresh_grace_seconds + 1  # past the grace window
        status, problem = await _refresh(instance, first["refresh_token"])  # the thief replays
        assert (status, problem["code"]) == (401, "refresh_token_invalid")
        assert await _me(instance, second["access_token"]) == 401
        status, _ = await _refresh(instance, second["refresh_token"])
        assert status == 401
        async with instance.state.pool.acquire() as conn:
            row = await conn.fetchrow(
                """SELECT details_json, host(ip_address) AS ip FROM audit_log
                   WHERE action = 'auth.refresh_reuse'"""
            )
    assert row["details_json"]["session_id"] == first["session_id"]
    assert row["ip"] == "127.0.0.1"


async def test_replay_within_the_grace_window_returns_the_same_pair(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    first = await _login(instance, "phone")
    status, second = await _refresh(instance, first["refresh_token"])
    assert status == 200
    status, again = await _refresh(instance, first["refresh_token"])  # the second tab
    assert status == 200
    assert again["refresh_token"] == second["refresh_token"]
    assert again["access_token"] == second["access_token"]
    assert await _me(instance, second["access_token"]) == 200
    # Moving on: once the successor itself rotated, the first token is plain reuse.
    status, third = await _refresh(instance, second["refresh_token"])
    assert status == 200 and third["refresh_token"] != second["refresh_token"]
    status, _ = await _refresh(instance, first["refresh_token"])
    assert status == 401
    assert await _me(instance, third["access_token"]) == 401  # the chain was revoked
    async with instance.state.pool.acquire() as conn:
        actions = [
            r["action"]
            for r in await conn.fetch(
                "SELECT action FROM audit_log WHERE action LIKE 'auth.refresh%' ORDER BY id"
            )
        ]
    assert actions == [
        "auth.refresh",
        "auth.refresh_grace",
        "auth.refresh",
        "auth.refresh_reuse",
    ]


async def test_simultaneous_refreshes_share_one_valid_pair(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    pair = await _login(instance, "phone")
    results = await asyncio.gather(*(_refresh(instance, pair["refresh_token"]) for _ in range(6)))
    assert [status for status, _ in results] == [200] * 6  # no tab loses its session
    assert len({body["refresh_token"] for _, body in results}) == 1
    assert len({body["access_token"] for _, body in results}) == 1
    assert await _me(instance, results[0][1]["access_token"]) == 200
    assert (await _refresh(instance, pair["refresh_token"]))[0] == 200  # still in the window
    status, nxt = await _refresh(instance, results[0][1]["refresh_token"])
    assert status == 200 and await _me(instance, nxt["access_token"]) == 200


@pytest.mark.parametrize("bad", ["", "garbage", "01J9Z8Q6X3V5N2K7M4R1T0W8YC.short", "x" * 300])
async def test_bad_refresh_tokens_are_refused(instance: Instance, bad: str) -> None:
    status, body = await _refresh(instance, bad)
    assert status in (401, 422)
    assert body["code"] in ("refresh_token_invalid", "validation_failed")


async def test_list_and_revoke_sessions(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)  # no device_id: a device of its own
    laptop = await _login(instance, "laptop")
    phone = await _login(instance, "phone")
    headers = {"Authorization": f"Bearer {laptop['access_token']}"}
    listing = (await instance.client.get("/v1/me/sessions", headers=headers)).json()["items"]
    [unnamed] = [s for s in listing if s["device_id"] not in ("laptop", "phone")]
    assert unnamed["device_id"] == unnamed["id"]  # named after its session
    assert len(listing) == 3
    assert [s["current"] for s in listing if s["device_id"] == "laptop"] == [True]
    assert all(s["last_active_at"] and s["platform"] in ("web", None) for s in listing)
    response = await instance.client.delete(
        f"/v1/me/sessions/{phone['session_id']}", headers=headers
    )
    assert response.status_code == 204
    assert await _me(instance, phone["access_token"]) == 401
    assert (await _refresh(instance, phone["refresh_token"]))[0] == 401
    again = await instance.client.delete(f"/v1/me/sessions/{phone['session_id']}", headers=headers)
    assert (again.status_code, again.json()["code"]) == (404, "session_not_found")
    others = await instance.client.delete("/v1/me/sessions", headers=headers)
    assert others.json() == {"revoked": 1}
    assert await _me(instance, laptop["access_token"]) == 200
    listing = (await instance.client.get("/v1/me/sessions", headers=headers)).json()["items"]
    assert [s["device_id"] for s in listing] == ["laptop"]


async def test_authentication_records_activity_once_a_minute_and_sees_logout_at_once(
    database_url: str,
) -> None:
    """One statement authenticates: it still sees a logout on the very next request, and
    moves ``last_active_at`` only when the last recorded activity is over a minute old."""
    clock = Clock()
    async with run_instance(database_url, clock=clock) as instance:
        await instance.register("alice", PASSWORD)
        phone = await _login(instance, "phone")

        async def last_active() -> float:
            async with instance.state.pool.acquire() as conn:
                value = await conn.fetchval(
                    "SELECT last_active_at FROM sessions WHERE id = $1", phone["session_id"]
                )
            return float(value.timestamp())

        opened = await last_active()
        assert await _me(instance, phone["access_token"]) == 200
        assert await last_active() == opened
        clock.offset = 61.0
        assert await _me(instance, phone["access_token"]) == 200
        assert await last_active() >= opened + 60
        response = await instance.client.post(
            "/v1/auth/logout", headers={"Authorization": f"Bearer {phone['access_token']}"}
        )
        assert response.status_code == 204
        assert await _me(instance, phone["access_token"]) == 401


async def test_new_login_on_the_same_device_replaces_its_session(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    old = await _login(instance, "phone")
    await _login(instance, "phone")
    assert await _me(instance, old["access_token"]) == 401


async def test_other_users_session_cannot_be_revoked(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    bob = await instance.register("bob", PASSWORD)
    alice = await _login(instance, "phone")
    response = await bob.request("DELETE", f"/v1/me/sessions/{alice['session_id']}")
    assert response.status_code == 404
    assert await _me(instance, alice["access_token"]) == 200


def _claims(instance: Instance, pair: dict, **changes: object) -> dict:
    now = int(time.time())
    claims = {
        "iss": instance.did,
        "sub": pair["user"]["id"],
        "sid": pair["session_id"],
        "jti": "x1",
        "typ": "access",
        "iat": now,
        "exp": now + 300,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


async def test_token_attacks_are_401(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    pair = await _login(instance, "phone")
    key = instance.state.identity.token_key
    sign = lambda claims: jwt.encode(claims, key.private_key, algorithm="EdDSA")  # noqa: E731
    # Control: a token we sign correctly ourselves is accepted, so the refusals below mean it.
    assert await _me(instance, sign(_claims(instance, pair))) == 200
    public_pem = key.public_key.public_bytes_raw()
    attacks = {
        "alg none": jwt.encode(_claims(instance, pair), None, algorithm="none"),
        "HS256 with the public key": jwt.encode(
            _claims(instance, pair), public_pem, algorithm="HS256"
        ),
        "no exp": sign(_claims(instance, pair, exp=None)),
        "expired": sign(_claims(instance, pair, exp=int(time.time()) - 5)),
        "refresh token as access token": pair["refresh_token"],
        "refresh typ": sign(_claims(instance, pair, typ="refresh")),
        "other issuer": sign(_claims(instance, pair, iss="did:web:evil.example")),
    }
    for name, token in attacks.items():
        response = await instance.client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, name
        assert response.json()["code"] == "token_invalid", name
    await instance.client.post(
        "/v1/auth/logout", headers={"Authorization": f"Bearer {pair['access_token']}"}
    )
    assert await _me(instance, pair["access_token"]) == 401  # revoked session
    assert await _me(instance, sign(_claims(instance, pair))) == 401


async def test_a_token_verified_before_is_still_checked_on_every_request(
    database_url: str,
) -> None:
    """The process remembers access tokens whose signature it verified; a remembered one
    still expires, a token of another type is refused every time, and a copy with another
    signature is verified (and refused) on its own."""
    clock = Clock()
    async with run_instance(database_url, clock=clock) as instance:
        await instance.register("alice", PASSWORD)
        pair = await _login(instance, "phone")
        token = pair["access_token"]
        assert await _me(instance, token) == 200
        assert await _me(instance, token) == 200  # remembered
        head, _, signature = token.rpartition(".")
        flipped = signature[:10] + ("B" if signature[10] == "A" else "A") + signature[11:]
        assert await _me(instance, f"{head}.{flipped}") == 401
        key = instance.state.identity.token_key
        resource = jwt.encode(
            _claims(instance, pair, typ="resource", aud=f"{instance.base_url}/mcp"),
            key.private_key,
            algorithm="EdDSA",
        )
        assert [await _me(instance, resource) for _ in range(2)] == [401, 401]
        clock.offset = pair["expires_in"] + 1
        assert await _me(instance, token) == 401


async def test_security_actions_are_audited_with_the_client_ip(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    a = await _login(instance, "a")
    b = await _login(instance, "b")
    c = await _login(instance, "c")
    await _refresh(instance, c["refresh_token"])
    await instance.client.post("/v1/auth/login", json={"username": "alice", "password": "nope"})
    headers = {"Authorization": f"Bearer {a['access_token']}"}
    await instance.client.delete(f"/v1/me/sessions/{b['session_id']}", headers=headers)
    await instance.client.delete("/v1/me/sessions", headers=headers)
    await instance.client.post("/v1/auth/logout", headers=headers)
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch("SELECT action, host(ip_address) AS ip FROM audit_log ORDER BY id")
    actions = [r["action"] for r in rows]
    for action in (
        "user.registered",
        "auth.login",
        "auth.refresh",
        "auth.login_failed",
        "session.revoked",
        "session.revoked_others",
        "auth.logout",
    ):
        assert action in actions
    assert {r["ip"] for r in rows} == {"127.0.0.1"}
