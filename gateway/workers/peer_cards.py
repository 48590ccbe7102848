"""What each destination accepts in one request: the batch extension of its Agent Card.

The delivery worker reads ``{origin}/.well-known/agent-card.json`` of a destination it has
rows for (through the outbound address policy, answer capped at :data:`CARD_MAX_BYTES`,
within ``outbound_timeout_seconds``), at most once per :data:`CARD_TTL` seconds per process,
and keeps what :func:`a2a.batch.batch_capability` finds with the destination
(``federation_destinations``), where :func:`gateway.store.outbox_batches.claim_batches` reads
it. A card that cannot be read, or declares no batch extension, means single requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlsplit

import httpx

from a2a.batch import batch_capability
from did.outbound import OutboundPolicy, read_capped
from did.resolver import parse_json_object
from gateway.clock import Clock
from gateway.db import Pool
from gateway.settings import Settings
from gateway.store import outbox_batches as store

log = logging.getLogger(__name__)

CARD_PATH = "/.well-known/agent-card.json"
CARD_TTL = 600.0
CARD_MAX_BYTES = 256 * 1024


class PeerCards:
    """Reads and remembers destinations' batch limits (module docstring)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        policy: OutboundPolicy,
        settings: Settings,
        pool: Pool,
        clock: Clock,
    ) -> None:
        self._client = client
        self._policy = policy
        self._settings = settings
        self._pool = pool
        self._clock = clock
        self._checked: dict[str, float] = {}  # destination → monotonic time of the last read

    def stale(self, destination: str) -> bool:
        """True when ``destination``'s card was not read by this process within the TTL."""
        checked = self._checked.get(destination)
        return checked is None or time.monotonic() - checked > CARD_TTL

    async def refresh(self, destination: str, endpoint: str) -> None:
        """Read the card of ``endpoint``'s origin and store its batch limits; never raises
        for a peer's failure (it just means no batches)."""
        self._checked[destination] = time.monotonic()
        parts = urlsplit(endpoint)
        await self._keep(
            destination, await self._read(f"{parts.scheme}://{parts.netloc}{CARD_PATH}")
        )

    async def forget(self, destination: str) -> None:
        """The destination did not take a batch: single requests until its card is read
        again (after the TTL)."""
        self._checked[destination] = time.monotonic()
        await self._keep(destination, None)

    async def _keep(self, destination: str, capability: tuple[int, int] | None) -> None:
        items, size = capability if capability is not None else (None, None)
        async with self._pool.acquire() as conn:
            await store.set_batch_capability(
                conn,
                destination=destination,
                max_items=items,
                max_bytes=size,
                now=self._clock.now(),
            )

    async def _read(self, url: str) -> tuple[int, int] | None:
        timeout = self._settings.outbound_timeout_seconds
        request = self._client.build_request(
            "GET",
            url,
            headers={"Accept": "application/json", "Accept-Encoding": "identity"},
            timeout=timeout,
        )
        try:
            async with asyncio.timeout(timeout):
                response = await self._policy.send(self._client, request)
                try:
                    body = await read_capped(response, CARD_MAX_BYTES)
                finally:
                    await response.aclose()
            if response.status_code != 200 or body is None:
                return None
            return batch_capability(parse_json_object(body, "the agent card"))
        except Exception as exc:  # a stranger's card: any failure means "no batches"
            log.info("agent card %s not read: %s", url, exc)
            return None
