"""Push subscriptions of device sessions: subscribe, look up, unsubscribe.

A subscription belongs to the device session that registered it (one per session; a new one
replaces it) and ends with it. The endpoint must be an absolute ``https`` URL (``http`` only
with ``allow_http`` — local development), without credentials or fragment, at most 1024
characters, whose host the outbound address policy accepts now (it is checked again, and
pinned, at every push). The keys must be an RFC 8291 P-256 public key (65-byte uncompressed
point on the curve) and a 16-byte authentication secret.
"""

from __future__ import annotations

import binascii
from urllib.parse import urlsplit

import asyncpg
import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import OutboundPolicy
from gateway.errors import PushSubscriptionInvalidError, PushSubscriptionNotFoundError
from gateway.ids import new_id
from gateway.services.push import b64url_decode
from gateway.store import push as push_store
from models.notification_api import PushSubscriptionCreate, PushSubscriptionPublic


def _public(row: push_store.PushSubscriptionRow) -> PushSubscriptionPublic:
    return PushSubscriptionPublic(
        id=row.id, session_id=row.session_id, endpoint=row.endpoint, created_at=row.created_at
    )


def _keys(data: PushSubscriptionCreate) -> tuple[bytes, bytes]:
    try:
        p256dh = b64url_decode(data.keys.p256dh)
        auth = b64url_decode(data.keys.auth)
    except (binascii.Error, ValueError) as exc:
        raise PushSubscriptionInvalidError("keys must be base64url") from exc
    if len(auth) != 16:
        raise PushSubscriptionInvalidError("keys.auth must be 16 bytes (RFC 8291 §3.2)")
    try:
        if len(p256dh) != 65:
            raise ValueError("not 65 bytes")
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), p256dh)
    except ValueError as exc:
        raise PushSubscriptionInvalidError(
            "keys.p256dh must be an uncompressed P-256 point (RFC 8291 §3.1)"
        ) from exc
    return p256dh, auth


async def _check_endpoint(endpoint: str, policy: OutboundPolicy, *, allow_http: bool) -> None:
    parts = urlsplit(endpoint)
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        raise PushSubscriptionInvalidError("endpoint must be an absolute https URL")
    if parts.username is not None or parts.fragment or any(c.isspace() for c in endpoint):
        raise PushSubscriptionInvalidError("endpoint must not carry credentials or a fragment")
    try:
        await policy.checked_addresses(httpx.URL(endpoint))
    except AddressRefusedError as exc:
        raise PushSubscriptionInvalidError(f"endpoint refused: {exc.detail}") from exc
    except (DIDResolutionError, httpx.InvalidURL) as exc:
        raise PushSubscriptionInvalidError(f"endpoint host does not resolve: {exc}") from exc


async def subscribe(
    pool: asyncpg.Pool,
    policy: OutboundPolicy,
    *,
    user_id: str,
    session_id: str,
    data: PushSubscriptionCreate,
    allow_http: bool,
) -> PushSubscriptionPublic:
    """Store ``data`` as the session's subscription (replacing its previous one).

    Raises PushSubscriptionInvalidError (422) for keys or an endpoint Confer cannot use.
    """
    p256dh, auth = _keys(data)
    await _check_endpoint(data.endpoint, policy, allow_http=allow_http)
    async with pool.acquire() as conn, conn.transaction():
        row = await push_store.upsert_subscription(
            conn,
            id=new_id(),
            user_id=user_id,
            session_id=session_id,
            endpoint=data.endpoint,
            p256dh=p256dh,
            auth=auth,
        )
    return _public(row)


async def get_subscription(pool: asyncpg.Pool, *, session_id: str) -> PushSubscriptionPublic:
    """The session's subscription. Raises PushSubscriptionNotFoundError (404)."""
    async with pool.acquire() as conn:
        row = await push_store.get_session_subscription(conn, session_id=session_id)
    if row is None:
        raise PushSubscriptionNotFoundError()
    return _public(row)


async def unsubscribe(pool: asyncpg.Pool, *, session_id: str) -> None:
    """Remove the session's subscription. Raises PushSubscriptionNotFoundError (404)."""
    async with pool.acquire() as conn:
        if not await push_store.delete_session_subscription(conn, session_id=session_id):
            raise PushSubscriptionNotFoundError()
