"""Login sessions.

Source: the data model spec, table ``sessions``.

Row types mirror their table: one field per column, same name; a nullable column is
``X | None = None``, a ``NOT NULL`` column is required even when the database has a default.
"""

from __future__ import annotations

from .base import ConferModel, Timestamp, Ulid


class SessionRow(ConferModel):
    """Table ``sessions``: one device's login session of a user.

    ``refresh_token_hash`` is a hash, never the token; ``platform`` is free text (at most 16
    characters; the spec does not enumerate it).
    """

    id: Ulid
    user_id: Ulid
    device_id: str
    platform: str | None = None
    refresh_token_hash: str | None = None
    last_active_at: Timestamp | None = None
    created_at: Timestamp
    expires_at: Timestamp
