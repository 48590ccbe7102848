"""Password resets: by an admin, and by the account's owner through an e-mailed token.

- **Self-service** (when SMTP is configured): :meth:`PasswordResets.request` takes a username
  or an e-mail address and always answers the same, whether or not an account matches: both
  paths do one look-up and one per-account rate-limit count, and the mail is sent in the
  background (``Mailer.send_soon``), so SMTP's duration tells nothing (what remains is one
  small insert for a real account).
  Requests are limited per client IP (429) and, silently, per account
  (``rate_limit_reset_account``: further requests send nothing). A token is 256 random bits,
  base64url; only its SHA-256 is stored, it works for ``password_reset_ttl_seconds`` and once.
  :meth:`PasswordResets.confirm` spends it, sets the new password and ends every session.
- **By an admin**: :meth:`PasswordResets.admin_set` sets a new password,
  :meth:`PasswordResets.admin_issue` issues a token for the admin to hand over (and mails it
  when it can); both end every session of the user at once.

Every change ends the user's sessions (so their push subscriptions go too), forgets their
other reset tokens and is audited (``auth.password_reset_requested``, ``auth.password_reset``,
``admin.password_set``, ``admin.password_reset_issued``).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from gateway.clock import Clock
from gateway.errors import (
    NotConfiguredError,
    RateLimitedError,
    ResetTokenInvalidError,
    UserNotFoundError,
)
from gateway.services import usernames
from gateway.services.mail import Mailer
from gateway.services.passwords import Passwords
from gateway.services.ratelimits import RESET_ACCOUNT, RESET_IP, RateLimiter
from gateway.settings import Settings
from gateway.store import audit as audit_store
from gateway.store import password_resets as store
from gateway.store import sessions as sessions_store
from gateway.store import users as users_store
from models import User
from models.notification_api import PasswordResetConfirm, PasswordResetCreate

ACCEPTED = "If an account matches and has an e-mail address, a reset link is on its way."


def hash_token(token: str) -> str:
    """Hex SHA-256 of a reset token (256 random bits, so a fast hash suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


async def replace_password(
    conn: asyncpg.Connection,
    *,
    user_id: str,
    password_hash: str,
    action: str,
    details: dict[str, Any],
    ip: str | None = None,
) -> int:
    """In the caller's transaction: store the new hash, end every session of the user, forget
    their reset tokens, audit ``action``. Returns the sessions ended."""
    await users_store.update_password_hash(conn, id=user_id, password_hash=password_hash)
    revoked = await sessions_store.delete_user_sessions(conn, user_id=user_id)
    await store.delete_user_resets(conn, user_id=user_id)
    await audit_store.insert_audit(
        conn,
        action=action,
        user_id=user_id,
        details={**details, "sessions_revoked": revoked},
        ip_address=ip,
    )
    return revoked


class PasswordResets:
    """Reset tokens and password replacement (module docstring)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        settings: Settings,
        passwords: Passwords,
        limiter: RateLimiter,
        mailer: Mailer,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._settings = settings
        self._passwords = passwords
        self._limiter = limiter
        self._mailer = mailer

    async def _issue(self, conn: asyncpg.Connection, user_id: str) -> tuple[str, datetime]:
        token = secrets.token_urlsafe(32)
        now = self._clock.now()
        expires_at = now + timedelta(seconds=self._settings.password_reset_ttl_seconds)
        await store.insert_reset(
            conn, token_hash=hash_token(token), user_id=user_id, now=now, expires_at=expires_at
        )
        return token, expires_at

    def _mail(self, user: User, token: str) -> None:
        assert user.email is not None
        minutes = self._settings.password_reset_ttl_seconds // 60
        link = f"{self._settings.public_url.rstrip('/')}/?reset_token={token}"
        text = (
            f"Hello {user.username},\n\n"
            "Someone (hopefully you) asked to reset your Confer password.\n"
            f"Open this link within {minutes} minutes to choose a new one:\n\n{link}\n\n"
            f"Or send this token to /v1/auth/password-reset/confirm:\n{token}\n\n"
            "If you did not ask for this, ignore this mail; your password stays as it is.\n"
        )
        self._mailer.send_soon(user.email, "[Confer] Reset your password", text)

    async def request(self, data: PasswordResetCreate, *, ip: str | None) -> str:
        """Mail a reset token to the matching account, if any; returns the one answer.

        Raises NotConfiguredError (503) without SMTP, RateLimitedError (429) per client IP.
        """
        if not self._mailer.configured:
            raise NotConfiguredError("password reset by e-mail needs an SMTP server")
        await self._limiter.hit(RESET_IP, ip or "unknown")
        async with self._pool.acquire() as conn:
            if data.username is not None:
                user = await users_store.get_user_by_username(
                    conn, username=usernames.canonical(data.username)
                )
            else:
                user = await users_store.get_user_by_email(
                    conn, email=(data.email or "").strip().lower()
                )
        key = user.id if user is not None else (data.username or data.email or "").lower()
        try:
            await self._limiter.hit(RESET_ACCOUNT, key)
        except RateLimitedError:
            return ACCEPTED  # silently: a 429 here would tell that the account exists
        if user is None or user.email is None:
            return ACCEPTED
        async with self._pool.acquire() as conn, conn.transaction():
            token, _ = await self._issue(conn, user.id)
            await audit_store.insert_audit(
                conn, action="auth.password_reset_requested", user_id=user.id, ip_address=ip
            )
        self._mail(user, token)
        return ACCEPTED

    async def confirm(self, data: PasswordResetConfirm, *, ip: str | None) -> int:
        """Spend the token and set the new password; returns the sessions ended.

        Raises ResetTokenInvalidError (400: unknown, expired, used), RateLimitedError (429).
        """
        await self._limiter.hit(RESET_IP, ip or "unknown")
        password_hash = await self._passwords.hash(data.new_password)
        async with self._pool.acquire() as conn, conn.transaction():
            user_id = await store.use_reset(
                conn, token_hash=hash_token(data.token), now=self._clock.now()
            )
            if user_id is None:
                raise ResetTokenInvalidError()
            return await replace_password(
                conn,
                user_id=user_id,
                password_hash=password_hash,
                action="auth.password_reset",
                details={"by": "token"},
                ip=ip,
            )

    async def admin_set(self, *, admin_id: str, user_id: str, password: str, ip: str | None) -> int:
        """Set ``user_id``'s password; returns the sessions ended. Raises UserNotFoundError."""
        password_hash = await self._passwords.hash(password)
        async with self._pool.acquire() as conn, conn.transaction():
            user = await users_store.get_user(conn, id=user_id)
            if user is None or user.deleted_at is not None:
                raise UserNotFoundError(f"no user {user_id!r}")
            return await replace_password(
                conn,
                user_id=user_id,
                password_hash=password_hash,
                action="admin.password_set",
                details={"by": "admin", "admin_id": admin_id},
                ip=ip,
            )

    async def admin_issue(
        self, *, admin_id: str, user_id: str, ip: str | None
    ) -> tuple[int, str, datetime]:
        """End the user's sessions and issue a reset token (mailed when possible).

        Returns (sessions ended, token, expiry). Raises UserNotFoundError (404).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            user = await users_store.get_user(conn, id=user_id)
            if user is None or user.deleted_at is not None:
                raise UserNotFoundError(f"no user {user_id!r}")
            revoked = await sessions_store.delete_user_sessions(conn, user_id=user_id)
            token, expires_at = await self._issue(conn, user_id)
            mailed = self._mailer.configured and user.email is not None
            await audit_store.insert_audit(
                conn,
                action="admin.password_reset_issued",
                user_id=user_id,
                details={"admin_id": admin_id, "sessions_revoked": revoked, "mailed": mailed},
                ip_address=ip,
            )
        if mailed:
            self._mail(user, token)
        return revoked, token, expires_at
