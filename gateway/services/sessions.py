"""Device sessions: access + refresh token pairs, rotation, reuse detection, revocation.

A session row (data model ``sessions``) is one device's login chain. Its refresh token is
``<session id>.<43 base64url chars>`` (256 random bits); only its SHA-256 is stored. Refreshing
rotates it with a compare-and-set on the hash, so of two simultaneous refreshes at most one gets
a new pair. A refresh token that was already rotated away is remembered
(``used_refresh_tokens``); presenting it again is treated as theft (OAuth 2.0 Security BCP,
RFC 9700 §4.14.2): the whole session is revoked and audited — except within
``refresh_grace_seconds`` of its rotation while its successor is still the session's current
token (two tabs refreshing at once): then the same successor pair is returned again. The
successor is derived from the presented token (HMAC-SHA256 keyed from the instance's token
key), so it can be re-issued without being stored; there is never more than one valid pair.
Access tokens are JWTs tied to the session (``gateway.services.tokens``), so revocation ends
them at once.

An OAuth sign-in (``gateway.services.oauth``) is a session too, with an ``oauth_grants`` row:
its tokens are resource tokens for the grant's resource (``audience``), refreshed only at the
token endpoint; a device session's refresh token is refused there, and a grant's here.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from gateway.clock import Clock
from gateway.errors import RefreshTokenInvalidError, SessionNotFoundError
from gateway.ids import is_ulid, new_id
from gateway.services.identity import Identity
from gateway.services.session_cache import SessionCache
from gateway.services.tokens import issue_access_token
from gateway.settings import Settings
from gateway.store import accounts as accounts_store
from gateway.store import audit as audit_store
from gateway.store import oauth as oauth_store
from gateway.store import sessions as sessions_store
from gateway.store import users as users_store
from models import SessionRow
from models.account_api import SessionList, SessionPublic


@dataclass(frozen=True)
class TokenPair:
    """A fresh access token (JWT, ``expires_in`` s) and refresh token for ``session_id``."""

    access_token: str
    expires_in: int
    refresh_token: str
    refresh_expires_in: int
    session_id: str
    user_id: str


def hash_refresh_token(token: str) -> str:
    """Hex SHA-256 of a refresh token (256-bit random, so a fast hash suffices)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _session_id_of(token: str) -> str:
    session_id, sep, secret = token.partition(".")
    if not sep or not is_ulid(session_id) or len(secret) < 40:
        raise RefreshTokenInvalidError("malformed refresh token")
    return session_id


class DeviceSessions:
    """Opens, refreshes, lists and revokes device sessions."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        identity: Identity,
        clock: Clock,
        settings: Settings,
        cache: SessionCache | None = None,
    ) -> None:
        self._pool = pool
        self._identity = identity
        self._clock = clock
        self._settings = settings
        self._cache = cache or SessionCache(0)

    def _derive(self, purpose: bytes, seed: str, size: int) -> str:
        """``size`` bytes (base64url) of HMAC-SHA256 over ``seed``, keyed from the token key."""
        raw = self._identity.token_key.private_key.private_bytes_raw()
        key = hashlib.sha256(b"confer refresh successor\0" + raw).digest()
        digest = hmac.new(key, purpose + b"\0" + seed.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:size]).rstrip(b"=").decode()

    def _new_tokens(
        self, session_id: str, user_id: str, seed: str, issued_at: int, audience: str | None
    ) -> TokenPair:
        """The pair that succeeds ``seed`` (a fresh random value, or the rotated token); with
        ``audience``, the access token is a resource token for it."""
        ttl = self._settings.access_token_ttl_seconds
        if audience is not None:
            ttl = self._settings.oauth_access_token_ttl_seconds
        access = issue_access_token(
            self._identity,
            user_id=user_id,
            session_id=session_id,
            now=issued_at,
            ttl=ttl,
            jti=self._derive(b"jti", seed, 16),
            audience=audience,
        )
        refresh = f"{session_id}.{self._derive(b'refresh', seed, 32)}"
        lifetime = self._settings.session_ttl_seconds
        return TokenPair(access, ttl, refresh, lifetime, session_id, user_id)

    async def open(
        self,
        conn: asyncpg.Connection,
        *,
        user_id: str,
        device_id: str | None,
        platform: str | None,
        audience: str | None = None,
    ) -> TokenPair:
        """Start a session for one device inside the caller's transaction; an older session
        of the same named device is replaced (one session per device). Without a
        ``device_id`` the session is a device of its own (its id is the session's), so it
        never ends another session (docs/accounts.md#device-sessions). With ``audience`` it
        issues resource tokens (the caller records the grant in the same transaction)."""
        now = self._clock.now()
        session_id = new_id()
        if device_id is None:
            device_id = session_id
        else:
            await sessions_store.delete_device_sessions(conn, user_id=user_id, device_id=device_id)
        expires_at = now + timedelta(seconds=self._settings.session_ttl_seconds)
        session = await sessions_store.insert_session(
            conn,
            id=session_id,
            user_id=user_id,
            device_id=device_id,
            platform=platform,
            expires_at=expires_at,
            now=now,
        )
        pair = self._new_tokens(
            session.id, user_id, secrets.token_urlsafe(32), int(now.timestamp()), audience
        )
        await sessions_store.rotate_refresh_hash(
            conn,
            id=session.id,
            old_hash=None,
            new_hash=hash_refresh_token(pair.refresh_token),
            now=now,
            expires_at=expires_at,
        )
        return pair

    async def refresh(
        self, refresh_token: str, *, ip: str | None, audience: str | None = None
    ) -> TokenPair:
        """Rotate: the presented token stops working, a new pair is returned. ``audience`` is
        None for a device session, else the resource of the OAuth grant being refreshed.

        Within ``refresh_grace_seconds`` of a rotation, the token rotated away gets the same
        new pair again (audited ``auth.refresh_grace``) while that pair is still current.
        Raises RefreshTokenInvalidError (401) for an unknown, expired or revoked token, and
        for a reused one — after revoking that session and auditing ``auth.refresh_reuse``.
        """
        session_id = _session_id_of(refresh_token)
        presented = hash_refresh_token(refresh_token)
        reused = False
        async with self._pool.acquire() as conn, conn.transaction():
            pair = await self._rotate(conn, session_id, refresh_token, ip, audience)
            if pair is None:
                pair = await self._grace(conn, session_id, refresh_token, ip, audience)
            if pair is None:
                reused = await self._revoke_if_reused(conn, presented, ip)
        if pair is None:
            detail = "refresh token reused; the session was revoked" if reused else None
            raise RefreshTokenInvalidError(detail)
        return pair

    async def _current_session(
        self, conn: asyncpg.Connection, session_id: str, expected_hash: str, audience: str | None
    ) -> SessionRow | None:
        """The live session of an active account whose current refresh hash is ``expected``
        and whose grant's resource is ``audience`` (None: a device session, no grant)."""
        session = await sessions_store.get_session(conn, id=session_id)
        if session is None or session.expires_at <= self._clock.now():
            return None
        if session.refresh_token_hash is None or not hmac.compare_digest(
            session.refresh_token_hash, expected_hash
        ):
            return None
        user = await users_store.get_user(conn, id=session.user_id)
        disabled = await accounts_store.get_disabled(conn, user_id=session.user_id)
        if user is None or user.deleted_at is not None or disabled is not None:
            return None
        grant = await oauth_store.get_grant(conn, session_id=session_id)
        if (grant["resource"] if grant else None) != audience:
            return None
        return session

    async def _grace(
        self,
        conn: asyncpg.Connection,
        session_id: str,
        refresh_token: str,
        ip: str | None,
        audience: str | None,
    ) -> TokenPair | None:
        """The successor pair again, for a token rotated away moments ago (else None)."""
        used = await accounts_store.get_used_token(
            conn, token_hash=hash_refresh_token(refresh_token)
        )
        if used is None or used["session_id"] != session_id:
            return None
        age = (self._clock.now() - used["used_at"]).total_seconds()
        if age > self._settings.refresh_grace_seconds:
            return None
        issued_at = int(used["used_at"].timestamp())
        pair = self._new_tokens(session_id, used["user_id"], refresh_token, issued_at, audience)
        successor = hash_refresh_token(pair.refresh_token)
        if await self._current_session(conn, session_id, successor, audience) is None:
            return None  # the successor was itself rotated: this is reuse
        await audit_store.insert_audit(
            conn,
            action="auth.refresh_grace",
            user_id=used["user_id"],
            details={"session_id": session_id, "age_seconds": round(age, 3)},
            ip_address=ip,
        )
        return dataclasses.replace(pair, expires_in=max(1, pair.expires_in - int(age)))

    async def _rotate(
        self,
        conn: asyncpg.Connection,
        session_id: str,
        refresh_token: str,
        ip: str | None,
        audience: str | None,
    ) -> TokenPair | None:
        now = self._clock.now()
        presented = hash_refresh_token(refresh_token)
        session = await self._current_session(conn, session_id, presented, audience)
        if session is None:
            return None
        pair = self._new_tokens(
            session.id, session.user_id, refresh_token, int(now.timestamp()), audience
        )
        expires_at = now + timedelta(seconds=self._settings.session_ttl_seconds)
        new_hash = hash_refresh_token(pair.refresh_token)
        if not await sessions_store.rotate_refresh_hash(
            conn,
            id=session.id,
            old_hash=presented,
            new_hash=new_hash,
            now=now,
            expires_at=expires_at,
        ):
            return None  # a concurrent refresh won the race
        await accounts_store.insert_used_token(
            conn, token_hash=presented, session_id=session.id, user_id=session.user_id, now=now
        )
        await audit_store.insert_audit(
            conn,
            action="auth.refresh",
            user_id=session.user_id,
            details={"session_id": session.id},
            ip_address=ip,
        )
        return pair

    async def _revoke_if_reused(
        self, conn: asyncpg.Connection, presented: str, ip: str | None
    ) -> bool:
        used = await accounts_store.get_used_token(conn, token_hash=presented)
        if used is None:
            return False
        revoked = await sessions_store.delete_session(conn, id=used["session_id"])
        await audit_store.insert_audit(
            conn,
            action="auth.refresh_reuse",
            user_id=used["user_id"],
            details={"session_id": used["session_id"], "session_revoked": revoked},
            ip_address=ip,
        )
        return True

    async def list(self, *, user_id: str, current_session_id: str) -> SessionList:
        """The user's unexpired sessions, newest first, the caller's marked ``current``."""
        async with self._pool.acquire() as conn:
            rows = await sessions_store.list_live_sessions(
                conn, user_id=user_id, now=self._clock.now()
            )
        return SessionList(items=[session_public(r, current_session_id) for r in rows])

    async def revoke(self, *, user_id: str, session_id: str, ip: str | None) -> None:
        """End one of the user's sessions. Raises SessionNotFoundError (404)."""
        async with self._pool.acquire() as conn, conn.transaction():
            if not await sessions_store.delete_user_session(conn, id=session_id, user_id=user_id):
                raise SessionNotFoundError(f"no session {session_id!r}")
            await audit_store.insert_audit(
                conn,
                action="session.revoked",
                user_id=user_id,
                details={"session_id": session_id},
                ip_address=ip,
            )
        self._cache.forget_user(user_id)  # at once here; other processes hear the NOTIFY

    async def revoke_others(self, *, user_id: str, keep: str | None, ip: str | None) -> int:
        """End every session of the user but ``keep``; returns how many ended."""
        async with self._pool.acquire() as conn, conn.transaction():
            count = await sessions_store.delete_user_sessions(conn, user_id=user_id, keep=keep)
            await audit_store.insert_audit(
                conn,
                action="session.revoked_others",
                user_id=user_id,
                details={"kept": keep, "revoked": count},
                ip_address=ip,
            )
        self._cache.forget_user(user_id)
        return count


def session_public(row: SessionRow, current_session_id: str | None) -> SessionPublic:
    """The API view of a session row (never its refresh token hash)."""
    return SessionPublic(
        id=row.id,
        device_id=row.device_id,
        platform=row.platform,
        created_at=row.created_at,
        last_active_at=row.last_active_at,
        expires_at=row.expires_at,
        current=row.id == current_session_id,
    )
