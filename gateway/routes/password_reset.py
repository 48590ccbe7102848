"""Self-service password reset by e-mail (when the instance has an SMTP server)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from gateway.deps import State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from models.account_api import SessionsRevoked
from models.notification_api import (
    PasswordResetAccepted,
    PasswordResetConfirm,
    PasswordResetCreate,
)

router = APIRouter(tags=["accounts"])


@router.post(
    "/v1/auth/password-reset",
    status_code=202,
    summary="Ask for a password-reset e-mail",
    responses=problems(422, 429, 503),
)
async def request_reset(
    data: PasswordResetCreate, request: Request, state: State
) -> PasswordResetAccepted:
    """Mail a one-time reset token to the account with this username or e-mail address.

    The answer is the same whether or not such an account exists. Rate limited per client IP
    (429) and per account (silently). 503 `not_configured` without SMTP.
    """
    assert state.password_resets is not None  # built by the lifespan
    detail = await state.password_resets.request(data, ip=client_ip(request))
    return PasswordResetAccepted(detail=detail)


@router.post(
    "/v1/auth/password-reset/confirm",
    summary="Set a new password with a reset token",
    responses=problems(400, 422, 429),
)
async def confirm_reset(
    data: PasswordResetConfirm, request: Request, state: State
) -> SessionsRevoked:
    """Spend the token (once, before it expires) and set the new password; every session of
    the account ends. 400 `reset_token_invalid` for an unknown, used or expired token."""
    assert state.password_resets is not None  # built by the lifespan
    revoked = await state.password_resets.confirm(data, ip=client_ip(request))
    return SessionsRevoked(revoked=revoked)
