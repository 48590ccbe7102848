"""How claimed outbox rows become requests: lanes packed into batches, order kept.

:func:`gateway.store.outbox_batches.claim_batches` leases, per destination, a prefix of each
free lane (conversation). :func:`plan` packs those lanes into at most ``free_slots`` requests
per destination: a request goes to one endpoint signed by one sender, so a lane's prefix is
cut where its endpoint or sender changes; a lane never spans two requests (two requests in
flight at once could overtake each other); whatever does not fit is released unsent. The
first lane of a destination always fits, so a claim that found rows always sends something.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a.confer import absolute_file_urls
from did.resolver import json_nesting_exceeds
from gateway.store.federation import OutboxRow
from gateway.store.outbox_batches import Claimed


@dataclass
class Batch:
    """Rows for one request to ``rows[0].endpoint``, signed by ``rows[0].sender_did``, in id
    order; one row is a plain single request. ``max_bytes`` is the largest batch body the
    destination accepts (None: it declares no batch extension)."""

    destination: str
    max_bytes: int | None
    rows: list[OutboxRow] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        """``(endpoint, sender_did)``: what every row of the batch shares."""
        return self.rows[0].endpoint, self.rows[0].sender_did


def plan(
    claimed: Sequence[Claimed], *, free_slots: Mapping[str, int]
) -> tuple[list[Batch], list[str]]:
    """``(batches, released ids)`` for the rows of one claim (module docstring).

    ``free_slots[destination]`` is how many more requests may go there now (at least 1 for
    each destination claimed); each claimed row says how many rows one request carries.
    """
    lanes: dict[tuple[str, str], list[OutboxRow]] = {}
    limits: dict[str, tuple[int, int | None]] = {}
    for c in claimed:  # id order, so each lane's list is in order too
        lanes.setdefault((c.row.destination, c.lane), []).append(c.row)
        limits[c.row.destination] = c.per_batch, c.max_bytes
    batches: dict[str, list[Batch]] = {}
    released: list[str] = []
    for (destination, _), rows in lanes.items():
        head = rows[0]
        cut = next(
            (
                i
                for i, r in enumerate(rows)
                if (r.endpoint, r.sender_did) != (head.endpoint, head.sender_did)
            ),
            len(rows),
        )
        limit, max_bytes = limits[destination]
        limit = max(1, limit)
        cut = min(cut, limit)
        released += [r.id for r in rows[cut:]]
        rows = rows[:cut]
        mine = batches.setdefault(destination, [])
        target = next(
            (
                b
                for b in mine
                if b.key == (head.endpoint, head.sender_did) and len(b.rows) + len(rows) <= limit
            ),
            None,
        )
        if target is None and len(mine) < max(1, free_slots.get(destination, 1)):
            target = Batch(destination, max_bytes)
            mine.append(target)
        if target is None:
            released += [r.id for r in rows]
            continue
        target.rows.extend(rows)
    out = [b for mine in batches.values() for b in mine]
    for b in out:
        b.rows.sort(key=lambda r: r.id)
    return out, released


def rpc_call(row: OutboxRow, public_url: str) -> dict[str, Any]:
    """The JSON-RPC ``SendMessage`` call of ``row`` (its ``id`` is the row's id)."""
    return {
        "jsonrpc": "2.0",
        "id": row.id,
        "method": "SendMessage",
        # a file part's path-only URL is on our public origin
        "params": absolute_file_urls(row.payload_json, public_url),
    }


def batch_elements(
    rows: list[OutboxRow], public_url: str, max_bytes: int
) -> tuple[list[bytes], list[OutboxRow]]:
    """The serialised calls of the longest prefix of ``rows`` whose batch body (``[`` calls
    joined by ``,`` ``]``) fits ``max_bytes`` — at least the first row, whatever its size."""
    elements: list[bytes] = []
    size = 1
    for row in rows:
        element = json.dumps(rpc_call(row, public_url), separators=(",", ":")).encode()
        if elements and size + len(element) + 1 > max_bytes:
            break
        elements.append(element)
        size += len(element) + 1
    return elements, rows[: len(elements)]


def json_or_none(body: bytes | None) -> Any:
    """``body`` parsed (depth-checked), or None when it is not JSON."""
    if body is None:
        return None
    try:
        text = body.decode("utf-8")
        return None if json_nesting_exceeds(text, 64) else json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
