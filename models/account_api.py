"""API bodies of accounts, device sessions, agents settings and LLM keys (docs/accounts.md).

Requests end in ``Create``/``Update``, responses in ``Public``. Every model carries an example
for the OpenAPI document. Unknown keys are refused (``ConferModel``: ``extra="forbid"``).
"""

from __future__ import annotations

import zoneinfo
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, StringConstraints

from .agents import AgentStyle, Capability, ModelChoice, PolicyConfig
from .base import ConferModel, DisplayName, Timestamp, Ulid

_ULID = "01J9Z8Q6X3V5N2K7M4R1T0W8YC"
_TIME = "2026-11-30T09:15:00Z"


def _iana_zone(value: str) -> str:
    if value not in _zones():
        raise ValueError(f"not an IANA time zone name: {value!r} (e.g. 'Europe/Madrid')")
    return value


def _zones() -> set[str]:
    return zoneinfo.available_timezones() | {"UTC"}


LanguageTag = Annotated[
    str, StringConstraints(max_length=35, pattern=r"^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$")
]
"""A BCP 47 language tag such as ``en``, ``zh-Hans`` or ``pt-BR`` (RFC 5646 §2.1, simplified)."""

TimeZone = Annotated[str, StringConstraints(max_length=64), AfterValidator(_iana_zone)]
"""An IANA time zone name such as ``Europe/Madrid`` (checked against the tz database)."""

HttpUrl = Annotated[str, StringConstraints(max_length=2048, pattern=r"^https?://[^\s]+$")]
"""An absolute http(s) URL without whitespace, at most 2048 characters."""

Platform = Literal["web", "ios", "android", "desktop", "cli", "api"]


class RefreshCreate(ConferModel):
    """``POST /v1/auth/refresh``: trade a refresh token for a new access + refresh pair."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"refresh_token": f"{_ULID}.q3Jx…"}]})

    refresh_token: Annotated[str, StringConstraints(min_length=1, max_length=256)]


class NotificationUpdate(ConferModel):
    """Part of ``UserPreferences.notification``; absent fields keep their value."""

    push: StrictBool | None = None
    email: StrictBool | None = None


class PrivacyUpdate(ConferModel):
    """Part of ``UserPreferences.privacy``; absent fields keep their value."""

    allow_offline_response: StrictBool | None = None
    """JSON ``true`` or ``false`` only: ``"yes"`` or ``1`` is 422, not silently true."""
    notification_preview: StrictBool | None = None
    """False: notifications carry no message text and no names (docs/notifications.md)."""
    message_requests: StrictBool | None = None
    """Hold a stranger's first message apart as a message request (default true)."""


class PreferencesUpdate(ConferModel):
    """Part of ``UserPreferences``; absent fields keep their value, unknown keys are 422."""

    language: LanguageTag | None = None
    timezone: TimeZone | None = None
    notification: NotificationUpdate | None = None
    privacy: PrivacyUpdate | None = None


class UserUpdate(ConferModel):
    """``PATCH /v1/me``: absent fields are unchanged; ``null`` clears an optional field.

    ``email`` is checked (syntax, no deliverability lookup) and stored lower-cased; ``phone``
    must be in international form (``+`` and country code) and is stored as E.164.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "display_name": "Alice Martín",
                    "email": "alice@example.org",
                    "phone": "+34 612 345 678",
                    "preferences": {"language": "es", "timezone": "Europe/Madrid"},
                }
            ]
        }
    )

    display_name: DisplayName | None = None
    avatar_url: HttpUrl | None = None
    email: Annotated[str, StringConstraints(max_length=255)] | None = None
    phone: Annotated[str, StringConstraints(max_length=32)] | None = None
    preferences: PreferencesUpdate | None = None


class PasswordUpdate(ConferModel):
    """``PUT /v1/me/password``: change the password; other sessions are revoked."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"current_password": "correct horse battery", "new_password": "…"}]
        }
    )

    current_password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    new_password: Annotated[str, StringConstraints(min_length=8, max_length=1024)]


class AccountDelete(ConferModel):
    """``DELETE /v1/me``: confirm with the password."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"password": "correct horse"}]})

    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class SessionPublic(ConferModel):
    """One device session of the caller (``sessions`` row, never the refresh token)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": _ULID,
                    "device_id": "pixel-8",
                    "platform": "android",
                    "created_at": _TIME,
                    "last_active_at": _TIME,
                    "expires_at": "2026-12-30T09:15:00Z",
                    "current": True,
                }
            ]
        }
    )

    id: Ulid
    device_id: str
    platform: str | None = None
    created_at: Timestamp
    last_active_at: Timestamp | None = None
    expires_at: Timestamp
    current: bool = Field(description="True for the session of the token making the request.")


class SessionList(ConferModel):
    """The caller's live sessions, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "id": _ULID,
                            "device_id": "pixel-8",
                            "platform": "android",
                            "created_at": _TIME,
                            "last_active_at": _TIME,
                            "expires_at": "2026-12-30T09:15:00Z",
                            "current": True,
                        }
                    ]
                }
            ]
        }
    )

    items: list[SessionPublic]


class SessionsRevoked(ConferModel):
    """How many sessions a bulk revocation ended."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"revoked": 2}]})

    revoked: int


class ModelConfigUpdate(ConferModel):
    """Part of ``ModelConfig``: the jobs given are replaced, the others kept.

    Each ``provider`` must be an LLM provider id of the catalog (``GET /v1/providers``).
    """

    brain: ModelChoice | None = None
    quick: ModelChoice | None = None
    translation: ModelChoice | None = None
    summarize: ModelChoice | None = None


class AgentUpdate(ConferModel):
    """``PATCH /v1/agents/me`` (or ``/v1/agents/{id}``): absent fields are unchanged.

    ``policies`` and ``capabilities`` are replaced whole; ``model_config`` job by job.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "Alice's agent",
                    "style": "technical",
                    "primary_language": "en",
                    "model_config": {"brain": {"provider": "anthropic", "model": "claude-x"}},
                    "policies": {
                        "default": "ask",
                        "rules": [
                            {
                                "peer": "did:web:bob.example:users:bob",
                                "action": "read",
                                "effect": "allow",
                            }
                        ],
                    },
                    "is_public": False,
                }
            ]
        }
    )

    name: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    description: Annotated[str, StringConstraints(max_length=4000)] | None = None
    avatar_url: HttpUrl | None = None
    primary_language: (
        Annotated[str, StringConstraints(max_length=8, pattern=r"^[a-z]{2,3}(?:-[A-Za-z]{2,4})?$")]
        | None
    ) = None
    style: AgentStyle | None = None
    model_config_: ModelConfigUpdate | None = Field(default=None, alias="model_config")
    policies: PolicyConfig | None = None
    capabilities: Annotated[list[Capability], Field(max_length=50)] | None = None
    is_public: StrictBool | None = None


class LLMKeyPut(ConferModel):
    """``PUT /v1/me/llm-keys/{provider}``: the provider API key (stored encrypted)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"api_key": "sk-…"}]})

    api_key: Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^\S+$")]


class LLMKeyPublic(ConferModel):
    """A provider that has a key, and when it was set — never the key itself."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"provider": "openai", "set_at": _TIME}]}
    )

    provider: str
    set_at: Timestamp


class LLMKeyList(ConferModel):
    """The caller's stored LLM and tool provider keys (metadata only)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [{"provider": "openai", "set_at": _TIME}]}]}
    )

    items: list[LLMKeyPublic]


class ProviderPublic(ConferModel):
    """One entry of the provider catalog."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "openai",
                    "display_name": "OpenAI",
                    "kind": "llm",
                    "api_style": "openai",
                    "base_url": "https://api.openai.com/v1",
                    "requires_key": True,
                }
            ]
        }
    )

    id: str
    display_name: str
    kind: Literal["llm", "tool"]
    api_style: str
    base_url: str | None = None
    requires_key: bool
