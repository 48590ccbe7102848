"""Operator work from the command line: bootstrap an admin (``confer create-admin``), set a
forgotten password (``confer admin set-password``)."""

from __future__ import annotations

import secrets

import asyncpg
from pydantic import TypeAdapter, ValidationError

from gateway.clock import Clock
from gateway.errors import FieldInvalidError, UserNotFoundError
from gateway.services.accounts import Accounts
from gateway.services.identity import Identity
from gateway.services.password_reset import replace_password
from gateway.services.passwords import Passwords
from gateway.settings import Settings
from gateway.store import accounts as accounts_store
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from models.api import Password, RegisterCreate


async def ensure_admin(
    pool: asyncpg.Pool,
    identity: Identity,
    settings: Settings,
    username: str,
    password: str | None,
) -> str:
    """Make ``username`` an admin, registering it first when it does not exist (with
    ``password``, or a generated one that is returned in the message). Returns a one-line
    report. Raises the registration errors (FieldInvalidError for a name or password out of
    bounds, UsernameInvalidError, UsernameTakenError)."""
    async with pool.acquire() as conn:
        user = await users_store.get_user_by_username(conn, username=username)
    generated = None
    if user is None:
        if password is None:
            password = generated = secrets.token_urlsafe(18)
        accounts = Accounts(pool, identity, Clock(), settings)
        try:
            data = RegisterCreate(username=username, password=password, device_id="cli")
        except ValidationError as exc:  # the same rules as POST /v1/auth/register
            first = exc.errors(include_url=False)[0]
            raise FieldInvalidError([str(p) for p in first["loc"]], first["msg"]) from None
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


_PASSWORD = TypeAdapter(Password)


async def set_password(pool: asyncpg.Pool, settings: Settings, username: str, password: str) -> int:
    """Replace ``username``'s password and end every device session of theirs (each device
    must log in again); audited as ``admin.password_set``. Returns the sessions revoked.

    Raises UserNotFoundError for an unknown or deleted user, FieldInvalidError for a password
    the registration would refuse (8 to 1024 characters).
    """
    try:
        _PASSWORD.validate_python(password)
    except ValidationError as exc:
        raise FieldInvalidError(["password"], "must be 8 to 1024 characters") from exc
    async with pool.acquire() as conn:
        user = await users_store.get_user_by_username(conn, username=username)
    if user is None:
        raise UserNotFoundError(f"no user {username!r}")
    password_hash = await Passwords(settings).hash(password)
    async with pool.acquire() as conn, conn.transaction():
        return await replace_password(
            conn,
            user_id=user.id,
            password_hash=password_hash,
            action="admin.password_set",
            details={"by": "cli"},
        )
