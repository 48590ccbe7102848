"""Accounts over real HTTP: register, log in, bearer authentication, log out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.gateway.harness import Instance, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def test_register_gives_user_did_agent_and_token(instance: Instance) -> None:
    alice = await instance.register("alice")
    assert alice.did == f"{instance.did}:users:alice"
    assert alice.profile["agent_did"].startswith(f"{instance.did}:agents:")
    me = await alice.request("GET", "/v1/me")
    assert me.status_code == 200
    assert me.json()["did"] == alice.did
    async with instance.state.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT password_hash, preferences_json FROM users")
        agents = await conn.fetchval(
            "SELECT count(*) FROM agents WHERE did = $1", alice.profile["agent_did"]
        )
    assert row["password_hash"].startswith("$argon2id$")
    assert row["preferences_json"]["timezone"] == "UTC"
    assert agents == 1


async def test_duplicate_username_is_409_and_writes_nothing(instance: Instance) -> None:
    await instance.register("alice")
    response = await instance.client.post(
        "/v1/auth/register", json={"username": "alice", "password": "another password"}
    )
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "username_taken"
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM users") == 1
        assert await conn.fetchval("SELECT count(*) FROM agents") == 1


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"username": "Alice", "password": "long enough"}, 422, "validation_failed"),
        ({"username": "a:b", "password": "long enough"}, 422, "validation_failed"),
        ({"username": "bob", "password": "short"}, 422, "validation_failed"),
        ({"username": "bob"}, 422, "validation_failed"),
        ({"username": 5, "password": "long enough"}, 422, "validation_failed"),
        ({"username": "bob", "password": "long enough", "admin": True}, 422, "validation_failed"),
        ([], 422, "validation_failed"),
    ],
)
async def test_bad_registration_is_a_problem(
    instance: Instance, body: object, status: int, code: str
) -> None:
    response = await instance.client.post("/v1/auth/register", json=body)
    assert response.status_code == status, response.text
    problem = response.json()
    assert problem["code"] == code and problem["status"] == status
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM users") == 0


async def test_malformed_json_is_400(instance: Instance) -> None:
    response = await instance.client.post(
        "/v1/auth/register",
        content=b'{"username": "x"',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"


async def test_oversized_body_is_413(instance: Instance) -> None:
    big = b'{"username": "' + b"a" * (instance.settings.max_body_bytes + 10) + b'"}'
    response = await instance.client.post(
        "/v1/auth/register", content=big, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


async def test_login_and_wrong_password(instance: Instance) -> None:
    await instance.register("alice", "correct horse battery")
    ok = await instance.client.post(
        "/v1/auth/login", json={"username": "alice", "password": "correct horse battery"}
    )
    assert ok.status_code == 200
    token = ok.json()["access_token"]
    me = await instance.client.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["username"] == "alice"
    for username, password in [("alice", "wrong password!"), ("nobody", "whatever1")]:
        bad = await instance.client.post(
            "/v1/auth/login", json={"username": username, "password": password}
        )
        assert bad.status_code == 401
        assert bad.json()["code"] == "invalid_credentials"
    async with instance.state.pool.acquire() as conn:
        actions = [r["action"] for r in await conn.fetch("SELECT action FROM audit_log")]
    assert actions.count("auth.login_failed") == 2
    assert "auth.login" in actions


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer not-a-jwt", "Basic YTpi", "Bearer eyJhbGciOiJub25lIn0.e30."],
)
async def test_bad_tokens_are_401(instance: Instance, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = await instance.client.get("/v1/me", headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] in ("unauthorized", "token_invalid")


async def test_logout_ends_the_session(instance: Instance) -> None:
    alice = await instance.register("alice")
    assert (await alice.request("POST", "/v1/auth/logout")).status_code == 204
    response = await alice.request("GET", "/v1/me")
    assert response.status_code == 401
    assert response.json()["code"] == "token_invalid"


async def test_token_from_another_instance_is_refused(instance: Instance, make_database) -> None:
    async with run_instance(await make_database()) as other:
        mallory = await other.register("alice")
    response = await instance.client.get("/v1/me", headers=mallory.headers)
    assert response.status_code == 401
