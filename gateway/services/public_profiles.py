"""Names for remote people: the public profile an instance publishes for its users and agents.

A profile is a small JSON object, ``{"id": <DID>, "name": <display name>, "avatarUrl": <URL or
null>}`` — nothing else about the account is published (no preference chooses more). It is
served at ``/users/{username}/profile.json`` and ``/agents/{agent_id}/profile.json`` with an
ETag, and the subject's DID document lists it as a :data:`PROFILE_SERVICE_TYPE` service whose
URL carries a version of the profile (``?v=<hash>``): a changed profile changes the DID
document, so a peer revalidating its cached document (``If-None-Match``) learns of the change
and fetches the profile again, while an unchanged one costs a 304 and nothing more.

Peers treat what they fetch as untrusted (:func:`clean_profile`): the name is cleaned like a
signed ``senderName`` (:func:`display_name`), the avatar must be an absolute ``https``/``http``
URL without credentials, control characters or whitespace, at most :data:`MAX_AVATAR_URL_CHARS`
characters; anything else is dropped.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from models import Agent, User
from models.base import clean_name

PROFILE_SERVICE_TYPE = "ConferProfile"
MAX_NAME_CHARS = 128
"""The longest display name kept for a peer (a local user's limit)."""
MAX_AVATAR_URL_CHARS = 2048
"""The longest avatar URL kept for a peer."""


def display_name(claimed: str | None) -> str | None:
    """A peer's name fit to show: cleaned like every name (:func:`models.base.clean_name`:
    control, bidi and zero-width characters dropped, whitespace collapsed and trimmed), at most
    :data:`MAX_NAME_CHARS` characters; None when nothing is left."""
    shown = clean_name(claimed)
    return shown[:MAX_NAME_CHARS].rstrip() if shown else None


def avatar_url(claimed: object) -> str | None:
    """``claimed`` when it is an absolute ``https``/``http`` URL with a host, no user info, no
    whitespace or control characters and at most :data:`MAX_AVATAR_URL_CHARS` characters;
    else None (``javascript:``, ``data:``, relative URLs and the like are refused)."""
    if not isinstance(claimed, str) or not 0 < len(claimed) <= MAX_AVATAR_URL_CHARS:
        return None
    if any(not c.isprintable() or c.isspace() for c in claimed):
        return None
    try:
        parts = urlsplit(claimed)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("https", "http") or not host or "@" in parts.netloc:
        return None
    return claimed


def user_profile(user: User) -> dict[str, Any]:
    """The public profile of a local user: display name (else the username) and avatar."""
    return {
        "id": user.did,
        "name": user.display_name or user.username,
        "avatarUrl": user.avatar_url,
    }


def agent_profile(agent: Agent) -> dict[str, Any]:
    """The public profile of a local agent: its name (else its id) and avatar."""
    return {"id": agent.did, "name": agent.name or agent.id, "avatarUrl": agent.avatar_url}


def profile_service(did: str, url: str, profile: dict[str, Any]) -> dict[str, Any]:
    """The DID document service listing ``profile`` at ``url``, versioned by its content."""
    canonical = json.dumps(profile, sort_keys=True, separators=(",", ":")).encode()
    version = hashlib.sha256(canonical).hexdigest()[:16]
    return {
        "id": f"{did}#profile",
        "type": PROFILE_SERVICE_TYPE,
        "serviceEndpoint": f"{url}?v={version}",
    }


def clean_profile(did: str, raw: dict[str, Any]) -> tuple[str | None, str | None] | None:
    """``(display name, avatar URL)`` of a fetched profile of ``did``, each None when missing
    or unusable; None for a profile of another DID (``id`` present and different)."""
    if raw.get("id") not in (None, did):
        return None
    name = raw.get("name")
    return display_name(name if isinstance(name, str) else None), avatar_url(raw.get("avatarUrl"))
