"""Accounts: register, log in, refresh, log out, and who am I."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from gateway.deps import Current, State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from models.account_api import RefreshCreate
from models.api import LoginCreate, RegisterCreate, TokenPublic, UserPublic

router = APIRouter(tags=["accounts"])

_AUTH_ERRORS = problems(401)


@router.post(
    "/v1/auth/register",
    status_code=201,
    summary="Create an account",
    responses=problems(400, 409, 413, 422, 429, s409="The username (or a look-alike) is taken"),
)
async def register(data: RegisterCreate, request: Request, state: State) -> TokenPublic:
    """Create a user with its DID and main agent, and return a first token pair.

    Usernames: lower-case ASCII `a-z 0-9 . _ -`, 2–64 characters; a look-alike of an existing
    name (full-width, mixed scripts, `1`/`l`, `rn`/`m`) is 409 `username_taken`; invisible or
    bidi characters are 422. Rate limited per client IP (429).
    """
    return await state.accounts.register(data, ip=client_ip(request))


@router.post("/v1/auth/login", summary="Log in", responses=problems(400, 401, 403, 422, 429))
async def login(data: LoginCreate, request: Request, state: State) -> TokenPublic:
    """Exchange username and password for an access + refresh token pair (one session per
    `device_id`). Unknown user, deleted user and wrong password are the same 401. Rate limited
    per client IP and per account (429)."""
    return await state.accounts.login(data, ip=client_ip(request))


@router.post("/v1/auth/refresh", summary="Rotate a refresh token", responses=problems(401, 422))
async def refresh(data: RefreshCreate, request: Request, state: State) -> TokenPublic:
    """Trade a refresh token for a new pair; the presented one stops working. Presenting a
    refresh token a second time revokes its whole session (theft detection)."""
    return await state.accounts.refresh(data.refresh_token, ip=client_ip(request))


@router.post("/v1/auth/logout", status_code=204, summary="Log out", responses=problems(401))
async def logout(current: Current, request: Request, state: State) -> Response:
    """End this device's session; its access and refresh tokens stop working at once."""
    await state.accounts.logout(current, ip=client_ip(request))
    return Response(status_code=204)


@router.get("/v1/me", summary="The current user", responses=problems(401))
async def me(current: Current, state: State) -> UserPublic:
    """The authenticated user: profile, preferences, DID and its main agent's DID."""
    async with state.pool.acquire() as conn:
        return await state.accounts.public(conn, current.user)
