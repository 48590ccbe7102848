"""Request and response bodies of Confer's HTTP API (what clients send and receive).

Row and interface types (``User``, ``Message`` …) come from the data model; the types here are
the API's own: what a client may send (``…Create``) and what it gets back (``…Public``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from .agents import PolicyDefault, PolicyRule
from .base import ConferModel, Timestamp, Ulid
from .messages import Message

Username = Annotated[
    str,
    StringConstraints(min_length=2, max_length=64, pattern=r"^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$"),
]
"""Lower-case ASCII letters, digits, ``.``, ``_`` and ``-``; it becomes part of the user's DID."""

Password = Annotated[str, StringConstraints(min_length=8, max_length=1024)]
DID = Annotated[str, StringConstraints(min_length=9, max_length=255, pattern=r"^did:")]


class RegisterCreate(ConferModel):
    """``POST /v1/auth/register``: create an account (and its DID and main agent)."""

    username: Username
    password: Password
    display_name: Annotated[str, StringConstraints(max_length=128)] | None = None
    device_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "default"
    platform: Literal["web", "ios", "android", "desktop", "cli", "api"] | None = None


class LoginCreate(ConferModel):
    """``POST /v1/auth/login``: exchange a username and password for an access token."""

    username: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    device_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "default"
    platform: Literal["web", "ios", "android", "desktop", "cli", "api"] | None = None


class UserPublic(ConferModel):
    """A local user as the API shows it (never the password hash or LLM keys)."""

    id: Ulid
    username: str
    display_name: str | None = None
    did: str
    agent_did: str | None = None
    created_at: Timestamp


class TokenPublic(ConferModel):
    """An access token (a JWT for ``Authorization: Bearer``) and who it belongs to."""

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int = Field(description="Seconds until the access token expires.")
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


class Problem(ConferModel):
    """RFC 9457 problem details, as every error response carries (``application/problem+json``).

    ``code`` is Confer's stable machine-readable error code; ``errors`` lists invalid fields on
    a 422.
    """

    type: str = Field(examples=["urn:confer:problem:conversation_not_found"])
    title: str = Field(examples=["No such conversation"])
    status: int = Field(examples=[404])
    detail: str = Field(examples=["no conversation 01ARZ3NDEKTSV4RRFFQ69G5FAV"])
    code: str = Field(examples=["conversation_not_found"])
    instance: str = Field(examples=["/v1/conversations/01ARZ3NDEKTSV4RRFFQ69G5FAV"])
    errors: list[dict[str, object]] | None = None
