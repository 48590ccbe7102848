"""Read-only figures for metrics and readiness (``gateway.metrics``, ``/readyz``)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class OutboxDepth:
    """Pending deliveries to one destination and the age of the oldest, in seconds."""

    destination: str
    pending: int
    oldest_age_seconds: float


async def list_outbox_depths(conn: asyncpg.Connection) -> list[OutboxDepth]:
    """Pending (neither delivered nor failed) outbox rows per destination."""
    rows = await conn.fetch(
        """SELECT destination, count(*) AS pending,
                  EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest
           FROM federation_outbox
           WHERE delivered_at IS NULL AND failed_at IS NULL
           GROUP BY destination ORDER BY destination"""
    )
    return [OutboxDepth(r["destination"], r["pending"], max(0.0, r["oldest"])) for r in rows]
