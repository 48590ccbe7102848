"""API bodies of push subscriptions and password resets (docs/notifications.md).

A subscription body is what the W3C Push API's ``PushSubscription.toJSON()`` gives a browser:
the push resource URL (RFC 8030 §5) and its RFC 8291 keys, base64url.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StrictInt, StringConstraints, model_validator

from .api import Password
from .base import ConferModel, Timestamp, Ulid

_B64URL = r"^[A-Za-z0-9_-]+={0,2}$"


class VapidKeyPublic(ConferModel):
    """``GET /v1/push/vapid-public-key``: the ``applicationServerKey`` to subscribe with."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"public_key": "BOr…", "enabled": True}]}
    )

    public_key: str
    """The instance's VAPID P-256 public key, uncompressed point, base64url (RFC 8292 §3.2)."""
    enabled: bool
    """False when the operator turned Web Push off (subscribing then answers 503)."""


class PushKeys(ConferModel):
    """``PushSubscription.keys``: the user agent's ECDH public key and auth secret."""

    p256dh: Annotated[str, StringConstraints(min_length=80, max_length=100, pattern=_B64URL)]
    """65-byte uncompressed P-256 point, base64url (RFC 8291 §3.1)."""
    auth: Annotated[str, StringConstraints(min_length=16, max_length=32, pattern=_B64URL)]
    """16-byte authentication secret, base64url (RFC 8291 §3.2)."""


class PushSubscriptionCreate(ConferModel):
    """``POST /v1/push/subscriptions``: subscribe this device session's browser."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "endpoint": "https://push.example.net/wpush/v2/gAAAAABf…",
                    "expirationTime": None,
                    "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA…", "auth": "tBHI…"},
                }
            ]
        },
    )

    endpoint: Annotated[str, StringConstraints(min_length=10, max_length=1024)]
    """The push resource, an absolute https URL (at most 1024 characters)."""
    expiration_time: StrictInt | None = Field(default=None, alias="expirationTime")
    """Ignored: the push service's 404/410 tells when a subscription ends."""
    keys: PushKeys


class PushSubscriptionPublic(ConferModel):
    """The device session's subscription (never its keys)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "01J9Z8Q6X3V5N2K7M4R1T0W8YC",
                    "session_id": "01J9Z8Q6X3V5N2K7M4R1T0W8YD",
                    "endpoint": "https://push.example.net/wpush/v2/gAAAAABf…",
                    "created_at": "2026-11-30T09:15:00Z",
                }
            ]
        }
    )

    id: Ulid
    session_id: Ulid
    endpoint: str
    created_at: Timestamp


class PasswordResetCreate(ConferModel):
    """``POST /v1/auth/password-reset``: ask for a reset e-mail, by username or e-mail."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"username": "alice"}]})

    username: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    email: Annotated[str, StringConstraints(min_length=3, max_length=255)] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PasswordResetCreate:
        if (self.username is None) == (self.email is None):
            raise ValueError("give exactly one of username and email")
        return self


class PasswordResetConfirm(ConferModel):
    """``POST /v1/auth/password-reset/confirm``: the token from the e-mail, the new password."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"token": "q3Jx…", "new_password": "a new long passphrase"}]
        }
    )

    token: Annotated[str, StringConstraints(min_length=20, max_length=128)]
    new_password: Password


class PasswordResetAccepted(ConferModel):
    """The same answer whether or not an account matched (no account enumeration)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"detail": "If an account matches, a mail is on its way."}]}
    )

    detail: str


class AdminPasswordSet(ConferModel):
    """``PUT /v1/admin/users/{id}/password``: the user's new password."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"password": "temporary passphrase"}]}
    )

    password: Password


class AdminPasswordReset(ConferModel):
    """What an admin's password change did: sessions ended (and a reset token, when issued)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"sessions_revoked": 2}]})

    sessions_revoked: int
    reset_token: str | None = None
    expires_at: Timestamp | None = None
