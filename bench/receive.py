"""Benchmark: the receiving instance's CPU per message of a signed JSON-RPC batch, alone.

One Confer instance (uvicorn on loopback, real PostgreSQL) and a fake peer with its own key
(:mod:`tests.gateway.fakepeer`). The peer's batches of ``--batch`` ``SendMessage`` calls into
one conversation (as A's outbox sends a lane) are signed beforehand, then posted one after
another through an in-process ASGI client, so the numbers leave out the sender, the network
and the bench's own signing: per message, the CPU milliseconds of this process (verification,
the receive path, the in-process client's share) and of the instance's PostgreSQL backends
(Linux: read from ``/proc``, the backends must be readable, as on one machine), and the
messages per second of that serial loop. It measures what ``bench/roundtrip.py`` mixes with
A's work and the machine's other load; compare two trees by running it in each, alternately.

Usage: python bench/receive.py [--batches 50] [--batch 20]   (PostgreSQL as
``bench/databases.py`` picks it: CONFER_BENCH_DATABASE_URL, the local server, or the embedded
one)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.databases import admin_dsn  # noqa: E402
from bench.federation import NO_PEER_BUDGETS, database  # noqa: E402
from bench.roundtrip import _cpu_seconds, database_name  # noqa: E402
from tests.gateway.fakepeer import FakePeer, run_fake_peer  # noqa: E402
from tests.gateway.harness import run_instance  # noqa: E402


def batch(peer: FakePeer, url: str, texts: list[str]) -> tuple[bytes, dict[str, str]]:
    """A signed batch of ``SendMessage`` calls of ``texts`` (body, headers)."""
    calls = []
    for text in texts:
        call = json.loads(peer.rpc(text, uuid.uuid4().hex))
        call["id"] = uuid.uuid4().hex
        calls.append(call)
    body = json.dumps(calls).encode()
    return body, peer.signed_headers(url, body, expires=int(time.time()) + 300)


async def backend_cpu(admin: str, name: str) -> float:
    """CPU seconds so far of the PostgreSQL backends connected to database ``name``."""
    conn = await asyncpg.connect(admin)
    try:
        pids = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", name)
    finally:
        await conn.close()
    return sum(_cpu_seconds(r["pid"]) for r in pids)


async def main(batches: int, size: int) -> None:
    admin = admin_dsn()
    async with (
        database(admin) as url,
        run_instance(url, **NO_PEER_BUDGETS) as b,
        run_fake_peer() as peer,
    ):
        await b.register("bob")
        target = f"{b.base_url}/users/bob/a2a"
        name = database_name(url)
        transport = httpx.ASGITransport(app=b.app)
        async with httpx.AsyncClient(transport=transport, base_url=b.base_url) as client:

            async def post(body: bytes, headers: dict[str, str]) -> None:
                answer = await client.post("/users/bob/a2a", content=body, headers=headers)
                items = answer.json()
                if answer.status_code != 200 or not all("result" in i for i in items):
                    raise RuntimeError(f"unexpected answer: {answer.status_code} {answer.text}")

            for i in range(3):  # the contact, the conversation, the caches and statements
                await post(*batch(peer, target, [f"warm-up {i}.{n}" for n in range(size)]))
            signed = [
                batch(peer, target, [f"load {i}.{n}" for n in range(size)]) for i in range(batches)
            ]
            pg_before, before, start = (
                await backend_cpu(admin, name),
                time.process_time(),
                time.perf_counter(),
            )
            for body, headers in signed:
                await post(body, headers)
            elapsed = time.perf_counter() - start
            own = time.process_time() - before
            pg = await backend_cpu(admin, name) - pg_before
    messages = batches * size
    print(
        f"received {messages} messages in batches of {size}: {messages / elapsed:.0f} messages/s "
        f"serially; CPU ms per message: instance (+ in-process client) {own / messages * 1000:.2f}"
        f", its PostgreSQL {pg / messages * 1000:.2f}, total {(own + pg) / messages * 1000:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.batches, args.batch))
