"""Fan-out, send throughput and memory of Confer's real-time path, beside raw baselines.

Run: ``python bench/fanout.py`` (PostgreSQL as ``bench/databases.py`` picks
it; a scratch database is created and dropped). Everything runs on loopback:

1. Fan-out: one message POSTed to a group whose members each have a WebSocket open (50 and
   1,000 members by default, ``--sizes``): p50/p99 from the POST to the last client's receipt,
   and deliveries per second — beside a raw ``websockets`` server broadcasting the same
   payload to as many sockets (``broadcast()``, no compression: the floor), in the same run.
2. Send throughput: authenticated posts per second (stored, fanned out to a connected
   recipient) beside raw asyncpg single-row INSERT + COMMIT per second, same concurrency.
3. Memory: the gateway process's RSS per idle authenticated connection with 5,000 open
   (``--connections 5000,10000`` measures at each count, opening more in between; the
   clients spread over source addresses 127.0.0.2-9 so ephemeral ports never run out).

The gateway's limits the bench goes beyond (group size, registrations from one address) are
raised through its settings; the defaults stay as shipped.

Both servers run as separate processes; the clients share this one (so the ratio, not the
absolute figure, is what to compare). ``--json FILE`` also writes the figures to ``FILE``;
``CONFER_BENCH_CHECKOUT=DIR`` measures another checkout's code (``bench/checkout.py``). Loops
are bounded; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import websockets
from checkout import CHECKOUT, write_json

PASSWORD = "correct horse battery"
ACCESS_TOKEN_TTL = 6 * 3600  # on a loaded machine registering 1,000 users outlasts the default

# An older checkout has no ``run_server``: it is served as its ``confer serve`` served it.
SERVER = """
from gateway.settings import Settings
settings = Settings(host="127.0.0.1")
try:
    from gateway.cli import run_server
except ImportError:
    import uvicorn
    from gateway.app import create_app
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_level="warning", backlog=4096, ws_max_size=settings.max_body_bytes)
else:
    run_server(settings, log_level="warning", backlog=4096)
"""

RAW_SERVER = """
import asyncio, sys, websockets
from websockets.asyncio.server import broadcast, serve
clients = set()
async def handler(ws):
    if ws.request.path == "/control":
        async for payload in ws:
            broadcast(clients, payload)
        return
    clients.add(ws)
    try:
        await ws.wait_closed()
    finally:
        clients.discard(ws)
async def main():
    async with serve(handler, "127.0.0.1", int(sys.argv[1]), backlog=4096, compression=None):
        await asyncio.Future()
asyncio.run(main())
"""


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit towards ``wanted`` (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@contextlib.asynccontextmanager
async def scratch_database() -> AsyncIterator[str]:
    """A migrated scratch database on the server :func:`databases.admin_dsn` picks (the local
    one, ``CONFER_BENCH_DATABASE_URL``, or the embedded PostgreSQL on a fresh machine),
    dropped at exit; its URL is yielded."""
    from databases import admin_dsn
    from databases import scratch_database as scratch

    async with scratch(admin_dsn()) as url:
        yield url


@contextlib.asynccontextmanager
async def process(code: str, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[int]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, *args, env={**os.environ, **(env or {})}, cwd=CHECKOUT
    )
    try:
        yield proc.pid
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def wait_http(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(400):
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


async def register(url: str, public_url: str, names: list[str]) -> list[dict[str, Any]]:
    """Register users through Confer's own ``Accounts.register`` on the bench's database.

    Only set-up: argon2 is made cheap through settings (the bench never logs in), so creating
    thousands of users takes seconds instead of minutes of argon2 on a small machine. The
    tokens are real access tokens of the gateway under test (same keys, same sessions).
    """
    from gateway.clock import Clock
    from gateway.db import create_pool
    from gateway.services.accounts import Accounts
    from gateway.services.identity import load_identity
    from gateway.settings import Settings
    from models.api import RegisterCreate

    # The bench registers thousands of users from one address: raise that limit through
    # settings (the defaults stay as shipped).
    settings = Settings(
        public_url=public_url,
        database_url=url,
        rate_limit_register_ip="1000000/hour",
        access_token_ttl_seconds=ACCESS_TOKEN_TTL,
        argon2_time_cost=1,
        argon2_memory_kib=64,
        argon2_parallelism=1,
    )
    pool = await create_pool(url, min_size=1, max_size=8)
    try:
        identity = await load_identity(
            pool, public_url=public_url, signature_window=settings.signature_window_seconds
        )
        accounts = Accounts(pool, identity, Clock(), settings)
        semaphore = asyncio.Semaphore(8)

        async def one(name: str) -> dict[str, Any]:
            async with semaphore:
                token = await accounts.register(
                    RegisterCreate(username=name, password=PASSWORD), ip=None
                )
                return token.model_dump(mode="json")

        return list(await asyncio.gather(*(one(n) for n in names)))
    finally:
        await pool.close()


SOURCE_ADDRESSES = [f"127.0.0.{i}" for i in range(2, 10)]


async def open_sockets(url: str, tokens: list[str], *, spread: bool = False) -> list[Any]:
    """Authenticated sockets that received ``ready``; ``spread`` binds them to
    ``SOURCE_ADDRESSES`` in turn (each has its own ephemeral ports)."""
    semaphore = asyncio.Semaphore(100)

    async def one(index: int, token: str) -> Any:
        local: dict[str, Any] = {"local_addr": (SOURCE_ADDRESSES[index % len(SOURCE_ADDRESSES)], 0)}
        async with semaphore:
            for attempt in range(6):
                try:
                    ws = await websockets.connect(
                        url,
                        subprotocols=["confer.v1", f"bearer.{token}"],  # type: ignore[list-item]
                        open_timeout=120,
                        ping_interval=None,
                        max_queue=4,
                        **(local if spread else {}),
                    )
                    await ws.recv()  # ready
                    return ws
                except (OSError, EOFError, websockets.ConnectionClosed):
                    # a loaded server's full accept backlog resets a handshake: try it again
                    if attempt == 5:
                        raise
                    await asyncio.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tokens))))


async def close_all(sockets: list[Any]) -> None:
    """Close ``sockets`` at once. A socket nobody reads stops reading at ``max_queue`` frames
    and so sees the server's close frame only after its close timeout (10 s): one after the
    other, the send phase's 16 sockets took minutes against a server sending more frames."""
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def receive_until(sockets: list[Any], match: bytes | str) -> list[float]:
    """Per socket, the perf_counter time at which a frame containing ``match`` arrived."""

    async def one(ws: Any) -> float:
        while True:
            frame = await ws.recv()
            if match in frame:
                return time.perf_counter()

    return list(await asyncio.wait_for(asyncio.gather(*(one(ws) for ws in sockets)), 60))


async def bench_confer_fanout(
    base: str, users: list[dict[str, Any]], rounds: int
) -> dict[str, Any]:
    owner, members = users[0], users[1:]
    headers = {"Authorization": f"Bearer {owner['access_token']}"}
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        group = await client.post(
            "/v1/conversations",
            json={
                "type": "group",
                "name": "bench",
                "participant_dids": [u["user"]["did"] for u in members],
            },
            headers=headers,
        )
        group.raise_for_status()
        cid = group.json()["id"]
        sockets = await open_sockets(
            base.replace("http", "ws") + "/v1/ws", [u["access_token"] for u in users]
        )
        await asyncio.sleep(1.0)
        latencies, rates = [], []
        for i in range(rounds):
            text = f"fanout-{i}-{uuid.uuid4().hex}"
            waiting = asyncio.ensure_future(receive_until(sockets, text))
            start = time.perf_counter()
            r = await client.post(
                f"/v1/conversations/{cid}/messages", json={"content": text}, headers=headers
            )
            r.raise_for_status()
            times = await waiting
            last = max(times) - start
            latencies.append(last * 1000)
            rates.append(len(sockets) / last)
        await close_all(sockets)
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "deliveries_per_s": statistics.median(rates),
        "clients": len(sockets),
    }


async def bench_raw_fanout(clients: int, rounds: int, payload_size: int) -> dict[str, Any]:
    port = free_port()
    async with process(RAW_SERVER, str(port)):
        for _ in range(200):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            await asyncio.sleep(0.05)
        url = f"ws://127.0.0.1:{port}"
        semaphore = asyncio.Semaphore(100)

        async def one() -> Any:
            async with semaphore:
                return await websockets.connect(
                    url + "/client", open_timeout=60, ping_interval=None
                )

        sockets = list(await asyncio.gather(*(one() for _ in range(clients))))
        control = await websockets.connect(url + "/control", ping_interval=None)
        await asyncio.sleep(1.0)
        latencies, rates = [], []
        for i in range(rounds):
            marker = f"raw-{i}-{uuid.uuid4().hex}"
            text = json.dumps(
                {"type": "message.created", "data": {"content": marker, "pad": "x" * payload_size}}
            )
            waiting = asyncio.ensure_future(receive_until(sockets, marker))
            start = time.perf_counter()
            await control.send(text)
            times = await waiting
            last = max(times) - start
            latencies.append(last * 1000)
            rates.append(clients / last)
        for ws in [*sockets, control]:
            await ws.close()
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "deliveries_per_s": statistics.median(rates),
        "clients": clients,
    }


async def bench_send(base: str, users: list[dict[str, Any]], total: int, concurrency: int) -> float:
    """Posts per second: ``concurrency`` senders, each in its own direct conversation with a
    recipient who has a WebSocket open (so every post is stored and fanned out)."""
    pairs = []
    async with httpx.AsyncClient(
        base_url=base, timeout=60, limits=httpx.Limits(max_connections=concurrency * 2)
    ) as client:
        for i in range(concurrency):
            sender, recipient = users[2 * i], users[2 * i + 1]
            h = {"Authorization": f"Bearer {sender['access_token']}"}
            conv = await client.post(
                "/v1/conversations", json={"participant_did": recipient["user"]["did"]}, headers=h
            )
            conv.raise_for_status()
            pairs.append((h, conv.json()["id"]))
        sockets = await open_sockets(
            base.replace("http", "ws") + "/v1/ws",
            [users[2 * i + 1]["access_token"] for i in range(concurrency)],
        )
        per = total // concurrency

        async def sender(h: dict[str, str], cid: str) -> None:
            for j in range(per):
                r = await client.post(
                    f"/v1/conversations/{cid}/messages", json={"content": f"m{j}"}, headers=h
                )
                r.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(sender(h, cid) for h, cid in pairs))
        elapsed = time.perf_counter() - start
        await close_all(sockets)
    return per * concurrency / elapsed


async def bench_raw_inserts(url: str, total: int, concurrency: int) -> float:
    pool = await asyncpg.create_pool(url, min_size=concurrency, max_size=concurrency)
    assert pool is not None
    async with pool.acquire() as conn:
        await conn.execute(
            """CREATE TABLE bench_rows (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL,
                                        created_at TIMESTAMPTZ NOT NULL DEFAULT NOW())"""
        )
    per = total // concurrency

    async def worker() -> None:
        async with pool.acquire() as conn:
            for j in range(per):
                async with conn.transaction():
                    await conn.execute("INSERT INTO bench_rows (body) VALUES ($1)", f"m{j}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await pool.close()
    return per * concurrency / elapsed


async def bench_memory(
    base: str, pid: int, users: list[dict[str, Any]], counts: list[int]
) -> list[dict[str, float]]:
    """RSS per idle connection at each of ``counts`` open connections (ascending)."""
    await asyncio.sleep(1.0)
    before = rss_kib(pid)
    sockets: list[Any] = []
    results = []
    for count in counts:
        tokens = [users[i % len(users)]["access_token"] for i in range(len(sockets), count)]
        sockets += await open_sockets(base.replace("http", "ws") + "/v1/ws", tokens, spread=True)
        await asyncio.sleep(2.0)
        after = rss_kib(pid)
        results.append(
            {
                "connections": len(sockets),
                "rss_before_mib": before / 1024,
                "rss_after_mib": after / 1024,
                "kib_per_connection": (after - before) / len(sockets),
                # the server's open files: a socket it dropped costs it nothing
                "server_open_files": len(os.listdir(f"/proc/{pid}/fd")),
            }
        )
    await close_all(sockets)
    return results


async def main(args: argparse.Namespace) -> None:
    counts = sorted({int(c) for c in str(args.connections).split(",")})
    sizes = sorted({int(n) for n in str(args.sizes).split(",") if 1 < int(n) <= args.clients})
    limit = raise_fd_limit(2 * counts[-1] + 2000)  # the clients' sockets and the server's
    print(f"open-file limit: {limit}; cpus: {os.cpu_count()}", flush=True)
    async with scratch_database() as url:
        port = free_port()
        env = {
            "CONFER_DATABASE_URL": url,
            "CONFER_PORT": str(port),
            "CONFER_PUBLIC_URL": f"http://localhost:{port}",
            "CONFER_MIGRATE_ON_START": "false",
            "CONFER_DB_POOL_MAX": "20",
            "CONFER_WS_QUEUE_SIZE": "1024",
            "CONFER_MAX_GROUP_MEMBERS": str(args.clients),
            "CONFER_ACCESS_TOKEN_TTL_SECONDS": str(ACCESS_TOKEN_TTL),
            # each user holds up to this many of the memory phase's connections
            "CONFER_WS_MAX_CONNECTIONS_PER_USER": str(-(-counts[-1] // args.clients) + 1),
        }
        async with process(SERVER, env=env) as pid:
            base = f"http://127.0.0.1:{port}"
            await wait_http(base + "/healthz")
            started = time.perf_counter()
            public_url = env["CONFER_PUBLIC_URL"]
            users = await register(url, public_url, [f"u{i:05d}" for i in range(args.clients)])
            print(
                f"registered {len(users)} users in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            fanouts = []
            for size in sizes:  # Confer, then the raw floor right after, at each size
                confer = await bench_confer_fanout(base, users[:size], args.rounds)
                raw = await bench_raw_fanout(size, args.rounds, payload_size=450)
                fanouts.append((confer, raw))
                print(f"fan-out to {size}: Confer/raw {_share(confer, raw):.2f}", flush=True)
            sends = await bench_send(base, users, args.sends, args.concurrency)
            inserts = await bench_raw_inserts(url, args.sends, args.concurrency)
            memory = await bench_memory(base, pid, users, counts)
    rows = []
    for confer, raw in fanouts:
        rows += [
            f"| fan-out to {confer['clients']} WebSocket clients ({args.rounds} rounds) "
            "| p50 ms | p99 ms | deliveries/s |",
            "|---|---:|---:|---:|",
            _row("Confer: POST → last client's receipt", confer),
            _row("raw `websockets` broadcast", raw),
            f"| Confer/raw (deliveries/s) | | | {_share(confer, raw):.2f} |",
            "",
        ]
    rows += [
        f"| send throughput ({args.sends} posts, {args.concurrency} concurrent) | per second |",
        "|---|---:|",
        f"| Confer: authenticated POST, stored + fanned out | {sends:,.0f} |",
        f"| raw asyncpg single-row INSERT + COMMIT | {inserts:,.0f} |",
        f"| ratio | {inserts / sends:.2f}x |",
        "",
        "| memory: idle authenticated connections | gateway RSS before / after "
        "| RSS per connection |",
        "|---|---:|---:|",
    ]
    rows += [
        f"| {m['connections']:.0f} | {m['rss_before_mib']:.0f} MiB / "
        f"{m['rss_after_mib']:.0f} MiB | {m['kib_per_connection']:.1f} KiB |"
        for m in memory
    ]
    print("\n" + "\n".join(rows))
    write_json(
        args.json,
        {
            "fanout": [{"confer": confer, "raw": raw} for confer, raw in fanouts],
            "sends_per_s": sends,
            "raw_inserts_per_s": inserts,
            "memory": memory,
        },
    )


def _share(confer: dict[str, Any], raw: dict[str, Any]) -> float:
    """Confer's deliveries per second as a share of the raw broadcast's."""
    return float(confer["deliveries_per_s"]) / float(raw["deliveries_per_s"])


def _row(label: str, result: dict[str, Any]) -> str:
    return (
        f"| {label} | {result['p50_ms']:.1f} | {result['p99_ms']:.1f} "
        f"| {result['deliveries_per_s']:,.0f} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=1000, help="users registered")
    parser.add_argument("--sizes", default="50,1000", help="fan-out group sizes (≤ clients)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--connections", default="5000", help="e.g. 5000,10000")
    parser.add_argument("--json", help="also write the figures to this file")
    asyncio.run(main(parser.parse_args()))
