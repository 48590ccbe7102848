"""PATCH /v1/me, password change and account deletion over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.gateway.harness import Instance, run_instance

PASSWORD = "correct horse battery"


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def test_patch_me_normalises_and_merges(instance: Instance) -> None:
    alice = await instance.register("alice", PASSWORD)
    response = await alice.request(
        "PATCH",
        "/v1/me",
        json={
            "display_name": "Alice",
            "email": "Alice@Example.ORG",
            "phone": "+34 612 34 56 78",
            "preferences": {"timezone": "Europe/Madrid", "notification": {"email": True}},
        },
    )
    assert response.status_code == 200, response.text
    me = response.json()
    assert me["email"] == "alice@example.org"
    assert me["phone"] == "+34612345678"
    assert me["preferences"] == {
        "language": "en",
        "timezone": "Europe/Madrid",
        "notification": {"push": True, "email": True},
        "privacy": {
            "allow_offline_response": False,
            "notification_preview": True,
            "message_requests": None,
        },
    }
    cleared = await alice.request("PATCH", "/v1/me", json={"phone": None})
    assert cleared.json()["phone"] is None and cleared.json()["email"] == "alice@example.org"


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"email": "not-an-email"}, ["body", "email"]),
        ({"phone": "612345678"}, ["body", "phone"]),
        ({"phone": "+1 000"}, ["body", "phone"]),
        ({"preferences": {"timezone": "Mars/Olympus"}}, ["body", "preferences", "timezone"]),
        ({"preferences": {"language": "English!"}}, ["body", "preferences", "language"]),
        ({"preferences": {"theme": "dark"}}, ["body", "preferences", "theme"]),
        (
            {"preferences": {"privacy": {"share": True}}},
            ["body", "preferences", "privacy", "share"],
        ),
        (
            {"preferences": {"privacy": {"allow_offline_response": "yes"}}},
            ["body", "preferences", "privacy", "allow_offline_response"],
        ),
        ({"avatar_url": "javascript:alert(1)"}, ["body", "avatar_url"]),
        ({"username": "bob"}, ["body", "username"]),
    ],
)
async def test_invalid_profile_fields_are_422_naming_the_field(
    instance: Instance, body: dict, loc: list
) -> None:
    alice = await instance.register("alice", PASSWORD)
    response = await alice.request("PATCH", "/v1/me", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == loc
    async with instance.state.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT email, phone, preferences_json FROM users")
    assert row["email"] is None and row["preferences_json"]["timezone"] == "UTC"


async def test_email_and_phone_are_unique(instance: Instance) -> None:
    alice = await instance.register("alice", PASSWORD)
    bob = await instance.register("bob", PASSWORD)
    await alice.request("PATCH", "/v1/me", json={"email": "a@example.org", "phone": "+14155550123"})
    taken = await bob.request("PATCH", "/v1/me", json={"email": "A@EXAMPLE.org"})
    assert (taken.status_code, taken.json()["code"]) == (409, "email_taken")
    taken = await bob.request("PATCH", "/v1/me", json={"phone": "+1 415 555 0123"})
    assert (taken.status_code, taken.json()["code"]) == (409, "phone_taken")


async def test_password_change_revokes_other_sessions(instance: Instance) -> None:
    alice = await instance.register("alice", PASSWORD)
    other = await instance.client.post(
        "/v1/auth/login", json={"username": "alice", "password": PASSWORD, "device_id": "b"}
    )
    wrong = await alice.request(
        "PUT", "/v1/me/password", json={"current_password": "nope", "new_password": "new pass 123"}
    )
    assert wrong.status_code == 401
    ok = await alice.request(
        "PUT", "/v1/me/password", json={"current_password": PASSWORD, "new_password": "new pass 1"}
    )
    assert ok.json() == {"revoked": 1}
    token = other.json()["access_token"]
    gone = await instance.client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert gone.status_code == 401
    login = await instance.client.post(
        "/v1/auth/login", json={"username": "alice", "password": "new pass 1"}
    )
    assert login.status_code == 200


async def test_delete_me_is_soft_and_keeps_the_name_reserved(instance: Instance) -> None:
    alice = await instance.register("alice", PASSWORD)
    await alice.request("PATCH", "/v1/me", json={"email": "a@example.org"})
    wrong = await alice.request("DELETE", "/v1/me", json={"password": "wrong one"})
    assert wrong.status_code == 401
    response = await alice.request("DELETE", "/v1/me", json={"password": PASSWORD})
    assert response.status_code == 204
    assert (await alice.request("GET", "/v1/me")).status_code == 401
    login = await instance.client.post(
        "/v1/auth/login", json={"username": "alice", "password": PASSWORD}
    )
    assert (login.status_code, login.json()["code"]) == (401, "invalid_credentials")
    again = await instance.client.post(
        "/v1/auth/register", json={"username": "alice", "password": PASSWORD}
    )
    assert again.status_code == 409
    assert (await instance.client.get("/users/alice/did.json")).status_code == 404
    async with instance.state.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT * FROM users WHERE username = 'alice'")
        sessions = await conn.fetchval("SELECT count(*) FROM sessions")
        audit = await conn.fetchval(
            "SELECT host(ip_address) FROM audit_log WHERE action = 'user.deleted'"
        )
    assert row["deleted_at"] is not None and row["password_hash"] is None
    assert row["email"] is None and sessions == 0 and audit == "127.0.0.1"


async def test_messages_of_a_deleted_user_remain(instance: Instance) -> None:
    alice = await instance.register("alice", PASSWORD)
    bob = await instance.register("bob", PASSWORD)
    conversation = await alice.direct_with(bob.did)
    await alice.send(conversation["id"], "hello bob")
    bob_view = (await bob.request("GET", "/v1/conversations")).json()[0]
    await bob.send(bob_view["id"], "bye alice")
    assert (await bob.request("DELETE", "/v1/me", json={"password": PASSWORD})).status_code == 204
    history = await alice.request("GET", f"/v1/conversations/{conversation['id']}/messages")
    items = history.json()["items"]
    assert [m["content"] for m in items] == ["bye alice", "hello bob"]
    assert items[0]["sender_did"] == bob.did
    # The conversation shows the sender as deleted (alice stays as she was).
    view = (await alice.request("GET", f"/v1/conversations/{conversation['id']}")).json()
    flags = {p["did"]: p["deleted"] for p in view["participants"]}
    assert flags == {alice.did: False, bob.did: True}


async def test_a_deleted_users_dids_stop_resolving(instance: Instance) -> None:
    bob = await instance.register("bob", PASSWORD)
    agent_path = "/agents/" + bob.profile["agent_did"].rsplit(":", 1)[1] + "/did.json"
    assert (await instance.client.get(agent_path)).status_code == 200
    assert (await bob.request("DELETE", "/v1/me", json={"password": PASSWORD})).status_code == 204
    assert (await instance.client.get("/users/bob/did.json")).status_code == 404
    assert (await instance.client.get(agent_path)).status_code == 404
