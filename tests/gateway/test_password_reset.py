"""Password resets: self-service by e-mail (token read from the mail a real SMTP server got)
and by an admin; both end every session of the account."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

from gateway.workers.retention import retain_once
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.pushservice import smtp_server
from tests.gateway.test_notifications import eventually

NEW_PASSWORD = "a brand new passphrase"
TOKEN = re.compile(r"reset_token=([A-Za-z0-9_-]{40,})")


def smtp(port: int) -> dict[str, Any]:
    return {"smtp_host": "127.0.0.1", "smtp_port": port, "smtp_tls": "none"}


async def with_email(instance: Instance, name: str) -> User:
    user = await instance.register(name)
    response = await user.request("PATCH", "/v1/me", json={"email": f"{name}@reset.example"})
    assert response.status_code == 200, response.text
    return user


async def login(instance: Instance, name: str, password: str) -> int:
    response = await instance.client.post(
        "/v1/auth/login", json={"username": name, "password": password, "device_id": "x"}
    )
    return response.status_code


async def test_reset_by_email(database_url: str) -> None:
    with smtp_server() as (port, mails):
        async with run_instance(database_url, **smtp(port)) as instance:
            bob = await with_email(instance, "bob")
            asked = await instance.client.post("/v1/auth/password-reset", json={"username": "Bob"})
            assert asked.status_code == 202, asked.text
            unknown = await instance.client.post(
                "/v1/auth/password-reset", json={"email": "nobody@reset.example"}
            )
            assert (unknown.status_code, unknown.json()) == (202, asked.json())
            [(recipients, mail)] = await eventually(lambda: mails)
            assert recipients == ["bob@reset.example"]
            token = TOKEN.search(mail.get_payload(decode=True).decode())
            assert token is not None
            async with instance.state.pool.acquire() as conn:
                stored = await conn.fetchval("SELECT token_hash FROM password_resets")
            assert stored == hashlib.sha256(token[1].encode()).hexdigest()  # hashed at rest

            confirm = {"token": token[1], "new_password": NEW_PASSWORD}
            done = await instance.client.post("/v1/auth/password-reset/confirm", json=confirm)
            assert done.status_code == 200, done.text
            assert done.json() == {"revoked": 1}
            assert (await bob.request("GET", "/v1/me")).status_code == 401  # session ended
            assert await login(instance, "bob", NEW_PASSWORD) == 200
            assert await login(instance, "bob", "correct horse battery") == 401
            again = await instance.client.post("/v1/auth/password-reset/confirm", json=confirm)
            assert again.status_code == 400
            assert again.json()["code"] == "reset_token_invalid"  # single use
            await asyncio.sleep(0.5)
            assert len(mails) == 1  # none for the unknown address


async def test_expired_token_and_limits(database_url: str) -> None:
    limits = {"rate_limit_reset_account": "1/hour", "rate_limit_reset_ip": "3/hour"}
    with smtp_server() as (port, mails):
        async with run_instance(database_url, **smtp(port), **limits) as instance:
            await with_email(instance, "bob")
            body = {"username": "bob"}
            first = await instance.client.post("/v1/auth/password-reset", json=body)
            second = await instance.client.post("/v1/auth/password-reset", json=body)
            assert first.status_code == second.status_code == 202
            assert first.json() == second.json()  # the account limit is silent...
            [(_, mail)] = await eventually(lambda: mails)
            await asyncio.sleep(0.5)
            assert len(mails) == 1  # ...and sends nothing more
            token = TOKEN.search(mail.get_payload(decode=True).decode())
            assert token is not None
            async with instance.state.pool.acquire() as conn:
                await conn.execute("UPDATE password_resets SET expires_at = now() - interval '1s'")
            late = await instance.client.post(
                "/v1/auth/password-reset/confirm",
                json={"token": token[1], "new_password": NEW_PASSWORD},
            )
            assert late.status_code == 400 and late.json()["code"] == "reset_token_invalid"
            assert await login(instance, "bob", NEW_PASSWORD) == 401
            deleted = await retain_once(
                instance.state.pool, instance.state.clock, instance.settings
            )
            assert deleted["password_resets"] == 1  # an expired token does not stay
            over = await instance.client.post("/v1/auth/password-reset", json=body)
            assert (
                over.status_code == 429
            )  # two requests and a confirmation spent the IP budget (3/hour)
            assert over.json()["code"] == "rate_limited"


async def test_reset_needs_smtp_and_one_identifier(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        off = await instance.client.post("/v1/auth/password-reset", json={"username": "bob"})
        assert off.status_code == 503 and off.json()["code"] == "not_configured"
        both = await instance.client.post(
            "/v1/auth/password-reset", json={"username": "bob", "email": "b@reset.example"}
        )
        assert both.status_code == 422


async def test_admin_sets_or_resets_a_password(database_url: str) -> None:
    with smtp_server() as (port, mails):
        async with run_instance(database_url, admin_usernames="root", **smtp(port)) as instance:
            root = await instance.register("root")
            bob = await with_email(instance, "bob")
            target = f"/v1/admin/users/{bob.profile['id']}"
            refused = await bob.request("PUT", f"{target}/password", json={"password": "x" * 12})
            assert refused.status_code == 403

            done = await root.request("PUT", f"{target}/password", json={"password": NEW_PASSWORD})
            assert done.status_code == 200, done.text
            assert done.json()["sessions_revoked"] == 1
            assert (await bob.request("GET", "/v1/me")).status_code == 401
            assert await login(instance, "bob", NEW_PASSWORD) == 200

            issued = await root.request("POST", f"{target}/password-reset")
            assert issued.status_code == 200, issued.text
            assert issued.json()["sessions_revoked"] == 1  # the login just above
            token = issued.json()["reset_token"]
            [(recipients, mail)] = await eventually(lambda: mails)
            assert (
                recipients == ["bob@reset.example"]
                and token in mail.get_payload(decode=True).decode()
            )
            assert await login(instance, "bob", NEW_PASSWORD) == 200  # a reset issued...
            confirm = {"token": token, "new_password": "the third passphrase"}
            ok = await instance.client.post("/v1/auth/password-reset/confirm", json=confirm)
            assert ok.status_code == 200 and ok.json() == {"revoked": 1}  # ...ends it on use
            assert await login(instance, "bob", "the third passphrase") == 200

            audit = await root.request(
                "GET", "/v1/admin/audit", params={"user_id": bob.profile["id"]}
            )
            actions = [row["action"] for row in audit.json()["items"]]
            for action in (
                "admin.password_set",
                "admin.password_reset_issued",
                "auth.password_reset",
            ):
                assert action in actions
            missing = await root.request(
                "PUT",
                "/v1/admin/users/01J9Z8Q6X3V5N2K7M4R1T0W8YC/password",
                json={"password": NEW_PASSWORD},
            )
            assert missing.status_code == 404
