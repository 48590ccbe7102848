"""API bodies of moderation: the instance federation policy (``/v1/admin/federation/policy``),
users' reports and the admin queue, message requests."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from .base import ConferModel, Timestamp, Ulid

_TIME = "2026-11-30T09:15:00Z"
_REPORT: JsonDict = {
    "id": "01J9Z8Q6X3V5N2K7M4R1T0W8YC",
    "reporter_id": "01J9Z8Q6X3V5N2K7M4R1T0W8YD",
    "target_type": "message",
    "message_id": "01J9Z8Q6X3V5N2K7M4R1T0W8YE",
    "target_user_id": None,
    "target_did": "did:web:spam.example:users:eve",
    "category": "spam",
    "text": "unsolicited ads",
    "snapshot": {"content": "buy cheap watches", "sender_did": "did:web:spam.example:users:eve"},
    "status": "open",
    "action": None,
    "resolution_note": None,
    "resolved_by": None,
    "resolved_at": None,
    "created_at": _TIME,
}


class PolicyEntryPublic(ConferModel):
    """One allow or deny list entry: a domain, ``*.domain`` (its subdomains), either with an
    optional ``:port``, or one did:web DID."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "pattern": "*.spam.example",
                    "list": "deny",
                    "note": "spam",
                    "created_by": None,
                    "created_at": _TIME,
                }
            ]
        }
    )

    pattern: str
    list: Literal["allow", "deny"]
    note: str | None = None
    created_by: str | None = None
    created_at: Timestamp


class FederationPolicyPublic(ConferModel):
    """The instance federation policy: its mode and its entries."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "mode": "denylist",
                    "entries": [
                        {
                            "pattern": "*.spam.example",
                            "list": "deny",
                            "note": "reported for spam",
                            "created_by": None,
                            "created_at": _TIME,
                        }
                    ],
                }
            ]
        }
    )

    mode: Literal["open", "allowlist", "denylist"]
    entries: list[PolicyEntryPublic]


class PolicyModeUpdate(ConferModel):
    """``PATCH /v1/admin/federation/policy``: ``open`` (every peer), ``denylist`` (all but the
    deny list) or ``allowlist`` (only the allow list, never the deny list)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"mode": "denylist"}]})

    mode: Literal["open", "allowlist", "denylist"]


class PolicyEntryCreate(ConferModel):
    """``POST /v1/admin/federation/policy/entries``: put ``pattern`` on a list (an entry already
    on the other list moves)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"pattern": "*.spam.example", "list": "deny", "note": "spam"}]
        }
    )

    pattern: str = Field(min_length=1, max_length=255, examples=["*.example.org"])
    list: Literal["allow", "deny"]
    note: str | None = Field(default=None, max_length=500)


class MessageRequestPublic(ConferModel):
    """A stranger's first message held apart (``kind`` ``direct``), or an invitation into a
    group homed on an instance the user does not know (``group``: ``group_name``, the home's
    instance DID ``group_home``, and the sender is who added them): its conversation, sender
    (``sender_name`` as the sender's instance publishes it, when known) and state."""

    conversation_id: str
    sender_did: str
    state: Literal["pending", "accepted", "declined"]
    created_at: Timestamp
    decided_at: Timestamp | None = None
    kind: Literal["direct", "group"] = "direct"
    group_name: str | None = None
    group_home: str | None = None
    sender_name: str | None = None


class MessageRequestList(ConferModel):
    """``GET /v1/message-requests``: pending requests, newest first."""

    items: list[MessageRequestPublic]


ReportCategory = Literal["spam", "abuse", "harassment", "illegal", "impersonation", "other"]


class ReportCreate(ConferModel):
    """``POST /v1/reports``: report a ``message`` (by ``message_id``, one you can read), a
    ``user`` or a ``peer`` (by ``did``; a peer may also be an instance ``domain``)."""

    target_type: Literal["message", "user", "peer"]
    message_id: Ulid | None = None
    did: str | None = Field(default=None, max_length=255)
    domain: str | None = Field(default=None, max_length=255)
    category: ReportCategory
    text: str | None = Field(default=None, max_length=2000)


class ReportPublic(ConferModel):
    """A report and, once resolved, the admin's action."""

    model_config = ConfigDict(json_schema_extra={"examples": [_REPORT]})

    id: str
    reporter_id: str
    target_type: str
    message_id: str | None = None
    target_user_id: str | None = None
    target_did: str | None = None
    category: str
    text: str | None = None
    snapshot: dict[str, Any] | None = None
    """The reported message as it was when reported (kept for the admin even if it changes
    or is deleted: a peer's message may be edited or gone from its instance)."""
    status: Literal["open", "resolved"]
    action: str | None = None
    resolution_note: str | None = None
    resolved_by: str | None = None
    resolved_at: Timestamp | None = None
    created_at: Timestamp


class ReportPage(ConferModel):
    """A page of reports, newest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [_REPORT]}]})

    items: list[ReportPublic]


class ReportResolve(ConferModel):
    """``POST /v1/admin/reports/{id}/resolve``: ``dismiss``; ``delete_message`` (the reported
    message); ``block_peer`` (the peer's domain joins the deny list); ``suspend_user`` (the
    reported local user is disabled)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"action": "block_peer", "note": "spam from that instance"}]
        }
    )

    action: Literal["dismiss", "delete_message", "block_peer", "suspend_user"]
    note: str | None = Field(default=None, max_length=2000)
