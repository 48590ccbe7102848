"""The caller's own account: profile updates (``PATCH /v1/me``) and soft deletion.

Email addresses are checked with ``email-validator`` (syntax only, RFC 5322/6531; no DNS) and
stored lower-cased so that uniqueness ignores case. Phone numbers are parsed with
``phonenumbers`` (libphonenumber, imported on first use: its metadata takes a noticeable share
of start-up), must be written in international form and are stored as E.164 (ITU-T E.164, at
most 15 digits). Preferences are merged, then validated whole against
``UserPreferences``.
"""

from __future__ import annotations

import logging
from typing import Any

from email_validator import EmailNotValidError, validate_email

from gateway.clock import Clock
from gateway.errors import FieldInvalidError, InvalidCredentialsError, StorageUnavailableError
from gateway.services import attachments
from gateway.services.accounts import Accounts, Authenticated, user_public
from gateway.storage import AttachmentStorage
from gateway.store import audit as audit_store
from gateway.store import sessions as sessions_store
from gateway.store import users as users_store
from models import UserPreferences
from models.account_api import PreferencesUpdate, UserUpdate
from models.api import UserPublic

log = logging.getLogger(__name__)


def normalise_email(value: str) -> str:
    """``Alice@Example.ORG`` → ``alice@example.org``. Raises FieldInvalidError (422)."""
    try:
        result = validate_email(value, check_deliverability=False)
    except EmailNotValidError as exc:
        raise FieldInvalidError(["body", "email"], str(exc)) from exc
    return result.normalized.lower()


def normalise_phone(value: str) -> str:
    """``+34 612 34 56 78`` → ``+34612345678`` (E.164). Raises FieldInvalidError (422)."""
    import phonenumbers

    try:
        number = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException as exc:
        raise FieldInvalidError(
            ["body", "phone"], f"write the number in international form (+<country code>…): {exc}"
        ) from exc
    if not phonenumbers.is_valid_number(number):
        raise FieldInvalidError(["body", "phone"], "not a valid phone number")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def merged_preferences(current: UserPreferences, update: PreferencesUpdate) -> dict[str, Any]:
    """``current`` with the fields set in ``update`` replaced, validated as UserPreferences."""
    merged = current.model_dump()
    for key, value in update.model_dump(exclude_none=True).items():
        if isinstance(value, dict):
            merged[key] = {**merged.get(key, {}), **value}
        else:
            merged[key] = value
    return UserPreferences.model_validate(merged).model_dump()


def _changes(auth: Authenticated, data: UserUpdate) -> dict[str, Any]:
    given = data.model_fields_set
    changes: dict[str, Any] = {}
    for field in ("display_name", "avatar_url"):
        if field in given:
            changes[field] = getattr(data, field)
    if "email" in given:
        changes["email"] = normalise_email(data.email) if data.email else None
    if "phone" in given:
        changes["phone"] = normalise_phone(data.phone) if data.phone else None
    return changes


async def update_profile(
    accounts: Accounts, clock: Clock, auth: Authenticated, data: UserUpdate, *, ip: str | None
) -> UserPublic:
    """Apply a ``PATCH /v1/me``. Raises FieldInvalidError (422), EmailTakenError /
    PhoneTakenError (409); nothing is written when any field is refused."""
    changes = _changes(auth, data)
    async with accounts.pool.acquire() as conn, conn.transaction():
        if data.preferences is not None:
            # Merged with the stored preferences read under a row lock, not with the ones the
            # request authenticated with: two devices changing different preferences at once
            # would otherwise each write back the other's old value.
            stored = await users_store.get_user(conn, id=auth.user.id, lock=True)
            assert stored is not None
            changes["preferences_json"] = merged_preferences(stored.preferences, data.preferences)
        user = await users_store.update_user(
            conn, id=auth.user.id, changes=changes, now=clock.now()
        )
        await audit_store.insert_audit(
            conn,
            action="user.updated",
            user_id=user.id,
            details={"fields": sorted(changes)},
            ip_address=ip,
        )
        public = await user_public(conn, user)
    return public


async def delete_account(
    accounts: Accounts,
    clock: Clock,
    auth: Authenticated,
    password: str,
    *,
    storage: AttachmentStorage,
    ip: str | None,
) -> None:
    """Soft-delete the caller (``deleted_at``; username and DID stay reserved; password,
    contact data and LLM keys scrubbed) and revoke every session. Messages remain, with their
    files; the uploads never sent are deleted, rows and bytes in ``storage`` (should the
    storage fail, the unsent-upload reaper takes them once they are old enough).

    Raises InvalidCredentialsError (401) when ``password`` is wrong.
    """
    async with accounts.pool.acquire() as conn:
        stored = await users_store.get_password_hash(conn, id=auth.user.id)
    if not (await accounts.passwords.verify(stored, password)).ok:
        raise InvalidCredentialsError("the password is wrong")
    async with accounts.pool.acquire() as conn, conn.transaction():
        await users_store.soft_delete_user(conn, id=auth.user.id, now=clock.now())
        ended = await sessions_store.delete_user_sessions(conn, user_id=auth.user.id)
        await audit_store.insert_audit(
            conn,
            action="user.deleted",
            user_id=auth.user.id,
            details={"sessions_revoked": ended},
            ip_address=ip,
        )
    try:
        await attachments.delete_unsent(accounts.pool, storage, user_id=auth.user.id)
    except StorageUnavailableError:
        log.warning("the unsent uploads of deleted user %s stay for the reaper", auth.user.id)
