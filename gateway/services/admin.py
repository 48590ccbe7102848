"""The admin API's operations: users, sessions, the audit log, instance statistics, and the
federation outbox (deliveries, destinations, "retry now").

Every state change is audited with the acting admin's id and client IP (``admin.*``).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from did.errors import DIDError
from gateway.clock import Clock
from gateway.errors import (
    ConflictError,
    DestinationNotFoundError,
    PeerNotFoundError,
    UserNotFoundError,
)
from gateway.services.deliveries import delivery_public
from gateway.services.peers import PeerDirectory
from gateway.store import accounts as accounts_store
from gateway.store import admin as admin_store
from gateway.store import audit as audit_store
from gateway.store import federation as federation_store
from gateway.store import peers as peers_store
from gateway.store import sessions as sessions_store
from models.admin_api import (
    AdminSessionList,
    AdminSessionPublic,
    AdminUserPage,
    AdminUserPublic,
    AuditEntryPublic,
    AuditPage,
    DestinationList,
    DestinationPublic,
    InstanceStats,
    OutboxEntryPublic,
    OutboxPage,
    PeerRefetched,
)


async def search_users(
    pool: asyncpg.Pool, *, query: str | None, before: str | None, limit: int
) -> AdminUserPage:
    """A page of users matching ``query`` (see ``store.admin.list_users``)."""
    async with pool.acquire() as conn:
        rows = await admin_store.list_users(conn, query=query, before=before, limit=limit)
    items = [AdminUserPublic.model_validate(dict(r)) for r in rows]
    return AdminUserPage(items=items, next_before=items[-1].id if len(items) == limit else None)


async def get_user(pool: asyncpg.Pool, *, user_id: str) -> AdminUserPublic:
    """One user. Raises UserNotFoundError (404)."""
    async with pool.acquire() as conn:
        row = await admin_store.get_user_row(conn, id=user_id)
    if row is None:
        raise UserNotFoundError(f"no user {user_id!r}")
    return AdminUserPublic.model_validate(dict(row))


async def set_disabled(
    pool: asyncpg.Pool,
    clock: Clock,
    *,
    admin_id: str,
    user_id: str,
    disabled: bool,
    reason: str | None,
    ip: str | None,
) -> AdminUserPublic:
    """Disable (revoking every session) or re-enable a user; idempotent.

    Raises UserNotFoundError (404), ConflictError (409) when an admin disables themself.
    """
    if disabled and user_id == admin_id:
        raise ConflictError("an admin cannot disable their own account")
    async with pool.acquire() as conn, conn.transaction():
        if await admin_store.get_user_row(conn, id=user_id) is None:
            raise UserNotFoundError(f"no user {user_id!r}")
        details: dict[str, object] = {"admin_id": admin_id}
        if disabled:
            await accounts_store.insert_disabled(
                conn, user_id=user_id, reason=reason, disabled_by=admin_id, now=clock.now()
            )
            details["reason"] = reason
            details["sessions_revoked"] = await sessions_store.delete_user_sessions(
                conn, user_id=user_id
            )
        else:
            await accounts_store.delete_disabled(conn, user_id=user_id)
        action = "admin.user_disabled" if disabled else "admin.user_enabled"
        await audit_store.insert_audit(
            conn, action=action, user_id=user_id, details=details, ip_address=ip
        )
    return await get_user(pool, user_id=user_id)


async def list_sessions(
    pool: asyncpg.Pool, clock: Clock, *, user_id: str | None
) -> AdminSessionList:
    """Live sessions of everyone or of one user, newest first (at most 500)."""
    async with pool.acquire() as conn:
        rows = await sessions_store.list_live_sessions(conn, user_id=user_id, now=clock.now())
    return AdminSessionList(
        items=[
            AdminSessionPublic.model_validate(r.model_dump(exclude={"refresh_token_hash"}))
            for r in rows
        ]
    )


async def read_audit(
    pool: asyncpg.Pool,
    *,
    user_id: str | None,
    action: str | None,
    since: datetime | None,
    until: datetime | None,
    before: str | None,
    limit: int,
) -> AuditPage:
    """A page of the audit log with filters (``store.admin.list_audit``)."""
    async with pool.acquire() as conn:
        rows = await admin_store.list_audit(
            conn,
            user_id=user_id,
            action=action,
            since=since,
            until=until,
            before=before,
            limit=limit,
        )
    items = [
        AuditEntryPublic(
            id=r["id"],
            user_id=r["user_id"],
            action=r["action"],
            details=r["details_json"],
            ip_address=r["ip_address"],
            created_at=r["created_at"],
        )
        for r in rows
    ]
    return AuditPage(items=items, next_before=items[-1].id if len(items) == limit else None)


async def instance_stats(pool: asyncpg.Pool, clock: Clock) -> InstanceStats:
    """Counts of users, sessions, agents, conversations, messages, peers and audit events."""
    async with pool.acquire() as conn:
        return InstanceStats(**await admin_store.instance_counts(conn, now=clock.now()))


async def list_outbox(
    pool: asyncpg.Pool,
    *,
    state: str | None,
    destination: str | None,
    before: str | None,
    limit: int,
) -> OutboxPage:
    """A page of the outbox, newest first, by ``state`` (``pending | delivered | failed``)
    and ``destination`` (``store.federation.list_outbox``)."""
    async with pool.acquire() as conn:
        rows = await federation_store.list_outbox(
            conn, state=state, destination=destination, before=before, limit=limit
        )
    items = [
        OutboxEntryPublic(
            **delivery_public(r).model_dump(),
            endpoint=r["endpoint"],
            leased_until=r["leased_until"],
            original=r["original"],
        )
        for r in rows
    ]
    return OutboxPage(items=items, next_before=items[-1].id if len(items) == limit else None)


async def list_destinations(pool: asyncpg.Pool, *, parked: bool | None) -> DestinationList:
    """Destinations with their health and pending count; ``parked`` filters."""
    async with pool.acquire() as conn:
        rows = await federation_store.list_destinations(conn, parked=parked)
    return DestinationList(items=[DestinationPublic.model_validate(dict(r)) for r in rows])


async def refetch_peer(
    pool: asyncpg.Pool, peers: PeerDirectory, *, admin_id: str, did: str, ip: str | None
) -> PeerRefetched:
    """ "Refetch this peer's DID document": fetch it again now (revalidated with its ETag; a
    rotated key or a moved endpoint is taken at once), audited as ``admin.peer_refetch``.

    Raises PeerNotFoundError (404) for a DID no peer has; the ``did`` library's errors
    (unreachable, invalid document: 422 problems) when the fetch fails, after the
    audit row.
    """
    async with pool.acquire() as conn:
        known = await peers_store.get_peer_by_did(conn, did=did)
    if known is None:
        raise PeerNotFoundError(f"no peer {did!r}")
    outcome = "fetched"
    try:
        peer = await peers.resolve(did, force=True)
    except DIDError as exc:
        outcome = f"failed: {exc.code}"
        raise
    finally:
        async with pool.acquire() as conn:
            await audit_store.insert_audit(
                conn,
                action="admin.peer_refetch",
                details={"admin_id": admin_id, "did": did, "outcome": outcome},
                ip_address=ip,
            )
    keys = peer.public_key_json if isinstance(peer.public_key_json, dict) else {}
    entries = keys.get("authentication")
    ids = [e["id"] for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    return PeerRefetched(
        did=peer.did,
        endpoint=peer.endpoint,
        key_ids=sorted(str(i) for i in ids),
        etag=peer.etag,
        fetched_at=peer.fetched_at,
        not_modified=peer.etag is not None and peer.etag == known.etag,
    )


async def retry_destination(
    pool: asyncpg.Pool, clock: Clock, *, admin_id: str, destination: str, ip: str | None
) -> DestinationPublic:
    """ "Retry now": unpark ``destination`` and make its pending deliveries due at once (the
    workers are woken); audited as ``admin.destination_retry``. Deliveries given up on stay
    failed. Raises DestinationNotFoundError (404) for a destination the outbox never had."""
    destination = destination.lower()
    async with pool.acquire() as conn, conn.transaction():
        pending = await federation_store.retry_destination_now(
            conn, destination=destination, now=clock.now()
        )
        if pending is None:
            raise DestinationNotFoundError(f"no deliveries to {destination!r}")
        await audit_store.insert_audit(
            conn,
            action="admin.destination_retry",
            details={"admin_id": admin_id, "destination": destination, "pending": pending},
            ip_address=ip,
        )
        rows = await federation_store.list_destinations(conn, parked=None)
    found = next((r for r in rows if r["destination"] == destination), None)
    return DestinationPublic.model_validate(
        dict(found) if found else {"destination": destination, "pending": pending}
    )
