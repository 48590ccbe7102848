"""Users' LLM and tool provider API keys, stored AES-256-GCM encrypted in ``users.llm_keys_json``.

Keys are never returned to any client (data model spec, ``LLMKeys``): the API lists providers and
set times only; ``decrypt_llm_key`` is for the agent runtime inside the gateway. Setting or removing
a key is audited (``llm_key.set`` / ``llm_key.removed``) without the key.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from gateway.agents.catalog import find_provider
from gateway.clock import Clock
from gateway.db import transaction
from gateway.errors import (
    EncryptionKeyError,
    EncryptionNotConfiguredError,
    FieldInvalidError,
    LLMKeyNotFoundError,
)
from gateway.services.encryption import Keyring, parse_envelope
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from models import User
from models.account_api import LLMKeyList, LLMKeyPublic

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class UnusableKey:
    """A stored key that cannot be decrypted: whose, for which provider, and why."""

    user_id: str
    provider: str
    reason: str


async def check_stored_keys(pool: asyncpg.Pool, keyring: Keyring) -> list[UnusableKey]:
    """Startup check: decrypt every stored key; report those that cannot be used.

    A key that does not decrypt (a corrupted row, a ciphertext copied from another user or
    provider) is logged with its user and provider, audited (``llm_key.unusable``) and returned;
    it stays unusable — the agent runtime's lookup refuses it with ``key_unavailable`` — until
    its owner sets it again, and the instance starts. What cannot be one bad row stops start-up
    with RuntimeError (an operator-facing message): keys stored but ``CONFER_ENCRYPTION_KEYS``
    unset, or an encryption key id in use under which no stored key decrypts (the key is
    missing or wrong; with a single key stored, a corrupted one looks the same).
    """
    async with pool.acquire() as conn:
        rows = await users_store.list_stored_llm_keys(conn)
    if rows and not keyring.configured:
        raise RuntimeError("stored LLM keys are encrypted but CONFER_ENCRYPTION_KEYS is not set")
    unusable: list[UnusableKey] = []
    decrypted: dict[str, int] = {}  # key id -> keys it decrypted
    failed: dict[str, list[UnusableKey]] = {}  # key id -> keys it did not
    for row in rows:
        try:
            kid = parse_envelope(row["value"]).kid
        except EncryptionKeyError as exc:  # not an envelope at all: a damaged row
            unusable.append(UnusableKey(row["id"], row["provider"], exc.detail))
            continue
        try:
            keyring.decrypt(row["value"], user_id=row["id"], provider=row["provider"])
        except EncryptionKeyError as exc:
            failed.setdefault(kid, []).append(UnusableKey(row["id"], row["provider"], exc.detail))
            continue
        decrypted[kid] = decrypted.get(kid, 0) + 1
    for kid, bad in failed.items():
        if not decrypted.get(kid):
            which = ", ".join(f"user {k.user_id} ({k.provider})" for k in bad[:5])
            raise RuntimeError(
                f"CONFER_ENCRYPTION_KEYS cannot decrypt any stored data under key {kid!r} "
                f"({len(bad)} keys: {which}{', …' if len(bad) > 5 else ''}): {bad[0].reason}"
            )
        unusable.extend(bad)
    if unusable:
        async with transaction(pool) as tx:
            for key in unusable:
                log.error(
                    "stored LLM key of user %s for provider %s cannot be decrypted (%s); it is "
                    "unusable until the user sets it again",
                    key.user_id,
                    key.provider,
                    key.reason,
                )
                await audit_store.insert_audit(
                    tx.conn,
                    action="llm_key.unusable",
                    user_id=key.user_id,
                    details={"provider": key.provider, "reason": key.reason},
                )
    return unusable
