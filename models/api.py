"""Request and response bodies of Confer's HTTP API (what clients send and receive).

Row and interface types (``User``, ``Message`` …) come from the data model; the types here are
the API's own: what a client may send (``…Create``) and what it gets back (``…Public``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    StringConstraints,
    model_validator,
)
from pydantic.config import JsonDict

from .agents import PolicyDefault, PolicyRule
from .base import ConferModel, DisplayName, GroupName, StoredJson, Timestamp, Ulid
from .federation_api import DeliveryPublic
from .messages import CitationCreate, ContentType, Message, Translation
from .translation import MessageLanguage
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
        "privacy": {"allow_offline_response": False, "notification_preview": True},
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
    display_name: DisplayName | None = None
    device_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None,
        description="Names this device: a later login with the same id replaces its session."
        " Omitted: the session is a device of its own and ends no other session.",
    )
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
    device_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        default=None,
        description="Names this device: a later login with the same id replaces its session."
        " Omitted: the session is a device of its own and ends no other session.",
    )
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
    pinned: StrictBool | None = None
    muted: StrictBool | None = None
    trust_level: TrustLevel | None = None
    policy_overrides: ContactPolicyOverrides | None = None


class ContactUpdate(ConferModel):
    """``PATCH /v1/contacts/{id}``: change only the fields sent (``alias: null`` clears it)."""

    alias: Annotated[str, StringConstraints(max_length=128)] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=32)
    pinned: StrictBool | None = None
    muted: StrictBool | None = None
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
    """``POST /v1/conversations``: a direct conversation with one DID, or a group.

    Direct types need ``participant_did`` (a user for ``direct_user_user``, an agent for
    ``direct_user_agent`` and ``direct_agent_agent``, where ``agent_did`` names which of the
    caller's agents speaks — default: the main one). Creating a direct conversation that
    already exists returns the existing one. A ``group`` takes ``participant_dids`` (users,
    agents of this instance, peer agents) and the caller becomes its admin.
    """

    type: Literal["direct_user_user", "direct_user_agent", "direct_agent_agent", "group"] = (
        "direct_user_user"
    )
    participant_did: DID | None = None
    participant_dids: list[DID] = Field(default_factory=list, max_length=1000)
    agent_did: DID | None = None
    name: GroupName | None = None

    @model_validator(mode="after")
    def _participants_fit_the_type(self) -> ConversationCreate:
        if self.type == "group":
            if self.participant_did is not None:
                raise ValueError("a group takes participant_dids, not participant_did")
        elif self.participant_did is None or self.participant_dids:
            raise ValueError("a direct conversation takes exactly one participant_did")
        if self.agent_did is not None and self.type != "direct_agent_agent":
            raise ValueError("agent_did is only for direct_agent_agent")
        return self


class ConversationUpdate(ConferModel):
    """``PATCH /v1/conversations/{id}`` (admins): rename, archive (read-only) or unarchive."""

    name: GroupName | None = None
    archived: StrictBool | None = None


class ParticipantCreate(ConferModel):
    """``POST /v1/conversations/{id}/participants`` (admins of a group): add a DID."""

    did: DID
    role: Literal["member", "admin", "observer"] = "member"


class ParticipantUpdate(ConferModel):
    """``PATCH /v1/conversations/{id}/participants/{participant_id}`` (admins): change role."""

    role: Literal["member", "admin", "observer"]


class MembershipUpdate(ConferModel):
    """``PATCH /v1/conversations/{id}/membership``: the caller's own notification setting."""

    notification: Literal["all", "mentions", "none"]


class ParticipantPublic(ConferModel):
    """One participant: its kind, DID, display name and role."""

    participant_type: Literal["user", "own_agent", "peer_agent"]
    did: str | None = None
    name: str | None = None
    avatar_url: str | None = Field(
        default=None,
        description="The avatar the participant publishes (a peer's: its public profile's, "
        "an absolute https/http URL on any host; clients decide whether to load it).",
    )
    role: str | None = None
    id: Ulid | None = None
    joined_at: Timestamp | None = None
    deleted: bool = Field(
        default=False, description="The account was deleted; its messages remain."
    )


class MembershipPublic(ConferModel):
    """The caller's own participation: role, notification setting, read position, unread."""

    participant_id: Ulid
    role: str | None = None
    notification: str | None = None
    last_read_at: Timestamp | None = None
    unread: int = 0


class ConversationPublic(ConferModel):
    """A conversation with its participants."""

    id: Ulid
    type: str
    name: str | None = None
    created_by: Ulid
    created_at: Timestamp
    updated_at: Timestamp
    participants: list[ParticipantPublic]
    archived_at: Timestamp | None = None
    membership: MembershipPublic | None = None
    request: Literal["pending", "declined"] | None = None
    """For the viewer: ``pending`` while a stranger's first message waits for them to accept
    it (held apart from the inbox: not listed, no unread count), ``declined`` after they
    declined it; None for an ordinary conversation."""


class MessageCreate(ConferModel):
    """``POST /v1/conversations/{id}/messages``: a message (optionally a reply).

    ``content_json``'s shape depends on ``content_type`` (see ``docs/messages.md``).
    """

    content: Annotated[str, StringConstraints(min_length=1, max_length=32_000)] | None = None
    content_type: ContentType = "text"
    content_json: StoredJson = None
    in_reply_to: Ulid | None = None
    citations: list[CitationCreate] | None = Field(default=None, max_length=100)
    language: MessageLanguage | None = None
    translation: Translation | None = None
    via: Literal["web", "mobile", "api", "claude-code"] | None = "api"


class MessagePosted(Message):
    """``POST …/messages``: the stored :class:`~models.messages.Message` and its current
    ``version``, the one a ``PATCH`` names (1 for a new message; an idempotent retry after an
    edit returns the edited message's version)."""

    version: int = Field(ge=1)


class MessageListed(Message):
    """A message as listed (``GET …/messages``, a thread's page): the stored
    :class:`~models.messages.Message`, its current ``version`` (1 + its previous versions,
    ``message_versions``) and ``edited_at``, when it was last edited (``messages.updated_at``
    once it has a previous version; None for a message never edited), so a client shows an
    edit after a reload as well as from the ``message.edited`` event."""

    version: int = Field(ge=1)
    edited_at: Timestamp | None = None


class MessageUpdate(ConferModel):
    """``PATCH …/messages/{id}``: new content for the caller's own message.

    ``version`` is the version being edited (from ``GET …/messages/{id}``); when the message
    has moved on meanwhile the edit is refused with 409 ``edit_conflict``.
    """

    version: StrictInt = Field(ge=1)
    content: Annotated[str, StringConstraints(min_length=1, max_length=32_000)] | None = None
    content_json: StoredJson = None


class MessageVersionPublic(ConferModel):
    """A previous version of an edited message."""

    version: int
    content: str | None = None
    content_json: JsonValue = None
    created_at: Timestamp


class MessageDetail(ConferModel):
    """One message with its current ``version``, edit time and previous versions."""

    message: Message
    version: int
    edited_at: Timestamp | None = None
    read_by: list[dict[str, JsonValue]] = Field(default_factory=list)
    delivered_at: Timestamp | None = None
    previous_versions: list[MessageVersionPublic] = Field(default_factory=list)
    deliveries: list[DeliveryPublic] = Field(
        default_factory=list,
        description="Where the message stands with each peer it is sent to (federation).",
    )


READ_STATE_UNREAD_CAP = 1000
"""The most messages a :class:`ReadStatePublic` counts as unread (more show as this number)."""


class ReadStatePublic(ConferModel):
    """One participant's read state in a conversation, as this instance knows it: a local
    member's own reads, a remote member's as its read receipts reached here (in a group, from
    the group's home). ``unread`` counts the visible messages from others after
    ``last_read_message_id`` (all of them before a first read), at most
    :data:`READ_STATE_UNREAD_CAP`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "participant_id": "01JDQ5V5M8K1W6X2Y3Z4A5B6C7",
                    "did": "did:web:b.example:users:bob",
                    "last_read_message_id": "01JDQ5V9ZPE2T7R3S8N4M6K1H0",
                    "last_read_at": "2026-11-30T06:38:24.123456Z",
                    "unread": 2,
                }
            ]
        }
    )

    participant_id: Ulid
    did: str | None = None
    last_read_message_id: Ulid | None = None
    last_read_at: Timestamp | None = None
    unread: int = Field(ge=0, le=READ_STATE_UNREAD_CAP)


class ReadStateList(ConferModel):
    """``GET /v1/conversations/{id}/reads``: every participant's read state, in join order."""

    items: list[ReadStatePublic]


class ReadCreate(ConferModel):
    """``POST /v1/conversations/{id}/read``: everything up to ``message_id`` has been read."""

    message_id: Ulid


class MessagePage(ConferModel):
    """A page of messages, newest first. Pass ``next_before`` as ``before`` for the next page."""

    items: list[MessageListed]
    next_before: Ulid | None = None


class ProblemDetails(ConferModel):
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


class ThreadPage(ConferModel):
    """A page of a thread, oldest first. Pass ``next_after`` as ``after`` for the next page."""

    items: list[MessageListed]
    next_after: Ulid | None = None


class AttachmentPublic(ConferModel):
    """An uploaded file: its id (for a ``file`` message), name, MIME type, size and SHA-256."""

    id: Ulid
    message_id: Ulid | None = None
    filename: str
    content_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    created_at: Timestamp


class ThreadCreate(ConferModel):
    """``POST /v1/conversations/{id}/threads``: archive the thread of a message."""

    root_message_id: Ulid
    title: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    summary: Annotated[str, StringConstraints(max_length=20_000)] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=50)


class ThreadUpdate(ConferModel):
    """``PATCH …/threads/{thread_id}``: change fields (absent = unchanged) or close."""

    title: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    summary: Annotated[str, StringConstraints(max_length=20_000)] | None = None
    tags: list[Tag] | None = Field(default=None, max_length=50)
    closed: StrictBool | None = None


class RetentionUpdate(ConferModel):
    """``PUT /v1/conversations/{id}/retention``: keep messages ``days`` days (1..3650, a JSON
    integer), or ``null`` to follow the instance's ``CONFER_MESSAGE_RETENTION_DAYS``."""

    days: Annotated[StrictInt, Field(ge=1, le=3650)] | None


class RetentionPublic(ConferModel):
    """A conversation's message retention in days: its own (``days``, null when it follows
    the instance), the instance's (``instance_days``, null: keep forever) and the one the
    retention worker applies (``effective_days``, the shorter; null: messages stay)."""

    days: int | None
    instance_days: int | None
    effective_days: int | None
