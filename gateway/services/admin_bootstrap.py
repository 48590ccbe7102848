"""Bootstrapping an admin from the command line (``confer create-admin``)."""

from __future__ import annotations

import secrets

import asyncpg

from gateway.clock import Clock
from gateway.services.accounts import Accounts
from gateway.services.identity import Identity
from gateway.settings import Settings
from gateway.store import accounts as accounts_store
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from models.api import RegisterCreate


async def ensure_admin(
    pool: asyncpg.Pool,
    identity: Identity,
    settings: Settings,
    username: str,
    password: str | None,
) -> str:
    """Make ``username`` an admin, registering it first when it does not exist (with
    ``password``, or a generated one that is returned in the message). Returns a one-line
    report. Raises the registration errors (UsernameInvalidError, UsernameTakenError)."""
    async with pool.acquire() as conn:
        user = await users_store.get_user_by_username(conn, username=username)
    generated = None
    if user is None:
        if password is None:
            password = generated = secrets.token_urlsafe(18)
        accounts = Accounts(pool, identity, Clock(), settings)
        data = RegisterCreate(username=username, password=password, device_id="cli")
        token = await accounts.register(data, ip=None)
        user_id = token.user.id
    else:
        user_id = user.id
    async with pool.acquire() as conn, conn.transaction():
        granted = await accounts_store.insert_admin(conn, user_id=user_id)
        if granted:
            await audit_store.insert_audit(
                conn, action="admin.granted", user_id=user_id, details={"by": "cli"}
            )
    report = f"{username} is {'now' if granted else 'already'} an admin"
    if generated:
        report += f" (created with password: {generated})"
    return report
