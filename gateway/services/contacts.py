"""Contacts: a user's address book of peers (``peer_contacts``), with trust and overrides.

Adding resolves and validates the DID first (did:web, ``peer_agents`` cache). ``blocked``
contacts are refused at the federation door; ``muted`` ones are stored without notification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg

from gateway.errors import ContactNotFoundError
from gateway.services.peers import PeerDirectory
from gateway.store import audit as audit_store
from gateway.store import contacts as store
from gateway.store import peers as peers_store
from models import PeerAgentRow, PeerContactRow, User
from models.api import ContactCreate, ContactPolicyOverrides, ContactPublic, ContactUpdate


@dataclass(frozen=True)
class ContactSettings:
    """What the door and the policy need of a contact (defaults when there is none)."""

    trust_level: str = "unknown"
    muted: bool = False
    overrides: ContactPolicyOverrides = field(default_factory=ContactPolicyOverrides)


def settings_of(contact: PeerContactRow | None) -> ContactSettings:
    """The settings a contact entry holds (the defaults for None: not a contact)."""
    if contact is None:
        return ContactSettings()
    raw = dict(contact.policy_overrides_json or {})
    trust = raw.pop("trust_level", None)
    return ContactSettings(
        trust_level=trust if isinstance(trust, str) else "unknown",
        muted=bool(contact.muted),
        overrides=ContactPolicyOverrides.model_validate(raw),
    )


async def contact_settings(
    conn: asyncpg.Connection, *, user_id: str, peer_id: str
) -> ContactSettings:
    """The user's settings for ``peer_id`` (defaults when it is not a contact)."""
    return settings_of(await store.get_contact_for_peer(conn, user_id=user_id, peer_id=peer_id))


def contact_public(contact: PeerContactRow, peer: PeerAgentRow) -> ContactPublic:
    """The API view of a contact."""
    settings = settings_of(contact)
    return ContactPublic(
        id=contact.id,
        did=peer.did,
        alias=contact.alias,
        name=peer.name,
        endpoint=peer.endpoint,
        tags=contact.tags or [],
        pinned=bool(contact.pinned),
        muted=settings.muted,
        trust_level=settings.trust_level,  # type: ignore[arg-type]
        policy_overrides=settings.overrides,
        added_via=contact.added_via,
        fetched_at=peer.fetched_at,
        created_at=contact.created_at,
    )


def _columns(data: ContactCreate | ContactUpdate, current: PeerContactRow | None) -> dict[str, Any]:
    """Column values for the fields the client sent."""
    sent = data.model_fields_set - {"did"}
    fields = {k: getattr(data, k) for k in sent & {"alias", "tags", "pinned", "muted"}}
    if sent & {"trust_level", "policy_overrides"}:
        settings = settings_of(current)
        overrides = data.policy_overrides if "policy_overrides" in sent else settings.overrides
        trust = data.trust_level if "trust_level" in sent else settings.trust_level
        stored = (overrides or ContactPolicyOverrides()).model_dump(mode="json", exclude_none=True)
        fields["policy_overrides_json"] = {**stored, "trust_level": trust or "unknown"}
    return fields


async def add_contact(
    pool: asyncpg.Pool, peers: PeerDirectory, user: User, data: ContactCreate
) -> ContactPublic:
    """Resolve ``data.did`` and add (or update) it in the user's contacts."""
    peer = await peers.resolve(data.did)
    async with pool.acquire() as conn, conn.transaction():
        # The changes are computed from the row locked, so concurrent writes of the shared
        # ``policy_overrides_json`` (trust level, overrides) keep each other.
        contact = await store.ensure_contact(
            conn, user_id=user.id, peer_id=peer.id, added_via="did"
        )
        fields = _columns(data, contact)
        if fields:
            updated = await store.update_contact(
                conn, id=contact.id, user_id=user.id, fields=fields
            )
            assert updated is not None
            contact = updated
        await audit_store.insert_audit(
            conn, action="contact.saved", user_id=user.id, details={"peer": peer.did}
        )
    return contact_public(contact, peer)


async def list_contacts(pool: asyncpg.Pool, user: User, tag: str | None) -> list[ContactPublic]:
    """The user's contacts (pinned first, then oldest first), optionally with ``tag``."""
    async with pool.acquire() as conn:
        rows = await peers_store.list_contacts(conn, user_id=user.id)
    contacts = [contact_public(c, p) for c, p in rows if tag is None or tag in (c.tags or [])]
    return sorted(contacts, key=lambda c: not c.pinned)


async def get_contact(pool: asyncpg.Pool, user: User, contact_id: str) -> ContactPublic:
    """One contact. Raises ContactNotFoundError."""
    async with pool.acquire() as conn:
        pair = await store.get_contact(conn, id=contact_id, user_id=user.id)
    if pair is None:
        raise ContactNotFoundError(f"no contact {contact_id}")
    return contact_public(*pair)


async def update_contact(
    pool: asyncpg.Pool, user: User, contact_id: str, data: ContactUpdate
) -> ContactPublic:
    """Change the fields sent. Raises ContactNotFoundError."""
    async with pool.acquire() as conn, conn.transaction():
        pair = await store.get_contact(conn, id=contact_id, user_id=user.id, lock=True)
        if pair is None:
            raise ContactNotFoundError(f"no contact {contact_id}")
        fields = _columns(data, pair[0])
        contact = await store.update_contact(conn, id=contact_id, user_id=user.id, fields=fields)
        assert contact is not None
        await audit_store.insert_audit(
            conn,
            action="contact.updated",
            user_id=user.id,
            details={"peer": pair[1].did, "fields": sorted(fields)},
        )
    return contact_public(contact, pair[1])


async def remove_contact(pool: asyncpg.Pool, user: User, contact_id: str) -> None:
    """Remove a contact (its conversations stay). Raises ContactNotFoundError."""
    async with pool.acquire() as conn, conn.transaction():
        if not await store.delete_contact(conn, id=contact_id, user_id=user.id):
            raise ContactNotFoundError(f"no contact {contact_id}")
        await audit_store.insert_audit(
            conn, action="contact.removed", user_id=user.id, details={"contact_id": contact_id}
        )
