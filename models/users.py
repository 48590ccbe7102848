"""Users and their preferences.

Source: the data model spec, table ``users``; interfaces ``User``, ``UserPreferences``; type
``LLMKeys``.
"""

from __future__ import annotations

from .base import ConferModel, Timestamp, Ulid

EncryptedKey = str
"""An LLM or tool provider API key, AES-256-GCM ciphertext under ``ENCRYPTION_KEY``.

Decrypted only inside the gateway; never sent to a client (data model spec, ``LLMKeys``).
"""

LLMKeys = dict[str, EncryptedKey]
"""Provider id (as in the LLM catalog, plus tool providers such as ``tavily``) → encrypted key.

Deliberately not an enumeration: the provider list lives in the catalog only (data model spec).
Stored in ``users.llm_keys_json``.
"""


class NotificationPreferences(ConferModel):
    """``UserPreferences.notification``: which channels notify the user."""

    push: bool
    email: bool


class PrivacyPreferences(ConferModel):
    """``UserPreferences.privacy``: whether the user's agent may answer while the user is away,
    and whether notifications may show who wrote what, and whether a stranger's first message is
    held apart as a message request.

    ``notification_preview`` is Confer's addition to the spec's interface (None, as in
    preferences stored before it existed, means true): false keeps message text, sender and
    conversation names out of every push and e-mail notification, which then only say how many
    messages wait.
    """

    allow_offline_response: bool
    notification_preview: bool | None = None
    message_requests: bool | None = None
    """A Confer extension of the spec's interface: None (unset) means on."""


class UserPreferences(ConferModel):
    """Interface ``UserPreferences``, stored in ``users.preferences_json``.

    ``language`` is an open set (``'zh' | 'en' | 'ja' | 'de' | string``); ``timezone`` is an IANA
    zone name such as ``Europe/Madrid``.
    """

    language: str
    timezone: str
    notification: NotificationPreferences
    privacy: PrivacyPreferences


class User(ConferModel):
    """Interface ``User``: a user registered on this instance (table ``users``).

    ``preferences`` and ``llm_keys`` are the ``preferences_json`` and ``llm_keys_json`` columns;
    ``password_hash`` is deliberately absent (the interface leaves it out).
    """

    id: Ulid
    username: str
    email: str | None = None
    phone: str | None = None
    display_name: str | None = None
    avatar_url: str | None = None
    did: str
    preferences: UserPreferences
    llm_keys: LLMKeys
    created_at: Timestamp
    updated_at: Timestamp
    deleted_at: Timestamp | None = None
