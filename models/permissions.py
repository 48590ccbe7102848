"""Permission requests and decisions.

Source: the data model spec, table ``permissions``.

Row types mirror their table: one field per column, same name; a nullable column is
``X | None = None``, a ``NOT NULL`` column is required even when the database has a default.
"""

from __future__ import annotations

from typing import Literal

from pydantic import JsonValue

from .base import ConferModel, Timestamp, Ulid

PermissionLevel = Literal["L1", "L2", "L3"]
"""``permissions.level`` (CHECK ``ck_permissions_level``)."""

PermissionDecision = Literal["allow_once", "allow_always", "deny", "pending"]
"""``permissions.decision`` (CHECK ``ck_permissions_decision``)."""

DecisionScope = Literal["peer", "peer_action", "global"]
"""``permissions.decision_scope``: what an ``allow_always`` / ``deny`` applies to (CHECK
``ck_permissions_decision_scope``)."""


class PermissionRow(ConferModel):
    """Table ``permissions``: the audit record of an L2 / L3 permission request and its decision.

    ``user_id`` is asked on behalf of ``peer_id`` to allow ``action`` over ``scope_json`` (a JSON
    value the spec does not shape); ``requested_by`` / ``decided_by`` are ULIDs without a foreign
    key.
    """

    id: Ulid
    user_id: Ulid
    peer_id: Ulid | None = None
    action: str
    scope_json: JsonValue
    level: PermissionLevel
    decision: PermissionDecision | None = None
    decision_scope: DecisionScope | None = None
    requested_by: Ulid | None = None
    decided_by: Ulid | None = None
    expires_at: Timestamp | None = None
    created_at: Timestamp
    decided_at: Timestamp | None = None
