"""API bodies of the admin API (``/v1/admin/…``, OpenAPI tag ``admin``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, JsonValue, StringConstraints
from pydantic.config import JsonDict

from .base import ConferModel, Timestamp, Ulid

_ULID = "01J9Z8Q6X3V5N2K7M4R1T0W8YC"
_TIME = "2026-11-30T09:15:00Z"
_USER: JsonDict = {
    "id": _ULID,
    "username": "alice",
    "display_name": "Alice",
    "email": "alice@example.org",
    "phone": None,
    "did": "did:web:confer.example:users:alice",
    "created_at": _TIME,
    "deleted_at": None,
    "disabled_at": None,
    "disabled_reason": None,
    "is_admin": False,
}
_SESSION: JsonDict = {
    "id": _ULID,
    "user_id": _ULID,
    "device_id": "laptop",
    "platform": "web",
    "created_at": _TIME,
    "last_active_at": _TIME,
    "expires_at": _TIME,
}
_AUDIT: JsonDict = {
    "id": _ULID,
    "user_id": _ULID,
    "action": "auth.login_failed",
    "details": {"username": "alice"},
    "ip_address": "203.0.113.7",
    "created_at": _TIME,
}


class AdminUserPublic(ConferModel):
    """A user as an admin sees it: contact data and account state, never secrets."""

    model_config = ConfigDict(json_schema_extra={"examples": [_USER]})

    id: Ulid
    username: str
    display_name: str | None = None
    email: str | None = None
    phone: str | None = None
    did: str
    created_at: Timestamp
    deleted_at: Timestamp | None = None
    disabled_at: Timestamp | None = None
    disabled_reason: str | None = None
    is_admin: bool


class AdminUserPage(ConferModel):
    """Users, newest first; pass ``next_before`` as ``before`` for the next page."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_USER], "next_before": None}]}
    )

    items: list[AdminUserPublic]
    next_before: Ulid | None = None


class DisableCreate(ConferModel):
    """``POST /v1/admin/users/{id}/disable``: why (kept in the audit log)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"reason": "spam"}]})

    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class AdminSessionPublic(ConferModel):
    """A live device session of any user."""

    model_config = ConfigDict(json_schema_extra={"examples": [_SESSION]})

    id: Ulid
    user_id: Ulid
    device_id: str
    platform: str | None = None
    created_at: Timestamp
    last_active_at: Timestamp | None = None
    expires_at: Timestamp


class AdminSessionList(ConferModel):
    """Live sessions, newest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [_SESSION]}]})

    items: list[AdminSessionPublic]


class AuditEntryPublic(ConferModel):
    """One ``audit_log`` row."""

    model_config = ConfigDict(json_schema_extra={"examples": [_AUDIT]})

    id: Ulid
    user_id: str | None = None
    action: str
    details: JsonValue | None = None
    ip_address: str | None = None
    created_at: Timestamp


class AuditPage(ConferModel):
    """Audit rows, newest first; pass ``next_before`` as ``before`` for the next page."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_AUDIT], "next_before": None}]}
    )

    items: list[AuditEntryPublic]
    next_before: Ulid | None = None


class InstanceStats(ConferModel):
    """Counts describing the instance right now."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "users_total": 12,
                    "users_active": 10,
                    "users_deleted": 1,
                    "users_disabled": 1,
                    "admins": 1,
                    "sessions_live": 14,
                    "agents": 12,
                    "conversations": 40,
                    "messages": 1200,
                    "peer_agents": 7,
                    "audit_events_24h": 230,
                    "login_failures_24h": 3,
                }
            ]
        }
    )

    users_total: int
    users_active: int = Field(description="Neither deleted nor disabled.")
    users_deleted: int
    users_disabled: int
    admins: int
    sessions_live: int
    agents: int
    conversations: int
    messages: int
    peer_agents: int
    audit_events_24h: int
    login_failures_24h: int


_OUTBOX_ENTRY: dict[str, Any] = {
    "id": "01J9ZK3G7R8T5V2W4X6Y8Z0A1C",
    "message_id": "01J9ZK3F2N4P6Q8R0S2T4V6W8X",
    "destination": "b.example",
    "peer_did": "did:web:b.example:users:bob",
    "endpoint": "https://b.example/users/bob/a2a",
    "state": "retrying",
    "attempts": 3,
    "next_attempt_at": _TIME,
    "leased_until": None,
    "reason": "HTTP 503",
    "parked": False,
    "original": True,
    "delivered_at": None,
    "failed_at": None,
    "created_at": _TIME,
}


class OutboxEntryPublic(ConferModel):
    """One ``federation_outbox`` row for an operator (``GET /v1/admin/federation/outbox``).

    The fields of :class:`models.federation_api.DeliveryPublic`, plus ``endpoint`` (the URL
    it is POSTed to), ``leased_until`` (a worker holds it until then) and ``original`` (False
    for an edit, delete or decision notice that names ``message_id``). ``message_id`` is None
    for a group's membership event, which is no message.
    """

    model_config = ConfigDict(json_schema_extra={"examples": [_OUTBOX_ENTRY]})

    id: Ulid
    message_id: Ulid | None
    destination: str
    peer_did: str
    endpoint: str
    state: Annotated[str, Field(description="queued | retrying | delivered | failed")]
    attempts: int
    next_attempt_at: Timestamp | None = None
    leased_until: Timestamp | None = None
    reason: str | None = None
    parked: bool = False
    original: bool = True
    delivered_at: Timestamp | None = None
    failed_at: Timestamp | None = None
    created_at: Timestamp


class OutboxPage(ConferModel):
    """Outbox rows newest first; pass ``next_before`` as ``before`` for the next page."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_OUTBOX_ENTRY], "next_before": None}]}
    )

    items: list[OutboxEntryPublic]
    next_before: Ulid | None = None


class PeerRefetch(ConferModel):
    """``POST /v1/admin/federation/peers/refetch``: the DID of a known peer."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"did": "did:web:confer.example.org:users:bob"}]}
    )

    did: Annotated[str, Field(min_length=8, max_length=2048, pattern=r"^did:web:")]


class PeerRefetched(ConferModel):
    """A peer's DID document as just fetched again: its ``endpoint``, the ``key_ids`` of its
    authentication keys, its ``etag`` and when it was fetched (``not_modified``: the peer
    answered 304, the document is unchanged)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "did": "did:web:confer.example.org:users:bob",
                    "endpoint": "https://confer.example.org/users/bob/a2a",
                    "key_ids": ["did:web:confer.example.org:users:bob#key-1"],
                    "etag": '"3f2a"',
                    "fetched_at": "2026-12-01T12:00:00Z",
                    "not_modified": False,
                }
            ]
        }
    )

    did: str
    endpoint: str
    key_ids: list[str]
    etag: str | None = None
    fetched_at: Timestamp
    not_modified: bool


class DestinationPublic(ConferModel):
    """A peer instance the outbox delivers to (``GET /v1/admin/federation/destinations``).

    ``failures`` counts consecutive failed attempts since ``failing_since``; ``parked_at`` is
    set while the destination is parked (only a probe every ``delivery_probe_seconds``);
    ``pending`` counts undelivered rows, the oldest queued at ``oldest_pending_at``.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "destination": "b.example",
                    "failures": 12,
                    "failing_since": _TIME,
                    "last_error": "ConnectError: [Errno 111] Connection refused",
                    "parked_at": _TIME,
                    "pending": 3,
                    "oldest_pending_at": _TIME,
                }
            ]
        }
    )

    destination: str
    failures: int = 0
    failing_since: Timestamp | None = None
    last_error: str | None = None
    parked_at: Timestamp | None = None
    pending: int = 0
    oldest_pending_at: Timestamp | None = None


class DestinationList(ConferModel):
    """Destinations by name (at most 1000)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "destination": "b.example",
                            "failures": 0,
                            "failing_since": None,
                            "last_error": None,
                            "parked_at": None,
                            "pending": 1,
                            "oldest_pending_at": _TIME,
                        }
                    ]
                }
            ]
        }
    )

    items: list[DestinationPublic]
