"""Project memory shared by a user and a peer agent.

Source: the data model spec, table ``project_memory``.

Row types mirror their table: one field per column, same name; a nullable column is
``X | None = None``, a ``NOT NULL`` column is required even when the database has a default.
"""

from __future__ import annotations

from pydantic import JsonValue

from .base import ConferModel, Timestamp, Ulid


class ProjectMemoryRow(ConferModel):
    """Table ``project_memory``: the server-side mirror of a project's ``.claude/peers/``.

    One row per (``user_id``, ``project_id``, ``peer_id``); ``facts_md`` and ``decisions_md`` are
    Markdown documents, ``version`` counts updates from 1.
    """

    id: Ulid
    user_id: Ulid
    project_id: str
    peer_id: Ulid
    facts_md: str | None = None
    decisions_md: str | None = None
    meta_json: JsonValue | None = None
    version: int
    created_at: Timestamp
    updated_at: Timestamp
