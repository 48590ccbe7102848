"""Accounts: registration (user + DID + main agent), login, bearer authentication, passwords.

Passwords are argon2id (``gateway.services.passwords``). An unknown user, a deleted user and a
wrong password get the same 401 after the same work: one lookup, one full argon2 verification
(against a dummy hash when there is no live account), one rate-limit count and one audit row.
Login and registration are rate limited per client IP and (login) per account name.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

import asyncpg

from gateway.clock import Clock
from gateway.errors import (
    AccountDisabledError,
    InvalidCredentialsError,
    TokenInvalidError,
    UsernameInvalidError,
    UsernameTakenError,
)
from gateway.ids import new_id
from gateway.services import usernames
from gateway.services.identity import Identity
from gateway.services.passwords import Passwords
from gateway.services.ratelimits import LOGIN_ACCOUNT, LOGIN_IP, REGISTER_IP, RateLimiter
from gateway.services.session_cache import SessionCache
from gateway.services.sessions import DeviceSessions, TokenPair
from gateway.services.tokens import VerifiedTokens
from gateway.settings import Settings
from gateway.store import accounts as accounts_store
from gateway.store import audit as audit_store
from gateway.store import sessions as sessions_store
from gateway.store import users as users_store
from models import User
from models.api import LoginCreate, RegisterCreate, TokenPublic, UserPublic

DEFAULT_PREFERENCES = {
    "language": "en",
    "timezone": "UTC",
    "notification": {"push": True, "email": False},
    "privacy": {"allow_offline_response": False, "notification_preview": True},
}

_OFFLINE = {"provider": "offline", "model": "confer-offline"}
DEFAULT_MODEL_CONFIG = {job: _OFFLINE for job in ("brain", "quick", "translation", "summarize")}
DEFAULT_POLICIES = {"default": "ask", "rules": []}


@dataclass(frozen=True)
class Authenticated:
    """The caller behind a valid bearer token: the user and the device session."""

    user: User
    session_id: str


def admin_usernames(settings: Settings) -> set[str]:
    """The canonical usernames listed in CONFER_ADMIN_USERNAMES: comma-separated, or a JSON
    list like the other list settings (``["alice", "bob"]``)."""
    raw = settings.admin_usernames.strip()
    names: list[str] = []
    if raw.startswith("["):
        with contextlib.suppress(ValueError):
            parsed = json.loads(raw)
            if isinstance(parsed, list):
                names = [n for n in parsed if isinstance(n, str)]
    else:
        names = raw.split(",")
    return {usernames.canonical(n.strip()) for n in names if n.strip()}


async def user_public(conn: asyncpg.Connection, user: User) -> UserPublic:
    """The API view of ``user``: profile, preferences, main agent's DID, admin flag."""
    agent = await users_store.get_main_agent(conn, user_id=user.id)
    return UserPublic(
        id=user.id,
        username=user.username,
        display_name=user.display_name,
        did=user.did,
        agent_did=agent.did if agent else None,
        created_at=user.created_at,
        email=user.email,
        phone=user.phone,
        avatar_url=user.avatar_url,
        preferences=user.preferences,
        is_admin=await accounts_store.is_admin(conn, user_id=user.id),
    )


class Accounts:
    """Account operations; holds the password hasher, the rate limiter and device sessions."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        identity: Identity,
        clock: Clock,
        settings: Settings,
        limiter: RateLimiter | None = None,
    ) -> None:
        self._pool = pool
        self._identity = identity
        self._clock = clock
        self._settings = settings
        self.passwords = Passwords(settings)
        self.limiter = limiter or RateLimiter(settings)
        # the injected clock, so a test that moves time on sees entries expire with it
        self.session_cache = SessionCache(settings.auth_cache_seconds, clock=clock.time)
        self.sessions = DeviceSessions(pool, identity, clock, settings, self.session_cache)
        self._tokens = VerifiedTokens(identity)

    @property
    def pool(self) -> asyncpg.Pool:
        """The database pool the account operations use."""
        return self._pool

    async def public(self, conn: asyncpg.Connection, user: User) -> UserPublic:
        """The API view of ``user`` (see ``user_public``)."""
        return await user_public(conn, user)

    async def _token_public(
        self, conn: asyncpg.Connection, user: User, pair: TokenPair
    ) -> TokenPublic:
        return TokenPublic(
            access_token=pair.access_token,
            expires_in=pair.expires_in,
            refresh_token=pair.refresh_token,
            refresh_expires_in=pair.refresh_expires_in,
            session_id=pair.session_id,
            user=await user_public(conn, user),
        )

    async def _check_username(self, name: str) -> str:
        """Apply the username rules; returns the skeleton. Raises UsernameInvalidError (422)
        or UsernameTakenError (409, also for a look-alike of an existing name)."""
        hidden = usernames.invisible_problem(name)
        if hidden:
            raise UsernameInvalidError(hidden)
        skeleton = usernames.skeleton(name)
        async with self._pool.acquire() as conn:
            if await accounts_store.skeleton_taken(conn, skeleton=skeleton):
                raise UsernameTakenError("that username, or one that looks like it, is taken")
        problem = usernames.form_problem(name)
        if problem:
            raise UsernameInvalidError(problem)
        return skeleton

    async def register(self, data: RegisterCreate, *, ip: str | None) -> TokenPublic:
        """Create the user, its DID and main agent, and a first device session.

        Raises RateLimitedError (429), UsernameInvalidError (422), UsernameTakenError (409).
        """
        await self.limiter.hit(REGISTER_IP, ip or "unknown")
        skeleton = await self._check_username(data.username)
        password_hash = await self.passwords.hash(data.password)
        async with self._pool.acquire() as conn, conn.transaction():
            user = await users_store.insert_user(
                conn,
                id=new_id(),
                username=data.username,
                did=self._identity.user_did(data.username),
                password_hash=password_hash,
                display_name=data.display_name,
                preferences=DEFAULT_PREFERENCES,
            )
            await accounts_store.insert_skeleton(conn, user_id=user.id, skeleton=skeleton)
            agent_id = new_id()
            await users_store.insert_agent(
                conn,
                id=agent_id,
                user_id=user.id,
                did=self._identity.agent_did(agent_id),
                name=f"{data.display_name or data.username}'s agent",
                primary_language="en",
                model_config=DEFAULT_MODEL_CONFIG,
                policies=DEFAULT_POLICIES,
            )
            if user.username in admin_usernames(self._settings):
                await accounts_store.insert_admin(conn, user_id=user.id)
            await audit_store.insert_audit(
                conn, action="user.registered", user_id=user.id, ip_address=ip
            )
            pair = await self.sessions.open(
                conn, user_id=user.id, device_id=data.device_id, platform=data.platform
            )
            return await self._token_public(conn, user, pair)

    async def login(self, data: LoginCreate, *, ip: str | None) -> TokenPublic:
        """Verify the password and open a device session.

        Raises RateLimitedError (429), InvalidCredentialsError (401: unknown, deleted or wrong
        — indistinguishable), AccountDisabledError (403, only after a correct password).
        """
        name = usernames.canonical(data.username)
        await self.limiter.hit(LOGIN_IP, ip or "unknown")
        await self.limiter.check(LOGIN_ACCOUNT, name)
        async with self._pool.acquire() as conn:
            credentials = await users_store.get_credentials(conn, username=name)
        stored = credentials[1] if credentials else None
        verdict = await self.passwords.verify(stored, data.password)
        if not verdict.ok or credentials is None:
            await self.limiter.count(LOGIN_ACCOUNT, name)
            async with self._pool.acquire() as conn:
                await audit_store.insert_audit(
                    conn,
                    action="auth.login_failed",
                    user_id=credentials[0] if credentials else None,
                    details={"username": name[:64]},
                    ip_address=ip,
                )
            raise InvalidCredentialsError()
        upgraded = await self.passwords.hash(data.password) if verdict.needs_rehash else None
        return await self._finish_login(credentials[0], stored, upgraded, data, ip)

    async def _finish_login(
        self,
        user_id: str,
        stored: str | None,
        upgraded: str | None,
        data: LoginCreate,
        ip: str | None,
    ) -> TokenPublic:
        token: TokenPublic | None = None
        async with self._pool.acquire() as conn, conn.transaction():
            if await accounts_store.get_disabled(conn, user_id=user_id):
                await audit_store.insert_audit(
                    conn, action="auth.login_refused_disabled", user_id=user_id, ip_address=ip
                )
            else:
                if upgraded:
                    await users_store.update_password_hash(
                        conn, id=user_id, password_hash=upgraded, expected=stored
                    )
                await audit_store.insert_audit(
                    conn,
                    action="auth.login",
                    user_id=user_id,
                    details={"device_id": data.device_id, "rehashed": upgraded is not None},
                    ip_address=ip,
                )
                pair = await self.sessions.open(
                    conn, user_id=user_id, device_id=data.device_id, platform=data.platform
                )
                user = await users_store.get_user(conn, id=user_id)
                assert user is not None
                token = await self._token_public(conn, user, pair)
        if token is None:
            raise AccountDisabledError()
        return token

    async def refresh(self, refresh_token: str, *, ip: str | None) -> TokenPublic:
        """Rotate a refresh token (``DeviceSessions.refresh``) and return the new pair."""
        pair = await self.sessions.refresh(refresh_token, ip=ip)
        async with self._pool.acquire() as conn:
            user = await users_store.get_user(conn, id=pair.user_id)
            assert user is not None
            return await self._token_public(conn, user, pair)

    async def authenticate(self, token: str, *, audience: str | None = None) -> Authenticated:
        """Resolve a bearer token to its live user and session. Raises TokenInvalidError.

        ``audience`` (a resource, e.g. ``/mcp``'s URL) also admits OAuth access tokens issued
        for it; without it only REST access tokens pass (``verify_access_token``; a token
        whose signature this process verified before is not verified again,
        :class:`~gateway.services.tokens.VerifiedTokens`).

        The signed token names the session; a session checked in the last
        ``CONFER_AUTH_CACHE_SECONDS`` needs no database (:mod:`gateway.services.session_cache`
        keeps revocation exact), else one statement checks it is still live (so a revoked
        session's next request is refused) and reads its user.
        """
        claims = self._tokens.verify(token, now=int(self._clock.time()), audience=audience)
        cache = self.session_cache
        user = cache.get(claims.session_id, claims.user_id)
        if user is None:
            mark = cache.mark()
            async with self._pool.acquire() as conn:
                user = await users_store.get_session_user(
                    conn,
                    session_id=claims.session_id,
                    user_id=claims.user_id,
                    now=self._clock.now(),
                )
            if user is None or user.deleted_at is not None:
                raise TokenInvalidError("the session has ended")
            cache.put(claims.session_id, user, mark=mark)
        return Authenticated(user, claims.session_id)

    async def session_alive(self, auth: Authenticated) -> bool:
        """True while ``auth``'s device session is live and its user neither deleted nor
        disabled (a WebSocket checks this periodically)."""
        async with self._pool.acquire() as conn:
            session = await sessions_store.get_live_session(
                conn, id=auth.session_id, user_id=auth.user.id, now=self._clock.now()
            )
            user = await users_store.get_user(conn, id=auth.user.id) if session else None
        return session is not None and user is not None and user.deleted_at is None

    async def logout(self, auth: Authenticated, *, ip: str | None) -> None:
        """End the caller's device session; its tokens stop working at once."""
        async with self._pool.acquire() as conn, conn.transaction():
            await sessions_store.delete_session(conn, id=auth.session_id)
            await audit_store.insert_audit(
                conn,
                action="auth.logout",
                user_id=auth.user.id,
                details={"session_id": auth.session_id},
                ip_address=ip,
            )

    async def change_password(
        self, auth: Authenticated, current: str, new: str, *, ip: str | None
    ) -> int:
        """Replace the password after checking the current one; other sessions are revoked.

        Returns how many sessions ended. Raises InvalidCredentialsError (401).
        """
        async with self._pool.acquire() as conn:
            stored = await users_store.get_password_hash(conn, id=auth.user.id)
        if not (await self.passwords.verify(stored, current)).ok:
            raise InvalidCredentialsError("the current password is wrong")
        new_hash = await self.passwords.hash(new)
        async with self._pool.acquire() as conn, conn.transaction():
            await users_store.update_password_hash(conn, id=auth.user.id, password_hash=new_hash)
            ended = await sessions_store.delete_user_sessions(
                conn, user_id=auth.user.id, keep=auth.session_id
            )
            await audit_store.insert_audit(
                conn,
                action="auth.password_changed",
                user_id=auth.user.id,
                details={"sessions_revoked": ended},
                ip_address=ip,
            )
        return ended

    async def bootstrap_admins(self) -> int:
        """Grant admin to the existing users named in CONFER_ADMIN_USERNAMES; returns how
        many were newly granted (audited as ``admin.granted``)."""
        granted = 0
        async with self._pool.acquire() as conn, conn.transaction():
            for name in sorted(admin_usernames(self._settings)):
                user = await users_store.get_user_by_username(conn, username=name)
                if user and await accounts_store.insert_admin(conn, user_id=user.id):
                    granted += 1
                    await audit_store.insert_audit(
                        conn, action="admin.granted", user_id=user.id, details={"by": "setting"}
                    )
        return granted
