"""Known foreign agents and the users' contacts.

Source: the data model spec, tables ``peer_agents``, ``peer_contacts``.

Row types mirror their table: one field per column, same name; a nullable column is
``X | None = None``, a ``NOT NULL`` column is required even when the database has a default.
"""

from __future__ import annotations

from pydantic import JsonValue

from .base import ConferModel, Timestamp, Ulid


class PeerAgentRow(ConferModel):
    """Table ``peer_agents``: the cache of a resolved foreign agent (another user's, or remote).

    ``public_key_json`` and ``agent_facts_json`` are the key material and NANDA AgentFacts from the
    peer's DID document; ``etag`` and ``fetched_at`` drive revalidation; ``trust_level`` defaults
    to ``'unknown'`` (its values are not enumerated by the spec).
    """

    id: Ulid
    did: str
    name: str | None = None
    description: str | None = None
    avatar_url: str | None = None
    organization: str | None = None
    endpoint: str
    public_key_json: JsonValue
    agent_facts_json: JsonValue
    fetched_at: Timestamp
    etag: str | None = None
    trust_level: str | None = None
    created_at: Timestamp
    updated_at: Timestamp


class PeerContactRow(ConferModel):
    """Table ``peer_contacts``: a user's contact entry for a peer agent (unique per user and peer).

    ``policy_overrides_json`` holds overrides of the user's agent policy for this peer (default
    ``{}``); ``added_via`` records how the contact was added (free text, at most 32 characters).
    """

    id: Ulid
    user_id: Ulid
    peer_id: Ulid
    alias: str | None = None
    tags: list[str] | None = None
    pinned: bool | None = None
    muted: bool | None = None
    policy_overrides_json: dict[str, JsonValue] | None = None
    added_via: str | None = None
    created_at: Timestamp
