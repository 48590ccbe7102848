"""Web Push for browsers: the VAPID public key and this device session's subscription.

A browser subscribes with ``pushManager.subscribe({applicationServerKey: <public_key>})`` and
posts the resulting ``PushSubscription.toJSON()`` here; the subscription belongs to the
session of the access token and ends with it (docs/notifications.md).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from gateway.deps import Current, State
from gateway.errors import NotConfiguredError
from gateway.routes import problems
from gateway.services import push_subscriptions
from models.notification_api import (
    PushSubscriptionCreate,
    PushSubscriptionPublic,
    VapidKeyPublic,
)

router = APIRouter(tags=["accounts"])


@router.get("/v1/push/vapid-public-key", summary="The VAPID public key")
async def vapid_public_key(state: State) -> VapidKeyPublic:
    """The instance's VAPID public key (RFC 8292 §3.2), for `applicationServerKey`."""
    assert state.vapid is not None  # loaded by the lifespan
    return VapidKeyPublic(public_key=state.vapid.public_key, enabled=state.settings.web_push)


@router.post(
    "/v1/push/subscriptions",
    status_code=201,
    summary="Subscribe this device to push",
    responses=problems(401, 422, 503),
)
async def subscribe(
    data: PushSubscriptionCreate, current: Current, state: State
) -> PushSubscriptionPublic:
    """Store the browser's push subscription for this device session (replacing the one it
    had). The endpoint must be https and pass the outbound address policy; the keys must be
    RFC 8291 keys (422 `push_subscription_invalid` otherwise). 503 when Web Push is off."""
    if not state.settings.web_push or state.outbound_policy is None:
        raise NotConfiguredError("Web Push is turned off on this instance")
    return await push_subscriptions.subscribe(
        state.pool,
        state.outbound_policy,
        user_id=current.user.id,
        session_id=current.session_id,
        data=data,
        allow_http=state.settings.allow_http_dids,
    )


@router.get(
    "/v1/push/subscriptions/current",
    summary="This device's push subscription",
    responses=problems(401, 404),
)
async def current_subscription(current: Current, state: State) -> PushSubscriptionPublic:
    """The subscription of this device session (404 when it has none)."""
    return await push_subscriptions.get_subscription(state.pool, session_id=current.session_id)


@router.delete(
    "/v1/push/subscriptions",
    status_code=204,
    summary="Unsubscribe this device",
    responses=problems(401, 404),
)
async def unsubscribe(current: Current, state: State) -> Response:
    """Remove this device session's subscription (logging out removes it too)."""
    await push_subscriptions.unsubscribe(state.pool, session_id=current.session_id)
    return Response(status_code=204)
