"""Benchmark: a message from alice@A to bob@B across two real Confer processes on loopback.

Measures, in one run:
- sign + verify cost of one RFC 9421 request (our a2a library, in-process), per second;
- end-to-end latency: POST on A → signed A2A delivery → verified and stored on B → event on
  bob's WebSocket (p50/p99 over sequential sends);
- throughput: messages per second delivered to bob's WebSocket with 8 concurrent senders,
  and p50/p99 from each POST to its arrival on bob's WebSocket, with A's JSON-RPC batches off
  (``CONFER_FEDERATION_BATCH_MAX_ITEMS=1``: one message per request) and on (the default), each
  over ``--load`` messages on a fresh pair of processes, and the ratio of the two. The senders
  share alice's one conversation with bob (one lane: its order holds, so one request at a
  time carries it), or with ``--spread`` are 8 users of A, each in a direct conversation of
  their own with bob (8 lanes: up to ``CONFER_FEDERATION_BATCH_CONCURRENCY`` requests at once).
  With ``--rate R`` the senders together post R messages a second, evenly spaced, instead of
  as fast as they can: the latency below saturation rather than the queue at it.

With ``--cpu`` it also prints the CPU milliseconds per message that A, B, this client and
each instance's PostgreSQL backends spent over the load (Linux: read from ``/proc``; the
backends must be readable, as on one machine); ``--batches on`` (or ``off``) runs that pair only.

Usage: python bench/roundtrip.py [--messages 200] [--load 1000] [--spread] [--rate R] [--cpu]
[--batches both|on|off] [--json FILE]   (needs CONFER_DATABASE_URL or uses the embedded
PostgreSQL under .data/). ``--json FILE`` also writes the figures to ``FILE``;
``CONFER_BENCH_CHECKOUT=DIR`` measures another checkout's code (``bench/checkout.py``).
Loopback only; bounded loops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import websockets
from checkout import write_json
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a.signatures import parse_signature, sign_request, verify_request
from gateway.demo import confer_process, fresh_database
from gateway.embedded import embedded_postgres_url
from gateway.settings import Settings


def signing_rate(seconds: float = 2.0) -> tuple[float, float]:
    """(signatures/s, verifications/s) for a typical 300-byte SendMessage body."""
    key = Ed25519PrivateKey.generate()
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"text": "x" * 200}},
        }
    ).encode()
    url = "https://b.example/users/bob/a2a"
    headers = {"Content-Type": "application/json"}
    signed = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        out = sign_request(
            method="POST",
            url=url,
            headers=headers,
            body=body,
            private_key=key,
            keyid="did:web:a.example:users:alice#key-1",
            created=int(time.time()),
            expires=int(time.time()) + 60,
            nonce=f"n{signed}",
        )
        signed += 1
    all_headers = {**headers, **out}
    parsed = parse_signature(all_headers)
    verified = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        verify_request(
            parse_signature(all_headers),
            method="POST",
            url=url,
            headers=all_headers,
            body=body,
            public_key=key.public_key(),
            now=parsed.created or 0,
        )
        verified += 1
    return signed / seconds, verified / seconds


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def account(client: httpx.AsyncClient, name: str) -> dict:
    body = {"username": name, "password": f"{name}-bench-password"}
    response = await client.post("/v1/auth/register", json=body)
    if response.status_code == 409:
        response = await client.post("/v1/auth/login", json=body)
    response.raise_for_status()
    return response.json()


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set ``CONFER_*`` variables for the processes started inside (they inherit them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def next_frame(ws: Any) -> dict[str, Any]:
    """The next frame on bob's WebSocket; the server's heartbeat pings are answered."""
    while True:
        frame: dict[str, Any] = json.loads(await ws.recv())
        if frame.get("type") != "ping":
            return frame
        await ws.send('{"type":"pong"}')


async def drop_database(admin: str, name: str) -> None:
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def database_name(url: str) -> str:
    """The database a DSN names (its path; a socket DSN's ``?host=`` is not part of it)."""
    return urlsplit(url).path.lstrip("/")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``); 0 once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> list[int]:
    """The pids of this process's children (the two ``confer serve``: A's first), Linux."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        found.append(int(entry))
            except OSError:
                continue
    return sorted(found)


async def _backends(admin: str, databases: dict[str, str]) -> dict[int, str]:
    """PostgreSQL backend pids connected to ``databases`` (name → "A" or "B")."""
    conn = await asyncpg.connect(admin)
    try:
        rows = await conn.fetch(
            "SELECT pid, datname FROM pg_stat_activity WHERE datname = ANY($1::text[])",
            list(databases),
        )
    finally:
        await conn.close()
    return {r["pid"]: databases[r["datname"]] for r in rows}


class CpuSplit:
    """CPU seconds per message spent by A, B, this client and each instance's PostgreSQL
    backends over the throughput phase (``--cpu``; Linux only: reads ``/proc``). Backends that
    connect during the phase are not counted."""

    def __init__(self, admin: str, databases: dict[str, str]) -> None:
        self.admin, self.databases = admin, databases
        self.before: dict[str, float] = {}
        self._backends: dict[int, str] = {}

    async def _now(self) -> dict[str, float]:
        kids = _children()
        out = {name: _cpu_seconds(pid) for name, pid in zip(("A", "B"), kids, strict=False)}
        out["client"] = _cpu_seconds(os.getpid())
        for pid, side in self._backends.items():
            out[f"PostgreSQL of {side}"] = out.get(f"PostgreSQL of {side}", 0.0) + _cpu_seconds(pid)
        return out

    async def start(self) -> None:
        self._backends = await _backends(self.admin, self.databases)
        self.before = await self._now()

    async def report(self, messages: int) -> str:
        after = await self._now()
        parts = [
            f"{name} {(after[name] - self.before.get(name, 0.0)) / messages * 1000:.2f}"
            for name in after
        ]
        return "CPU ms per message: " + ", ".join(parts)


async def run(
    messages: int,
    load: int,
    spread: bool,
    rate: float = 0.0,
    *,
    cpu: bool = False,
    modes: str = "both",
    json_path: str | None = None,
) -> None:
    settings = Settings()
    admin = settings.database_url or embedded_postgres_url(Path(".data") / "pg", stop_at_exit=True)
    signs, verifies = signing_rate()
    print(f"sign+verify in-process: {signs:.0f} signatures/s, {verifies:.0f} verifications/s")
    # The load goes beyond the default per-peer budgets (600 calls a minute): lift them.
    budgets = {
        "CONFER_PEER_RATE_LIMIT_AGENT": "1000000/minute",
        "CONFER_PEER_RATE_LIMIT_DOMAIN": "1000000/minute",
    }
    results = {}
    for mode, items in (("off", "1"), ("on", "50")):
        if modes not in ("both", mode):
            continue
        # fresh databases per pair: an instance's DIDs depend on the port it is given
        suffix = uuid.uuid4().hex[:8]
        urls = [await fresh_database(admin, f"confer_bench_{mode}_{x}_{suffix}") for x in "ab"]
        names = {database_name(url): side for url, side in zip(urls, "AB", strict=True)}
        split = CpuSplit(admin, names) if cpu else None
        try:
            with environment(CONFER_FEDERATION_BATCH_MAX_ITEMS=items, **budgets):
                results[mode] = await pair(
                    urls, messages if mode == "on" else 0, load, mode, spread, rate, split
                )
        finally:
            for url in urls:
                await drop_database(admin, database_name(url))
    where = "8 conversations" if spread else "one conversation"
    if rate:
        where += f", offered {rate:g} messages/s"
    for mode, (rate, p50, p99, n, elapsed) in results.items():
        print(
            f"throughput A→B, 8 concurrent senders, {where}, batches {mode:>3}: "
            f"{rate:6.1f} messages/s "
            f"({n} in {elapsed:.1f} s); POST → bob's WebSocket p50 {p50:.0f} ms, p99 {p99:.0f} ms"
        )
    if len(results) == 2:
        off, on = results["off"], results["on"]
        print(
            f"batches on / off: throughput x{on[0] / off[0]:.2f}, p50 latency x{on[1] / off[1]:.2f}"
        )
    figures: dict[str, object] = {
        "signatures_per_s": signs,
        "verifications_per_s": verifies,
        **{
            f"batches_{mode}": dict(
                zip(("messages_per_s", "p50_ms", "p99_ms", "messages", "seconds"), r, strict=True)
            )
            for mode, r in results.items()
        },
    }
    write_json(json_path, figures)


async def pair(
    urls: list[str],
    messages: int,
    load: int,
    tag: str,
    spread: bool = False,
    rate: float = 0.0,
    split: CpuSplit | None = None,
) -> tuple[float, float, float, int, float]:
    """Start A and B, measure (sequential latency when ``messages``, then) the load (in 8
    conversations when ``spread``), and with ``split`` the CPU spent per message on it."""
    async with (
        confer_process(free_port(), urls[0], lambda s: None) as a_url,
        confer_process(free_port(), urls[1], lambda s: None) as b_url,
        httpx.AsyncClient(base_url=a_url, timeout=60) as a,
        httpx.AsyncClient(base_url=b_url, timeout=60) as b,
    ):
        alice, bob = await account(a, "benchalice"), await account(b, "benchbob")
        auth = {"Authorization": f"Bearer {alice['access_token']}"}
        conv = await a.post(
            "/v1/conversations", headers=auth, json={"participant_did": bob["user"]["did"]}
        )
        path = f"/v1/conversations/{conv.json()['id']}/messages"
        senders = [(path, auth)] * 8
        if spread:
            senders = []
            for s in range(8):
                user = await account(a, f"benchsender{s}")
                headers = {"Authorization": f"Bearer {user['access_token']}"}
                own = await a.post(
                    "/v1/conversations",
                    headers=headers,
                    json={"participant_did": bob["user"]["did"]},
                )
                senders.append((f"/v1/conversations/{own.json()['id']}/messages", headers))
        ws_url = b_url.replace("http", "ws", 1) + "/v1/ws"
        async with websockets.connect(
            ws_url, subprotocols=[f"bearer.{bob['access_token']}"], max_size=None
        ) as ws:
            await ws.recv()
            latencies = []
            for i in range(messages):
                start = time.perf_counter()
                await a.post(path, headers=auth, json={"content": f"latency {i}"})
                while (await next_frame(ws))["type"] != "message.created":
                    pass
                latencies.append((time.perf_counter() - start) * 1000)
            if latencies:
                print(
                    f"end-to-end A→B (POST → bob's WebSocket), {messages} sequential: "
                    f"p50 {statistics.median(latencies):.1f} ms, "
                    f"p99 {percentile(latencies, 0.99):.1f} ms"
                )
            if split is not None:
                await split.start()
            result = await throughput(a, ws, senders, load, tag, rate)
            if split is not None:
                print(f"batches {tag}: " + await split.report(result[3]))
            return result


async def throughput(
    a: httpx.AsyncClient,
    ws: Any,
    senders: list[tuple[str, dict[str, str]]],
    load: int,
    tag: str,
    rate: float = 0.0,
) -> tuple[float, float, float, int, float]:
    """``senders`` (``(messages path, auth headers)`` each) post ``load`` messages at once,
    or together ``rate`` a second evenly spaced; ``(messages/s, p50 ms, p99 ms, n, s)`` from
    the first POST to the last arrival, latency from each POST to its arrival."""
    posted: dict[str, float] = {}
    per_sender = load // len(senders)

    async def sender(s: int) -> None:
        path, auth = senders[s]
        for i in range(per_sender):
            if rate:  # the n-th message of all is due n / rate seconds after the start
                due = start + (i * len(senders) + s) / rate
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            text = f"load {tag} {s} {i}"
            posted[text] = time.perf_counter()
            (await a.post(path, headers=auth, json={"content": text})).raise_for_status()

    start = time.perf_counter()
    running = asyncio.gather(*(sender(s) for s in range(len(senders))))
    latencies: list[float] = []
    async with asyncio.timeout(600):
        while len(latencies) < per_sender * len(senders):
            frame = await next_frame(ws)
            if frame["type"] != "message.created":
                continue
            sent = posted.pop(frame["data"].get("content"), None)
            if sent is not None:
                latencies.append((time.perf_counter() - sent) * 1000)
    await running
    elapsed = time.perf_counter() - start
    return (
        len(latencies) / elapsed,
        statistics.median(latencies),
        percentile(latencies, 0.99),
        len(latencies),
        elapsed,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--load", type=int, default=1000)
    parser.add_argument(
        "--spread", action="store_true", help="8 senders in 8 conversations, not one"
    )
    parser.add_argument(
        "--rate", type=float, default=0.0, help="messages/s the senders offer (0: at once)"
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="CPU ms per message of A, B, this client and their PostgreSQL backends (Linux)",
    )
    parser.add_argument(
        "--batches", choices=("both", "on", "off"), default="both", help="which pairs to run"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    asyncio.run(
        run(
            args.messages,
            args.load,
            args.spread,
            args.rate,
            cpu=args.cpu,
            modes=args.batches,
            json_path=args.json,
        )
    )
