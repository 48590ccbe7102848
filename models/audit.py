"""The audit trail of A2A traffic and important operations.

Source: the data model spec, table ``audit_log``.

Row types mirror their table: one field per column, same name; a nullable column is
``X | None = None``, a ``NOT NULL`` column is required even when the database has a default.
"""

from __future__ import annotations

from pydantic import IPvAnyAddress, JsonValue

from .base import ConferModel, Timestamp, Ulid


class AuditLogRow(ConferModel):
    """Table ``audit_log``: one audited event, e.g. an inbound or outbound federation request.

    ``user_id`` is the user concerned, if any (no foreign key, so entries outlive users);
    ``ip_address`` is the ``INET`` of the remote side.
    """

    id: Ulid
    user_id: Ulid | None = None
    action: str
    details_json: JsonValue | None = None
    ip_address: IPvAnyAddress | None = None
    created_at: Timestamp
