"""The admin API over real HTTP: bootstrap, users, disable/enable, sessions, audit, stats."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from gateway.services.admin_bootstrap import ensure_admin
from gateway.settings import Settings
from tests.gateway.harness import Instance, User, run_instance

PASSWORD = "correct horse battery"


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url, admin_usernames="root") as running:
        yield running


@pytest.fixture
async def root(instance: Instance) -> User:
    user = await instance.register("root", PASSWORD)
    assert user.profile["is_admin"] is True
    return user


async def test_admin_routes_refuse_non_admins(instance: Instance) -> None:
    alice = await instance.register("alice")
    assert alice.profile["is_admin"] is False
    for path in ("/v1/admin/users", "/v1/admin/sessions", "/v1/admin/audit", "/v1/admin/stats"):
        response = await alice.request("GET", path)
        assert (response.status_code, response.json()["code"]) == (403, "admin_required"), path
        assert (await instance.client.get(path)).status_code == 401


async def test_list_and_search_users(instance: Instance, root: User) -> None:
    alice = await instance.register("alice")
    await instance.register("bob")
    await alice.request("PATCH", "/v1/me", json={"email": "wonder@example.org"})
    everyone = (await root.request("GET", "/v1/admin/users")).json()
    assert [u["username"] for u in everyone["items"]] == ["bob", "alice", "root"]
    found = (await root.request("GET", "/v1/admin/users", params={"q": "WONDER"})).json()
    assert [u["username"] for u in found["items"]] == ["alice"]
    wildcard = (await root.request("GET", "/v1/admin/users", params={"q": "%"})).json()
    assert wildcard["items"] == []
    page = (await root.request("GET", "/v1/admin/users", params={"limit": 2})).json()
    assert len(page["items"]) == 2 and page["next_before"] == page["items"][-1]["id"]
    rest = await root.request(
        "GET", "/v1/admin/users", params={"limit": 2, "before": page["next_before"]}
    )
    assert [u["username"] for u in rest.json()["items"]] == ["root"]
    one = await root.request("GET", f"/v1/admin/users/{alice.profile['id']}")
    assert one.json()["email"] == "wonder@example.org"
    missing = await root.request("GET", "/v1/admin/users/01J9Z8Q6X3V5N2K7M4R1T0W8YC")
    assert missing.status_code == 404


async def test_disable_revokes_sessions_and_enable_restores(instance: Instance, root: User) -> None:
    bob = await instance.register("bob", PASSWORD)
    bob_id = bob.profile["id"]
    response = await root.request(
        "POST", f"/v1/admin/users/{bob_id}/disable", json={"reason": "spam"}
    )
    assert response.status_code == 200
    assert response.json()["disabled_reason"] == "spam" and response.json()["disabled_at"]
    assert (await bob.request("GET", "/v1/me")).status_code == 401
    login = await instance.client.post(
        "/v1/auth/login", json={"username": "bob", "password": PASSWORD}
    )
    assert (login.status_code, login.json()["code"]) == (403, "account_disabled")
    wrong = await instance.client.post(
        "/v1/auth/login", json={"username": "bob", "password": "wrong password"}
    )
    assert wrong.status_code == 401  # no hint without the password
    self_disable = await root.request(
        "POST", f"/v1/admin/users/{root.profile['id']}/disable", json={}
    )
    assert self_disable.status_code == 409
    enabled = await root.request("POST", f"/v1/admin/users/{bob_id}/enable")
    assert enabled.json()["disabled_at"] is None
    login = await instance.client.post(
        "/v1/auth/login", json={"username": "bob", "password": PASSWORD}
    )
    assert login.status_code == 200
    audit = await root.request("GET", "/v1/admin/audit", params={"action": "admin.*"})
    items = audit.json()["items"]
    assert [i["action"] for i in items] == ["admin.user_enabled", "admin.user_disabled"]
    assert all(i["ip_address"] == "127.0.0.1" and i["user_id"] == bob_id for i in items)
    assert items[1]["details"]["admin_id"] == root.profile["id"]
    assert items[1]["details"]["sessions_revoked"] == 1


async def test_sessions_listing(instance: Instance, root: User) -> None:
    bob = await instance.register("bob")
    listing = (await root.request("GET", "/v1/admin/sessions")).json()["items"]
    assert {s["user_id"] for s in listing} == {root.profile["id"], bob.profile["id"]}
    assert all("refresh_token_hash" not in s for s in listing)
    only_bob = await root.request(
        "GET", "/v1/admin/sessions", params={"user_id": bob.profile["id"]}
    )
    assert [s["user_id"] for s in only_bob.json()["items"]] == [bob.profile["id"]]


async def test_audit_filters(instance: Instance, root: User) -> None:
    bob = await instance.register("bob", PASSWORD)
    await instance.client.post("/v1/auth/login", json={"username": "bob", "password": "nope1234"})
    by_user = await root.request("GET", "/v1/admin/audit", params={"user_id": bob.profile["id"]})
    assert {i["action"] for i in by_user.json()["items"]} == {
        "user.registered",
        "auth.login_failed",
    }
    failed = await root.request("GET", "/v1/admin/audit", params={"action": "auth.login_failed"})
    assert [i["ip_address"] for i in failed.json()["items"]] == ["127.0.0.1"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    later = await root.request("GET", "/v1/admin/audit", params={"since": future})
    assert later.json()["items"] == []
    earlier = await root.request("GET", "/v1/admin/audit", params={"until": future})
    assert len(earlier.json()["items"]) >= 3
    bad = await root.request("GET", "/v1/admin/audit", params={"since": "yesterday"})
    assert bad.status_code == 422


async def test_stats(instance: Instance, root: User) -> None:
    bob = await instance.register("bob", PASSWORD)
    await instance.register("carol", PASSWORD)
    await bob.request("DELETE", "/v1/me", json={"password": PASSWORD})
    await instance.client.post("/v1/auth/login", json={"username": "x", "password": "y"})
    stats = (await root.request("GET", "/v1/admin/stats")).json()
    assert stats["users_total"] == 3 and stats["users_deleted"] == 1
    assert stats["users_active"] == 2 and stats["admins"] == 1
    assert stats["agents"] == 3 and stats["sessions_live"] == 2
    assert stats["login_failures_24h"] == 1


async def test_bootstrap_setting_promotes_existing_users(database_url: str) -> None:
    async with run_instance(database_url) as plain:
        await plain.register("alice", PASSWORD)
    async with run_instance(database_url, admin_usernames="alice, nobody") as promoted:
        login = await promoted.client.post(
            "/v1/auth/login", json={"username": "alice", "password": PASSWORD}
        )
        assert login.json()["user"]["is_admin"] is True
        token = login.json()["access_token"]
        response = await promoted.client.get(
            "/v1/admin/stats", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200
        async with promoted.state.pool.acquire() as conn:
            granted = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'admin.granted'"
            )
        assert granted == 1


async def test_bootstrap_admins_may_be_a_json_list(database_url: str) -> None:
    """``CONFER_ADMIN_USERNAMES`` as a JSON list (like the other list settings) promotes its
    users; a malformed list is refused at start, never read as "no admins"."""
    async with run_instance(database_url) as plain:
        await plain.register("alice", PASSWORD)
    async with run_instance(database_url, admin_usernames='["Alice", "nobody"]') as promoted:
        login = await promoted.client.post(
            "/v1/auth/login", json={"username": "alice", "password": PASSWORD}
        )
        assert login.json()["user"]["is_admin"] is True
    with pytest.raises(ValidationError, match="admin_usernames"):
        Settings(admin_usernames='["alice", ')


async def test_ensure_admin_creates_or_promotes(instance: Instance) -> None:
    state = instance.state
    report = await ensure_admin(state.pool, state.identity, state.settings, "ops", None)
    assert report.startswith("ops is now an admin (created with password: ")
    password = report.rsplit(": ", 1)[1].rstrip(")")
    login = await instance.client.post(
        "/v1/auth/login", json={"username": "ops", "password": password}
    )
    assert login.json()["user"]["is_admin"] is True
    again = await ensure_admin(state.pool, state.identity, state.settings, "ops", None)
    assert again == "ops is already an admin"


async def test_cli_create_admin(instance: Instance) -> None:
    await instance.register("alice", PASSWORD)
    env = {
        "CONFER_DATABASE_URL": instance.settings.database_url or "",
        "CONFER_PUBLIC_URL": instance.settings.public_url,
        "PATH": "/usr/bin:/bin",
    }
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", "create-admin", "alice"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "alice is now an admin"
    async with instance.state.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM admins") == 1
