"""API bodies of moderation: the instance federation policy (``/v1/admin/federation/policy``),
users' reports and the admin queue, message requests."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from .base import ConferModel, Timestamp

_TIME = "2026-11-30T09:15:00Z"


class PolicyEntryPublic(ConferModel):
    """One allow or deny list entry: a domain, ``*.domain`` (its subdomains), either with an
    optional ``:port``, or one did:web DID."""

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

    mode: Literal["open", "allowlist", "denylist"]


class PolicyEntryCreate(ConferModel):
    """``POST /v1/admin/federation/policy/entries``: put ``pattern`` on a list (an entry already
    on the other list moves)."""

    pattern: str = Field(min_length=1, max_length=255, examples=["*.example.org"])
    list: Literal["allow", "deny"]
    note: str | None = Field(default=None, max_length=500)


class MessageRequestPublic(ConferModel):
    """A stranger's first message held apart: its conversation, sender and state."""

    conversation_id: str
    sender_did: str
    state: Literal["pending", "accepted", "declined"]
    created_at: Timestamp
    decided_at: Timestamp | None = None


class MessageRequestList(ConferModel):
    """``GET /v1/message-requests``: pending requests, newest first."""

    items: list[MessageRequestPublic]
