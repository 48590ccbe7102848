"""Request and response bodies of Confer's HTTP API (what clients send and receive).

Row and interface types (``User``, ``Message`` …) come from the data model; the types here are
the API's own: what a client may send (``…Create``) and what it gets back (``…Public``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints
from pydantic.config import JsonDict

from .agents import PolicyDefault, PolicyRule
from .base import ConferModel, Timestamp, Ulid
from .messages import Message
from .users import UserPreferences

Username = Annotated[str, StringConstraints(min_length=1, max_length=64)]
"""At most 64 characters here; ``gateway.services.usernames`` applies the rest (stored form:
lower-case ASCII letters, digits, ``.``, ``_`` and ``-``, as it becomes part of the user's DID;
look-alikes of existing names are refused as taken, invisible characters with 422)."""

Password = Annotated[str, StringConstraints(min_length=8, max_length=1024)]
_USER_EXAMPLE: JsonDict = {
    "id": "01J9Z8Q6X3V5N2K7M4R1T0W8YB",
    "username": "alice",
    "display_name": "Alice",
    "did": "did:web:confer.example:users:alice",
    "agent_did": "did:web:confer.example:agents:01J9Z8Q6X3V5N2K7M4R1T0W8YC",
    "created_at": "2026-11-30T09:15:00Z",
    "email": "alice@example.org",
    "phone": None,
    "avatar_url": None,
    "preferences": {
        "language": "en",
        "timezone": "UTC",
        "notification": {"push": True, "email": False},
        "privacy": {"allow_offline_response": False},
    },
    "is_admin": False,
}

DID = Annotated[str, StringConstraints(min_length=9, max_length=255, pattern=r"^did:")]


class RegisterCreate(ConferModel):
    """``POST /v1/auth/register``: create an account (and its DID and main agent)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"username": "alice", "password": "correct horse battery", "device_id": "laptop"}
            ]
        }
    )

    username: Username
    password: Password
    display_name: Annotated[str, StringConstraints(max_length=128)] | None = None
    device_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "default"
    platform: Literal["web", "ios", "android", "desktop", "cli", "api"] | None = None


class LoginCreate(ConferModel):
    """``POST /v1/auth/login``: exchange a username and password for an access token."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "username": "alice",
                    "password": "correct horse battery",
                    "device_id": "pixel-8",
                    "platform": "android",
                }
            ]
        }
    )

    username: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    device_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "default"
    platform: Literal["web", "ios", "android", "desktop", "cli", "api"] | None = None


class UserPublic(ConferModel):
    """A local user as the API shows it (never the password hash or LLM keys)."""

    model_config = ConfigDict(json_schema_extra={"examples": [_USER_EXAMPLE]})

    id: Ulid
    username: str
    display_name: str | None = None
    did: str
    agent_did: str | None = None
    created_at: Timestamp
    email: str | None = None
    phone: str | None = None
    avatar_url: str | None = None
    preferences: UserPreferences | None = None
    is_admin: bool = False


class TokenPublic(ConferModel):
    """An access token (a JWT for ``Authorization: Bearer``) and who it belongs to."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "access_token": "eyJhbGciOiJFZERTQSIsImtpZCI6ImtleS0xIn0.…",
                    "token_type": "bearer",
                    "expires_in": 900,
                    "refresh_token": "01J9Z8Q6X3V5N2K7M4R1T0W8YC.q3Jx…",
                    "refresh_expires_in": 2592000,
                    "session_id": "01J9Z8Q6X3V5N2K7M4R1T0W8YC",
                    "user": _USER_EXAMPLE,
                }
            ]
        }
    )

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int = Field(description="Seconds until the access token expires.")
    refresh_token: str = Field(
        description="Single-use token for POST /v1/auth/refresh; store it securely."
    )
    refresh_expires_in: int = Field(description="Seconds the refresh token stays usable.")
    session_id: Ulid = Field(description="This device session (see GET /v1/me/sessions).")
    user: UserPublic


TrustLevel = Literal["blocked", "unknown", "known", "trusted"]
"""A contact's trust: ``blocked`` is refused at the door; ``trusted`` skips L2 consent."""

Tag = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class ContactPolicyOverrides(ConferModel):
    """Overrides of the agent's ``PolicyConfig`` for one contact (checked before the agent's)."""

    default: PolicyDefault | None = None
    rules: list[PolicyRule] = Field(default_factory=list, max_length=100)


class ContactCreate(ConferModel):
    """``POST /v1/contacts``: add a user or agent of any instance by its DID."""

    did: DID
    alias: Annotated[str, StringConstraints(max_length=128)] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=32)
    pinned: bool | None = None
    muted: bool | None = None
    trust_level: TrustLevel | None = None
    policy_overrides: ContactPolicyOverrides | None = None


class ContactUpdate(ConferModel):
    """``PATCH /v1/contacts/{id}``: change only the fields sent (``alias: null`` clears it)."""

    alias: Annotated[str, StringConstraints(max_length=128)] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=32)
    pinned: bool | None = None
    muted: bool | None = None
    trust_level: TrustLevel | None = None
    policy_overrides: ContactPolicyOverrides | None = None


class ContactPublic(ConferModel):
    """A contact: the peer's DID, name and A2A endpoint as resolved from its DID document."""

    id: Ulid
    did: str
    alias: str | None = None
    name: str | None = None
    endpoint: str
    tags: list[str] = Field(default_factory=list)
    pinned: bool = False
    muted: bool = False
    trust_level: TrustLevel = "unknown"
    policy_overrides: ContactPolicyOverrides = Field(default_factory=ContactPolicyOverrides)
    added_via: str | None = None
    fetched_at: Timestamp
    created_at: Timestamp


class ConversationCreate(ConferModel):
    """``POST /v1/conversations``: a direct conversation with one user or agent, by DID.

    Creating a direct conversation that already exists returns the existing one.
    """

    type: Literal["direct_user_user", "direct_user_agent"] = "direct_user_user"
    participant_did: DID
    name: Annotated[str, StringConstraints(max_length=255)] | None = None


class ParticipantPublic(ConferModel):
    """One participant: its kind, DID, display name and role."""

    participant_type: Literal["user", "own_agent", "peer_agent"]
    did: str | None = None
    name: str | None = None
    role: str | None = None


class ConversationPublic(ConferModel):
    """A conversation with its participants."""

    id: Ulid
    type: str
    name: str | None = None
    created_by: Ulid
    created_at: Timestamp
    updated_at: Timestamp
    participants: list[ParticipantPublic]


class MessageCreate(ConferModel):
    """``POST /v1/conversations/{id}/messages``: a text message (optionally a reply)."""

    content: Annotated[str, StringConstraints(min_length=1, max_length=32_000)]
    content_type: Literal["text"] = "text"
    in_reply_to: Ulid | None = None
    via: Literal["web", "mobile", "api", "claude-code"] | None = "api"


class MessagePage(ConferModel):
    """A page of messages, newest first. Pass ``next_before`` as ``before`` for the next page."""

    items: list[Message]
    next_before: Ulid | None = None


class ProblemPublic(ConferModel):
    """RFC 9457 problem details, the body of every error (``application/problem+json``)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "type": "urn:confer:problem:invalid_credentials",
                    "title": "Wrong username or password",
                    "status": 401,
                    "detail": "Wrong username or password",
                    "code": "invalid_credentials",
                    "instance": "/v1/auth/login",
                }
            ]
        },
    )

    type: str
    title: str
    status: int
    detail: str
    code: str = Field(description="Stable machine-readable error code.")
    instance: str
    errors: list[dict[str, object]] | None = Field(
        default=None, description="On a 422: the invalid fields (pydantic's loc/msg/type)."
    )
