"""The admin API (OpenAPI tag ``admin``): users, sessions, audit log, statistics, and the
federation outbox with its destinations.

Every route requires an admin's access token (403 ``admin_required`` otherwise).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request

from gateway.deps import Current, State
from gateway.errors import AdminRequiredError
from gateway.federation_auth import client_ip
from gateway.routes import problems
from gateway.routes.params import Id, id_query
from gateway.services import admin
from gateway.services.accounts import Authenticated
from gateway.store import accounts as accounts_store
from models.admin_api import (
    AdminSessionList,
    AdminUserPage,
    AdminUserPublic,
    AuditPage,
    DestinationList,
    DestinationPublic,
    DisableCreate,
    InstanceStats,
    OutboxPage,
    PeerRefetch,
    PeerRefetched,
)
from models.base import DIGITS_ONLY, TRUE_OR_FALSE
from models.notification_api import AdminPasswordReset, AdminPasswordSet


async def require_admin(current: Current, state: State) -> Authenticated:
    """The caller, if an admin. Raises AdminRequiredError (403)."""
    async with state.pool.acquire() as conn:
        if not await accounts_store.is_admin(conn, user_id=current.user.id):
            raise AdminRequiredError()
    return current


Admin = Annotated[Authenticated, Depends(require_admin)]
Limit = Annotated[int, Query(ge=1, le=500, description="Page size."), DIGITS_ONLY]
Before = Annotated[str | None, id_query("Cursor: ids below this one")]

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=problems(401, 403, 422))


@router.get("/users", summary="List and search users")
async def list_users(
    _: Admin,
    state: State,
    q: Annotated[
        str | None,
        Query(max_length=128, description="Substring of username, display name or email."),
    ] = None,
    before: Before = None,
    limit: Limit = 50,
) -> AdminUserPage:
    """Users newest first (deleted ones included), with admin and disabled state."""
    return await admin.search_users(state.pool, query=q, before=before, limit=limit)


@router.get("/users/{user_id}", summary="One user", responses=problems(404))
async def get_user(user_id: Id, _: Admin, state: State) -> AdminUserPublic:
    """A user's account state."""
    return await admin.get_user(state.pool, user_id=user_id)


@router.post("/users/{user_id}/disable", summary="Disable a user", responses=problems(404, 409))
async def disable_user(
    user_id: Id, data: DisableCreate, current: Admin, request: Request, state: State
) -> AdminUserPublic:
    """Disable the account: every session is revoked and login is refused (403)."""
    return await admin.set_disabled(
        state.pool,
        state.clock,
        admin_id=current.user.id,
        user_id=user_id,
        disabled=True,
        reason=data.reason,
        ip=client_ip(request),
    )


@router.post("/users/{user_id}/enable", summary="Re-enable a user", responses=problems(404))
async def enable_user(
    user_id: Id, current: Admin, request: Request, state: State
) -> AdminUserPublic:
    """Allow the account to log in again."""
    return await admin.set_disabled(
        state.pool,
        state.clock,
        admin_id=current.user.id,
        user_id=user_id,
        disabled=False,
        reason=None,
        ip=client_ip(request),
    )


@router.put("/users/{user_id}/password", summary="Set a user's password", responses=problems(404))
async def set_password(
    user_id: Id, data: AdminPasswordSet, current: Admin, request: Request, state: State
) -> AdminPasswordReset:
    """Replace the user's password; every session of theirs ends at once (audited
    `admin.password_set`)."""
    assert state.password_resets is not None  # built by the lifespan
    revoked = await state.password_resets.admin_set(
        admin_id=current.user.id, user_id=user_id, password=data.password, ip=client_ip(request)
    )
    return AdminPasswordReset(sessions_revoked=revoked)


@router.post(
    "/users/{user_id}/password-reset",
    summary="Reset a user's password",
    responses=problems(404),
)
async def reset_password(
    user_id: Id, current: Admin, request: Request, state: State
) -> AdminPasswordReset:
    """End every session of the user and issue a one-time reset token (returned, and mailed
    to the user when SMTP is set and the account has an address); the user sets a new password
    with `POST /v1/auth/password-reset/confirm`. Audited `admin.password_reset_issued`."""
    assert state.password_resets is not None  # built by the lifespan
    revoked, token, expires_at = await state.password_resets.admin_issue(
        admin_id=current.user.id, user_id=user_id, ip=client_ip(request)
    )
    return AdminPasswordReset(sessions_revoked=revoked, reset_token=token, expires_at=expires_at)


@router.get("/sessions", summary="List live sessions")
async def list_sessions(
    _: Admin,
    state: State,
    user_id: Annotated[str | None, id_query("Only this user's")] = None,
) -> AdminSessionList:
    """Live device sessions of everyone, or of one user (at most 500, newest first)."""
    return await admin.list_sessions(state.pool, state.clock, user_id=user_id)


@router.get("/audit", summary="Read the audit log")
async def read_audit(
    _: Admin,
    state: State,
    user_id: Annotated[str | None, id_query("Only this user's")] = None,
    action: Annotated[
        str | None, Query(max_length=64, description="Exact action, or a prefix ending in *.")
    ] = None,
    since: Annotated[datetime | None, Query(description="From this time (inclusive).")] = None,
    until: Annotated[datetime | None, Query(description="Up to this time (exclusive).")] = None,
    before: Before = None,
    limit: Limit = 100,
) -> AuditPage:
    """Audit rows newest first, filtered by user, action and time range."""
    return await admin.read_audit(
        state.pool,
        user_id=user_id,
        action=action,
        since=since,
        until=until,
        before=before,
        limit=limit,
    )


@router.get("/stats", summary="Instance statistics")
async def stats(_: Admin, state: State) -> InstanceStats:
    """Counts of users, sessions, agents, conversations, messages, peers, audit events."""
    return await admin.instance_stats(state.pool, state.clock)


Destination = Annotated[str, Path(max_length=255, description="The peer's host[:port].")]


@router.get("/federation/outbox", summary="List the federation outbox")
async def list_outbox(
    _: Admin,
    state: State,
    status: Annotated[
        Literal["pending", "delivered", "failed"] | None,
        Query(description="pending (queued or retrying), delivered or failed."),
    ] = None,
    destination: Annotated[str | None, Query(max_length=255)] = None,
    before: Before = None,
    limit: Limit = 100,
) -> OutboxPage:
    """Outbound deliveries newest first, with their state, attempts and last error."""
    return await admin.list_outbox(
        state.pool,
        state=status,
        destination=destination.lower() if destination else None,
        before=before,
        limit=limit,
    )


@router.get("/federation/destinations", summary="List delivery destinations")
async def list_destinations(
    _: Admin,
    state: State,
    parked: Annotated[
        bool | None,
        Query(description="true: parked ones only; false: the others."),
        TRUE_OR_FALSE,
    ] = None,
) -> DestinationList:
    """Peer instances the outbox delivers to: failures, parked state, pending count."""
    return await admin.list_destinations(state.pool, parked=parked)


@router.post(
    "/federation/peers/refetch",
    summary="Refetch a peer's DID document",
    responses=problems(404, 422),
)
async def refetch_peer(
    data: PeerRefetch, current: Admin, request: Request, state: State
) -> PeerRefetched:
    """Fetch the known peer's DID document again now (a rotated key or moved endpoint is taken
    at once); the DID goes in the body, since DIDs hold ``:`` and ``%``."""
    return await admin.refetch_peer(
        state.pool, state.peers, admin_id=current.user.id, did=data.did, ip=client_ip(request)
    )


@router.post(
    "/federation/destinations/{destination}/retry",
    summary="Retry a destination now",
    responses=problems(404),
)
async def retry_destination(
    destination: Destination, current: Admin, request: Request, state: State
) -> DestinationPublic:
    """Unpark the destination and send its pending deliveries now (failed ones stay failed)."""
    return await admin.retry_destination(
        state.pool,
        state.clock,
        admin_id=current.user.id,
        destination=destination,
        ip=client_ip(request),
    )
