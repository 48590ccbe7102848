"""LLM keys: AES-256-GCM envelopes (tamper, cross-row, nonces, rotation) and the HTTP API."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from gateway.app import create_app
from gateway.errors import EncryptionKeyError, EncryptionNotConfiguredError
from gateway.services.encryption import Keyring, generate_key_entry, parse_envelope
from gateway.services.llm_keys import decrypt_llm_key, reencrypt_all
from tests.gateway.harness import Instance, User, free_port, loopback_settings, run_instance

K1 = generate_key_entry("k1")
K2 = generate_key_entry("k2")
SECRET = "sk-test-0123456789abcdef"


def test_envelope_round_trip_with_fresh_nonces() -> None:
    ring = Keyring.from_setting(K1)
    a = ring.encrypt(SECRET, user_id="U1", provider="openai", set_at=100)
    b = ring.encrypt(SECRET, user_id="U1", provider="openai", set_at=100)
    assert a != b and parse_envelope(a).nonce != parse_envelope(b).nonce
    assert len(parse_envelope(a).nonce) == 12
    assert ring.decrypt(a, user_id="U1", provider="openai") == SECRET
    assert SECRET not in a


def test_tampering_and_cross_row_use_fail() -> None:
    ring = Keyring.from_setting(K1)
    stored = ring.encrypt(SECRET, user_id="U1", provider="openai", set_at=100)
    head, ciphertext = stored.rsplit(".", 1)
    flipped = ciphertext[:-2] + ("A" if ciphertext[-2] != "A" else "B") + ciphertext[-1]
    for bad, user, provider in [
        (f"{head}.{flipped}", "U1", "openai"),
        (stored, "U2", "openai"),  # copied into another user's row
        (stored, "U1", "anthropic"),  # copied under another provider
        (stored.replace(".100.", ".101."), "U1", "openai"),  # set time altered
    ]:
        with pytest.raises(EncryptionKeyError):
            ring.decrypt(bad, user_id=user, provider=provider)


def test_missing_and_wrong_keys_are_clear_errors() -> None:
    stored = Keyring.from_setting(K1).encrypt(SECRET, user_id="U", provider="openai", set_at=1)
    with pytest.raises(EncryptionNotConfiguredError):
        Keyring.from_setting(None).decrypt(stored, user_id="U", provider="openai")
    with pytest.raises(EncryptionKeyError, match=r"'k1'.*not in CONFER_ENCRYPTION_KEYS"):
        Keyring.from_setting(K2).decrypt(stored, user_id="U", provider="openai")
    wrong_k1 = "k1:" + K2.split(":", 1)[1]
    with pytest.raises(EncryptionKeyError, match="wrong key"):
        Keyring.from_setting(wrong_k1).decrypt(stored, user_id="U", provider="openai")


@pytest.mark.parametrize(
    "value", ["k1", "k1:short", "k1:!!!", f"{K1},{K1}", "bad id:" + K1.split(":")[1]]
)
def test_bad_key_settings_refuse_to_start(value: str) -> None:
    with pytest.raises(ValueError, match="CONFER_ENCRYPTION_KEYS"):
        Keyring.from_setting(value)


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url, encryption_keys=K1) as running:
        yield running


async def _put(user: User, provider: str, key: str = SECRET) -> object:
    return await user.request("PUT", f"/v1/me/llm-keys/{provider}", json={"api_key": key})


async def test_put_list_delete_never_shows_the_key(instance: Instance) -> None:
    alice = await instance.register("alice")
    response = await _put(alice, "openai")
    assert response.status_code == 200, response.text
    listing = await alice.request("GET", "/v1/me/llm-keys")
    assert [i["provider"] for i in listing.json()["items"]] == ["openai"]
    assert SECRET not in listing.text and SECRET not in (await alice.request("GET", "/v1/me")).text
    async with instance.state.pool.acquire() as conn:
        stored = await conn.fetchval("SELECT llm_keys_json->>'openai' FROM users")
    assert stored.startswith("gcm1.k1.") and SECRET not in stored
    plain = await decrypt_llm_key(
        instance.state.pool, instance.state.keyring, user_id=alice.profile["id"], provider="openai"
    )
    assert plain == SECRET
    assert (await alice.request("DELETE", "/v1/me/llm-keys/openai")).status_code == 204
    again = await alice.request("DELETE", "/v1/me/llm-keys/openai")
    assert (again.status_code, again.json()["code"]) == (404, "llm_key_not_found")
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT action, host(ip_address) AS ip, details_json FROM audit_log "
            "WHERE action LIKE 'llm_key.%' ORDER BY id"
        )
    assert [(r["action"], r["ip"]) for r in rows] == [
        ("llm_key.set", "127.0.0.1"),
        ("llm_key.removed", "127.0.0.1"),
    ]
    assert SECRET not in str([r["details_json"] for r in rows])


@pytest.mark.parametrize("provider", ["nope", "offline", "ollama"])
async def test_unknown_or_keyless_provider_is_422(instance: Instance, provider: str) -> None:
    alice = await instance.register("alice")
    response = await _put(alice, provider)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["path", "provider"]


async def test_operator_endpoints_take_keys(database_url: str) -> None:
    extra = {"proxy": {"base_url": "http://127.0.0.1:9/v1"}}
    async with run_instance(database_url, encryption_keys=K1, llm_providers=extra) as running:
        alice = await running.register("alice")
        assert (await _put(alice, "proxy")).status_code == 200
        assert (await _put(alice, "ollama")).status_code == 422  # keyless and not configured


async def test_key_with_whitespace_is_422(instance: Instance) -> None:
    alice = await instance.register("alice")
    assert (await _put(alice, "openai", "sk bad")).status_code == 422


async def test_without_encryption_keys_put_is_503(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with run_instance(database_url) as bare:
        alice = await bare.register("alice")
        with caplog.at_level(logging.INFO, logger="gateway.http_errors"):
            response = await _put(alice, "openai")
    assert (response.status_code, response.json()["code"]) == (503, "encryption_not_configured")
    # a known condition with its own code, not an internal error
    logged = [r for r in caplog.records if r.name == "gateway.http_errors"]
    assert [r.levelno for r in logged] == [logging.WARNING]
    assert "internal error" not in logged[0].getMessage()
    assert "encryption_not_configured" in logged[0].getMessage()


async def test_rotation_reencrypts_everything_under_the_newest_key(
    instance: Instance, database_url: str
) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    for user, provider in [(alice, "openai"), (alice, "tavily"), (bob, "anthropic")]:
        assert (await _put(user, provider)).status_code == 200
    pool = instance.state.pool
    rotated = Keyring.from_setting(f"{K2},{K1}")
    assert await reencrypt_all(pool, rotated) == (3, 3)
    only_new = Keyring.from_setting(K2)
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, llm_keys_json FROM users ORDER BY id")
    for row in rows:
        for provider, stored in row["llm_keys_json"].items():
            assert stored.startswith("gcm1.k2.")
            assert only_new.decrypt(stored, user_id=row["id"], provider=provider) == SECRET
    assert await reencrypt_all(pool, rotated) == (0, 3)


async def test_rotation_is_all_or_nothing(instance: Instance) -> None:
    alice = await instance.register("alice")
    await _put(alice, "openai")
    await _put(alice, "anthropic")
    pool = instance.state.pool
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT llm_keys_json FROM users")
        corrupted = dict(before, anthropic=before["openai"])  # cross-provider copy
        await conn.execute("UPDATE users SET llm_keys_json = $1", corrupted)
    with pytest.raises(EncryptionKeyError):
        await reencrypt_all(pool, Keyring.from_setting(f"{K2},{K1}"))
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT llm_keys_json FROM users") == corrupted


async def test_startup_refuses_missing_or_wrong_keys(database_url: str) -> None:
    async with run_instance(database_url, encryption_keys=K1) as first:
        alice = await first.register("alice")
        await _put(alice, "openai")
    for keys in (None, "k1:" + K2.split(":", 1)[1]):
        settings = loopback_settings(
            database_url, free_port(), encryption_keys=keys, public_url=first.settings.public_url
        )
        app = create_app(settings)
        with pytest.raises(RuntimeError, match="CONFER_ENCRYPTION_KEYS"):
            async with app.router.lifespan_context(app):
                pass


async def test_one_corrupted_key_is_reported_and_unusable_but_the_instance_starts(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with run_instance(database_url, encryption_keys=K1) as first:
        alice = await first.register("alice")
        bob = await first.register("bob")
        await _put(alice, "openai")
        await _put(alice, "anthropic")
        await _put(bob, "openai")
        async with first.state.pool.acquire() as conn:
            keys = await conn.fetchval(
                "SELECT llm_keys_json FROM users WHERE id = $1", alice.profile["id"]
            )
            damaged = keys["anthropic"][:-4] + (
                "AAAA" if keys["anthropic"][-4:] != "AAAA" else "BBBB"
            )
            await conn.execute(
                "UPDATE users SET llm_keys_json = $2 WHERE id = $1",
                alice.profile["id"],
                dict(keys, anthropic=damaged),
            )
            await conn.execute(
                "UPDATE users SET llm_keys_json = $2 WHERE id = $1",
                bob.profile["id"],
                {"openai": "not an envelope"},
            )
    caplog.set_level("ERROR", logger="gateway.services.llm_keys")
    async with run_instance(database_url, encryption_keys=K1) as second:
        assert (await second.client.get("/healthz")).status_code == 200
        reported = [
            r.getMessage() for r in caplog.records if "cannot be decrypted" in r.getMessage()
        ]
        assert any(alice.profile["id"] in m and "anthropic" in m for m in reported), reported
        assert any(bob.profile["id"] in m and "openai" in m for m in reported), reported
        async with second.state.pool.acquire() as conn:
            audited = await conn.fetch(
                "SELECT user_id, details_json FROM audit_log WHERE action = 'llm_key.unusable'"
            )
        assert {(r["user_id"], r["details_json"]["provider"]) for r in audited} >= {
            (alice.profile["id"], "anthropic"),
            (bob.profile["id"], "openai"),
        }
        pool, ring = second.state.pool, Keyring.from_setting(K1)
        user_id = alice.profile["id"]
        assert await decrypt_llm_key(pool, ring, user_id=user_id, provider="openai") == SECRET
        with pytest.raises(EncryptionKeyError):
            await decrypt_llm_key(pool, ring, user_id=user_id, provider="anthropic")


async def _cli(instance: Instance, *args: str, keys: str) -> subprocess.CompletedProcess[str]:
    env = {
        "CONFER_DATABASE_URL": instance.settings.database_url or "",
        "CONFER_PUBLIC_URL": instance.settings.public_url,
        "CONFER_ENCRYPTION_KEYS": keys,
        "PATH": "/usr/bin:/bin",
    }
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_cli_rotates_and_refuses_without_the_old_key(instance: Instance) -> None:
    alice = await instance.register("alice")
    await _put(alice, "openai")
    refused = await _cli(instance, "rotate-encryption-key", keys=K2)
    assert refused.returncode == 1
    assert "'k1'" in refused.stderr and "not in CONFER_ENCRYPTION_KEYS" in refused.stderr
    done = await _cli(instance, "rotate-encryption-key", keys=f"{K2},{K1}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "re-encrypted 1 of 1 stored keys under 'k2'"
    entry = await _cli(instance, "new-encryption-key", "k3", keys="")
    assert Keyring.from_setting(entry.stdout.strip()).key_ids == ("k3",)
