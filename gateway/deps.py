"""Typed FastAPI dependencies that read the app's lifespan state (Starlette style)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.errors import AuthenticationError
from gateway.services.accounts import Authenticated
from gateway.services.participants import GroupDeps
from gateway.state import AppState

_bearer = HTTPBearer(auto_error=False, description="An access token from /v1/auth/login.")


async def get_state(request: Request) -> AppState:
    """The app's resources (built by the lifespan). A coroutine, so FastAPI calls it on the
    event loop: a plain function dependency would cost every request a worker-thread hop."""
    state: AppState = request.app.state.confer
    return state


async def get_ws_state(websocket: WebSocket) -> AppState:
    """The app's resources, for WebSocket handlers (a coroutine, as :func:`get_state`)."""
    state: AppState = websocket.app.state.confer
    return state


State = Annotated[AppState, Depends(get_state)]


def group_deps(state: AppState) -> GroupDeps:
    """What group changes use (:class:`gateway.services.participants.GroupDeps`)."""
    return GroupDeps(
        state.pool,
        state.hub,
        state.identity,
        state.peers,
        state.home_link,
        state.settings.max_group_members,
        state.settings.group_backfill_messages,
        requests_default=state.settings.message_requests_default,
    )


async def get_current(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Authenticated:
    """The authenticated caller. Raises AuthenticationError / TokenInvalidError (401).

    It reads the app's resources from ``request`` rather than through :data:`State`: FastAPI
    solves each sub-dependency of each request anew (a cached one too), and nearly every
    request takes this one."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise AuthenticationError("send Authorization: Bearer <access token>")
    state: AppState = request.app.state.confer
    return await state.accounts.authenticate(credentials.credentials)


Current = Annotated[Authenticated, Depends(get_current)]
