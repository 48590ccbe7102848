"""Users' LLM and tool provider API keys, stored AES-256-GCM encrypted in ``users.llm_keys_json``.

Keys are never returned to any client (data model spec, ``LLMKeys``): the API lists providers and
set times only; ``decrypt_llm_key`` is for the agent runtime inside the gateway. Setting or removing
a key is audited (``llm_key.set`` / ``llm_key.removed``) without the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import asyncpg

from gateway.agents.catalog import find_provider
from gateway.clock import Clock
from gateway.errors import EncryptionNotConfiguredError, FieldInvalidError, LLMKeyNotFoundError
from gateway.services.encryption import Keyring, parse_envelope
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from models import User
from models.account_api import LLMKeyList, LLMKeyPublic


def _check_provider(provider: str, extra: Mapping[str, Mapping[str, str]]) -> None:
    entry = find_provider(provider, extra)
    # catalog providers that need a key, and endpoints the operator configured (a proxy or
    # a hosted server may want one; local servers simply get none)
    takes_key = entry is not None and (entry.requires_key or provider in extra)
    if not takes_key:
        raise FieldInvalidError(
            ["path", "provider"],
            f"{provider!r} is not a provider of this instance that takes a key (GET /v1/providers)",
        )


def list_llm_keys(user: User) -> LLMKeyList:
    """The providers the user has a key for and when each was set (from the envelopes)."""
    items = [
        LLMKeyPublic(
            provider=provider,
            set_at=datetime.fromtimestamp(parse_envelope(stored).set_at, tz=UTC),
        )
        for provider, stored in sorted(user.llm_keys.items())
    ]
    return LLMKeyList(items=items)


async def set_llm_key(
    pool: asyncpg.Pool,
    keyring: Keyring,
    clock: Clock,
    *,
    user_id: str,
    provider: str,
    api_key: str,
    ip: str | None,
    extra_providers: Mapping[str, Mapping[str, str]] | None = None,
) -> LLMKeyPublic:
    """Encrypt and store (or replace) the key. Raises FieldInvalidError (422, unknown
    provider), EncryptionNotConfiguredError (503)."""
    _check_provider(provider, extra_providers or {})
    if not keyring.configured:
        raise EncryptionNotConfiguredError()
    set_at = int(clock.time())
    envelope = keyring.encrypt(api_key, user_id=user_id, provider=provider, set_at=set_at)
    async with pool.acquire() as conn, conn.transaction():
        await users_store.set_llm_key(
            conn, id=user_id, provider=provider, envelope=envelope, now=clock.now()
        )
        await audit_store.insert_audit(
            conn,
            action="llm_key.set",
            user_id=user_id,
            details={"provider": provider, "key_id": keyring.current_kid},
            ip_address=ip,
        )
    return LLMKeyPublic(provider=provider, set_at=datetime.fromtimestamp(set_at, tz=UTC))


async def delete_llm_key(
    pool: asyncpg.Pool, clock: Clock, *, user_id: str, provider: str, ip: str | None
) -> None:
    """Remove the key. Raises LLMKeyNotFoundError (404) when there is none."""
    async with pool.acquire() as conn, conn.transaction():
        if not await users_store.delete_llm_key(
            conn, id=user_id, provider=provider, now=clock.now()
        ):
            raise LLMKeyNotFoundError(f"no key stored for {provider!r}")
        await audit_store.insert_audit(
            conn,
            action="llm_key.removed",
            user_id=user_id,
            details={"provider": provider},
            ip_address=ip,
        )


async def decrypt_llm_key(
    pool: asyncpg.Pool, keyring: Keyring, *, user_id: str, provider: str
) -> str | None:
    """The plaintext key for the agent runtime, or None when the user has none.

    Raises EncryptionKeyError / EncryptionNotConfiguredError — never returns garbage.
    """
    async with pool.acquire() as conn:
        user = await users_store.get_user(conn, id=user_id)
    stored = user.llm_keys.get(provider) if user else None
    if stored is None:
        return None
    return keyring.decrypt(stored, user_id=user_id, provider=provider)


async def reencrypt_all(pool: asyncpg.Pool, keyring: Keyring) -> tuple[int, int]:
    """Re-encrypt every stored key not under the current key, in one transaction.

    Returns ``(re-encrypted, total)``. Any key that fails to decrypt aborts the whole
    transaction with EncryptionKeyError: nothing is half-rotated.
    """
    if not keyring.configured:
        raise EncryptionNotConfiguredError()
    changed = total = 0
    async with pool.acquire() as conn, conn.transaction():
        for user_id, keys in await users_store.list_all_llm_keys(conn):
            updated = dict(keys)
            for provider, stored in keys.items():
                total += 1
                envelope = parse_envelope(stored)
                plaintext = keyring.decrypt(stored, user_id=user_id, provider=provider)
                if envelope.kid == keyring.current_kid:
                    continue
                updated[provider] = keyring.encrypt(
                    plaintext, user_id=user_id, provider=provider, set_at=envelope.set_at
                )
                changed += 1
            if updated != keys:
                await users_store.replace_llm_keys(conn, id=user_id, keys=updated)
        await audit_store.insert_audit(
            conn,
            action="llm_key.reencrypted",
            details={"reencrypted": changed, "total": total, "key_id": keyring.current_kid},
        )
    return changed, total


async def check_stored_keys(pool: asyncpg.Pool, keyring: Keyring) -> None:
    """Startup check: every key id in use is configured and decrypts one sample.

    Raises RuntimeError with an operator-facing message otherwise (missing or wrong key).
    """
    async with pool.acquire() as conn:
        samples = await users_store.list_llm_key_samples(conn)
    for row in samples:
        if not keyring.configured:
            raise RuntimeError(
                "stored LLM keys are encrypted but CONFER_ENCRYPTION_KEYS is not set"
            )
        try:
            keyring.decrypt(row["value"], user_id=row["id"], provider=row["provider"])
        except Exception as exc:
            raise RuntimeError(f"CONFER_ENCRYPTION_KEYS cannot decrypt stored data: {exc}") from exc
