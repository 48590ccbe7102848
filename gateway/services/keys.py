"""Instance key rotation: add a new federation key, keep the old one verifying until removed.

``rotate`` retires the active key (it stops signing but stays in every DID document, so
signatures made just before still verify and peers that cached the old document keep working)
and creates ``key-<n+1>``, which signs from the next start of each gateway process. ``remove``
unlists a retired key: peers refetching the document stop accepting it (RFC 9421 keys are
looked up by ``keyid`` in the did:web document).
"""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gateway.errors import NotFoundError
from gateway.ids import new_id
from gateway.services.identity import FEDERATION
from gateway.store import audit as audit_store
from gateway.store import keys as store


async def list_keys(pool: asyncpg.Pool) -> list[store.InstanceKeyRow]:
    """Federation keys still listed, oldest first."""
    async with pool.acquire() as conn:
        return await store.list_keys(conn, purpose=FEDERATION)


async def rotate(pool: asyncpg.Pool) -> str:
    """Retire the active federation key and create a new one; returns its fragment."""
    now = datetime.now(UTC)
    async with pool.acquire() as conn, conn.transaction():
        await store.lock_keys(conn)
        fragment = f"key-{await store.count_fragments(conn, purpose=FEDERATION) + 1}"
        await store.retire_active_key(conn, purpose=FEDERATION, now=now)
        await store.insert_key(
            conn,
            id=new_id(),
            purpose=FEDERATION,
            fragment=fragment,
            private_key=Ed25519PrivateKey.generate().private_bytes_raw(),
        )
        await audit_store.insert_audit(
            conn, action="instance_key.rotated", details={"active": fragment}
        )
    return fragment


async def remove(pool: asyncpg.Pool, fragment: str) -> None:
    """Unlist a retired key. Raises NotFoundError when no retired key has that fragment."""
    async with pool.acquire() as conn, conn.transaction():
        if not await store.remove_key(
            conn, purpose=FEDERATION, fragment=fragment, now=datetime.now(UTC)
        ):
            raise NotFoundError(f"no retired federation key {fragment!r}")
        await audit_store.insert_audit(
            conn, action="instance_key.removed", details={"fragment": fragment}
        )
