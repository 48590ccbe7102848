"""Accounts: registration (user + DID + main agent), login, and bearer authentication.

Passwords are hashed with argon2id (argon2-cffi, RFC 9106) off the event loop. An unknown
user and a wrong password get the same error after the same amount of work (a dummy hash is
verified when the user does not exist).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from gateway.clock import Clock
from gateway.errors import InvalidCredentialsError, TokenInvalidError
from gateway.ids import new_id
from gateway.services.identity import Identity
from gateway.services.tokens import issue_access_token, verify_access_token
from gateway.settings import Settings
from gateway.store import audit as audit_store
from gateway.store import sessions as sessions_store
from gateway.store import users as users_store
from models import User
from models.api import LoginCreate, RegisterCreate, TokenPublic, UserPublic

DEFAULT_PREFERENCES = {
    "language": "en",
    "timezone": "UTC",
    "notification": {"push": True, "email": False},
    "privacy": {"allow_offline_response": False},
}

_OFFLINE = {"provider": "offline", "model": "confer-offline"}
DEFAULT_MODEL_CONFIG = {job: _OFFLINE for job in ("brain", "quick", "translation", "summarize")}
DEFAULT_POLICIES = {"default": "ask", "rules": []}


@dataclass(frozen=True)
class Authenticated:
    """The caller behind a valid bearer token: the user and the device session."""

    user: User
    session_id: str


class Accounts:
    """Account operations; holds the password hasher and a dummy hash for timing parity."""

    def __init__(
        self, pool: asyncpg.Pool, identity: Identity, clock: Clock, settings: Settings
    ) -> None:
        self._pool = pool
        self._identity = identity
        self._clock = clock
        self._settings = settings
        self.hasher = PasswordHasher()
        self._dummy_hash = self.hasher.hash("confer-dummy-password")

    async def public(self, conn: asyncpg.Connection, user: User) -> UserPublic:
        """The API view of ``user``, with its main agent's DID."""
        agent = await users_store.get_main_agent(conn, user_id=user.id)
        return UserPublic(
            id=user.id,
            username=user.username,
            display_name=user.display_name,
            did=user.did,
            agent_did=agent.did if agent else None,
            created_at=user.created_at,
        )

    async def register(self, data: RegisterCreate, *, ip: str | None) -> TokenPublic:
        """Create the user, its DID and main agent, and a first device session.

        Raises UsernameTakenError (409) when the username exists.
        """
        password_hash = await asyncio.to_thread(self.hasher.hash, data.password)
        user_id = new_id()
        agent_id = new_id()
        async with self._pool.acquire() as conn, conn.transaction():
            user = await users_store.insert_user(
                conn,
                id=user_id,
                username=data.username,
                did=self._identity.user_did(data.username),
                password_hash=password_hash,
                display_name=data.display_name,
                preferences=DEFAULT_PREFERENCES,
            )
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
            await audit_store.insert_audit(
                conn, action="user.registered", user_id=user.id, ip_address=ip
            )
            return await self._open_session(conn, user, data.device_id, data.platform)

    async def login(self, data: LoginCreate, *, ip: str | None) -> TokenPublic:
        """Verify the password and open a device session. Raises InvalidCredentialsError."""
        async with self._pool.acquire() as conn:
            credentials = await users_store.get_credentials(conn, username=data.username)
        stored_hash = credentials[1] if credentials and credentials[1] else self._dummy_hash
        ok = await asyncio.to_thread(self._verify, stored_hash, data.password)
        if not ok or credentials is None:
            async with self._pool.acquire() as conn:
                await audit_store.insert_audit(
                    conn,
                    action="auth.login_failed",
                    user_id=credentials[0] if credentials else None,
                    details={"username": data.username},
                    ip_address=ip,
                )
            raise InvalidCredentialsError()
        async with self._pool.acquire() as conn, conn.transaction():
            user = await users_store.get_user(conn, id=credentials[0])
            assert user is not None
            await audit_store.insert_audit(
                conn, action="auth.login", user_id=user.id, ip_address=ip
            )
            return await self._open_session(conn, user, data.device_id, data.platform)

    def _verify(self, stored_hash: str, password: str) -> bool:
        try:
            return self.hasher.verify(stored_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    async def _open_session(
        self, conn: asyncpg.Connection, user: User, device_id: str, platform: str | None
    ) -> TokenPublic:
        now = self._clock.now()
        session = await sessions_store.insert_session(
            conn,
            id=new_id(),
            user_id=user.id,
            device_id=device_id,
            platform=platform,
            expires_at=now + timedelta(seconds=self._settings.session_ttl_seconds),
            now=now,
        )
        ttl = self._settings.access_token_ttl_seconds
        token = issue_access_token(
            self._identity,
            user_id=user.id,
            session_id=session.id,
            now=int(now.timestamp()),
            ttl=ttl,
        )
        return TokenPublic(access_token=token, expires_in=ttl, user=await self.public(conn, user))

    async def authenticate(self, token: str) -> Authenticated:
        """Resolve a bearer token to its live user and session. Raises TokenInvalidError."""
        claims = verify_access_token(self._identity, token, now=int(self._clock.time()))
        async with self._pool.acquire() as conn:
            session = await sessions_store.get_live_session(
                conn, id=claims.session_id, user_id=claims.user_id, now=self._clock.now()
            )
            user = await users_store.get_user(conn, id=claims.user_id) if session else None
        if session is None or user is None or user.deleted_at is not None:
            raise TokenInvalidError("the session has ended")
        return Authenticated(user, session.id)

    async def logout(self, auth: Authenticated, *, ip: str | None) -> None:
        """End the caller's device session; its tokens stop working at once."""
        async with self._pool.acquire() as conn, conn.transaction():
            await sessions_store.delete_session(conn, id=auth.session_id)
            await audit_store.insert_audit(
                conn, action="auth.logout", user_id=auth.user.id, ip_address=ip
            )
