"""An idle instance is idle: peers that are down cost no database work between attempts.

The delivery worker sleeps until the earliest *due head* of any destination's queue (a
parked destination's head until its next probe), so messages queued behind a peer in backoff
and a parked destination do not wake it. Measured by the database's commit counter
(``pg_stat_database.xact_commit``) and this process's CPU time over a quiet window.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from did.document import build_did_document
from gateway.store import federation as store
from gateway.store import outbox_batches
from tests.did.httpserver import LoopbackServer, respond, respond_json
from tests.gateway.harness import Instance, run_instance

WINDOW_SECONDS = 5.0
# A spinning worker commits thousands in the window (9,553 and 14,644 measured before the fix).
# The other workers (agent-task and consent sweeps, retention, concept decay) commit on their
# own schedules; under a full CI run that was 91 in one window, so the bound sits well above
# that and far below a spin.
MAX_COMMITS = 300
MAX_CPU_SECONDS = 1.0  # a spinning worker burns most of a core


def _peer(server: LoopbackServer, name: str, endpoint: str) -> str:
    """Serve the DID document of ``name`` on ``server``, its A2A endpoint at ``endpoint``."""
    did = server.did("users", name)
    server.routes[f"/users/{name}/did.json"] = respond_json(
        build_did_document(
            did,
            [("key-1", Ed25519PrivateKey.generate().public_key())],
            services=[{"id": f"{did}#a2a", "type": "A2AService", "serviceEndpoint": endpoint}],
        )
    )
    return did


async def _fetch(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def _commits(admin_dsn: str, database: str) -> int:
    """Committed transactions of ``database`` so far (read from another database)."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        value = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database
        )
    finally:
        await conn.close()
    return int(value)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def test_peers_down_leave_the_instance_idle(make_database, pg_admin_dsn: str) -> None:
    """One destination parked (a closed port) and one in a long backoff (503, Retry-After an
    hour), several messages queued behind each: over a quiet window the worker sleeps."""
    database_url = await make_database()
    database = urlsplit(database_url).path.lstrip("/")
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(LoopbackServer())
        busy = _peer(server, "busy", server.url("/users/busy/a2a"))
        server.routes["/users/busy/a2a"] = respond(503, b"busy", "text/plain", Retry_After="3600")
        a = await stack.enter_async_context(
            run_instance(database_url, delivery_park_after_failures=2)
        )
        alice = await a.register("alice")
        async with LoopbackServer() as down:  # closed once Alice knows the peer: a closed port
            gone = _peer(down, "gone", down.url("/users/gone/a2a"))
            with_gone = await alice.direct_with(gone)
        closed = down.url("/")
        with_busy = await alice.direct_with(busy)
        for conversation in (with_gone, with_busy):
            for i in range(4):
                await alice.send(conversation["id"], f"queued {i}")

        async def settled() -> bool:
            rows = await _fetch(
                a, "SELECT destination, failures, parked_at FROM federation_destinations"
            )
            health = {r["destination"]: r for r in rows}
            parked = health.get(urlsplit(closed).netloc)
            backoff = health.get(f"localhost:{server.port}")
            return bool(parked and parked["parked_at"] and backoff and backoff["failures"] == 1)

        async with asyncio.timeout(30):
            while not await settled():  # noqa: ASYNC110 (polls the database)
                await asyncio.sleep(0.1)
        pending = await _fetch(a, "SELECT 1 FROM federation_outbox WHERE delivered_at IS NULL")
        assert len(pending) == 8
        await asyncio.sleep(1.5)  # let the last attempts' statistics reach pg_stat_database

        commits, cpu = await _commits(pg_admin_dsn, database), _cpu_seconds()
        await asyncio.sleep(WINDOW_SECONDS)
        commits = await _commits(pg_admin_dsn, database) - commits
        cpu = _cpu_seconds() - cpu

        spent = f"{commits} commits and {cpu:.2f} s of CPU in {WINDOW_SECONDS:g} s"
        assert commits < MAX_COMMITS and cpu < MAX_CPU_SECONDS, spent
        # Nothing was lost or given up on while sleeping.
        pending = await _fetch(a, "SELECT failed_at FROM federation_outbox")
        assert len(pending) == 8 and all(r["failed_at"] is None for r in pending)
        await _due_heads_are_not_crowded_out(a, f"localhost:{server.port}")


async def _due_heads_are_not_crowded_out(a: Instance, backoff: str) -> None:
    """``claim_batches``' limit counts due heads only: the parked head (older) does not take the
    one slot from a head that is due. Rolled back, so the running worker never sees it."""
    async with a.state.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            assert await store.clear_destination(conn, destination=backoff, now=a.state.clock.now())
            claimed = await outbox_batches.claim_batches(
                conn,
                now=a.state.clock.now(),
                lease=timedelta(seconds=30),
                probe_interval=timedelta(minutes=10),
                max_items=50,
                concurrency=4,
                in_flight={},
                limit=1,
            )
        finally:
            await tx.rollback()
    assert [c.row.destination for c in claimed] == [backoff]
