"""Accounts: register, log in, log out, and who am I."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from gateway.deps import Current, State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from models.api import LoginCreate, RegisterCreate, TokenPublic, UserPublic

router = APIRouter(tags=["accounts"])

_AUTH_ERRORS = problems(401)


@router.post(
    "/v1/auth/register",
    status_code=201,
    summary="Create an account",
    responses=problems(400, 409, 413, 422, s409="The username is taken"),
)
async def register(data: RegisterCreate, request: Request, state: State) -> TokenPublic:
    """Create a user with its DID and main agent, and return a first access token."""
    return await state.accounts.register(data, ip=client_ip(request))


@router.post("/v1/auth/login", summary="Log in", responses=problems(400, 401, 422))
async def login(data: LoginCreate, request: Request, state: State) -> TokenPublic:
    """Exchange username and password for an access token (one session per device)."""
    return await state.accounts.login(data, ip=client_ip(request))


@router.post("/v1/auth/logout", status_code=204, summary="Log out", responses=_AUTH_ERRORS)
async def logout(current: Current, request: Request, state: State) -> Response:
    """End this device's session; its access tokens stop working at once."""
    await state.accounts.logout(current, ip=client_ip(request))
    return Response(status_code=204)


@router.get("/v1/me", summary="The current user", responses=_AUTH_ERRORS)
async def me(current: Current, state: State) -> UserPublic:
    """The authenticated user, with its DID and its main agent's DID."""
    async with state.pool.acquire() as conn:
        return await state.accounts.public(conn, current.user)
