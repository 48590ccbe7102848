"""Send throughput of one busy conversation: one sender, 16 posts in flight, one recipient.

Run: ``python bench/send.py [--posts 2000] [--baseline /path/to/other/checkout]``
(PostgreSQL as ``bench/databases.py`` picks it: CONFER_BENCH_DATABASE_URL, the local server or
the embedded one; each server gets a scratch database, created and dropped). Everything runs
on loopback.

alice posts into her direct conversation with bob (whose WebSocket is open, so each post is
stored and fanned out) with ``--in-flight`` requests at once. Per server it prints posts per
second, p50/p99 latency of a POST, the server process's CPU time per post (user + system,
from ``/proc``; PostgreSQL's own CPU is not in it) and this bench process's own (the client's:
with httpx it is two to three times the server's, and on a machine of two cores the client is
what bounds the rate and the latency). ``--client raw`` posts over keep-alive connections of
its own, each request written and its response read by hand, at a fraction of httpx's CPU per
request: what the server itself sustains shows. With ``--baseline`` a second checkout's
server (same venv, its own code) runs in the same invocation, alternating ``--rounds`` times
with this one, and the ratios are printed: the machine may be shared, so compare ratios of
one run, not absolute figures across runs. (Both servers' databases are migrated and their
users registered by the code this bench runs with; ``bench/table.py`` instead runs each
checkout in a bench process of its own, ``CONFER_BENCH_CHECKOUT``, as ``bench/checkout.py``
describes.) ``--json FILE`` also writes the means to ``FILE``. Loops are bounded; nothing
leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from checkout import CHECKOUT, write_json
from fanout import (  # the bench directory is no package: its modules are top-level here
    SERVER,
    free_port,
    open_sockets,
    percentile,
    register,
    scratch_database,
    wait_http,
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far, in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def server(checkout: str, env: dict[str, str]) -> AsyncIterator[int]:
    """A ``confer serve`` of ``checkout``'s code (its own directory first on the path)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, env={**os.environ, **env}, cwd=checkout
    )
    try:
        yield proc.pid
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def one_server(
    checkout: str, posts: int, in_flight: int, client_kind: str = "httpx"
) -> dict[str, float]:
    async with scratch_database() as url:
        port = free_port()
        public_url = f"http://localhost:{port}"
        env = {
            "CONFER_DATABASE_URL": url,
            "CONFER_PORT": str(port),
            "CONFER_PUBLIC_URL": public_url,
            "CONFER_MIGRATE_ON_START": "false",
            "CONFER_MESSAGE_REQUESTS_DEFAULT": "false",
        }
        async with server(checkout, env) as pid:
            base = f"http://127.0.0.1:{port}"
            await wait_http(base + "/healthz")
            alice, bob = await register(url, public_url, ["alice", "bob"])
            return await _measure(base, pid, alice, bob, posts, in_flight, client_kind)


class RawConnection:
    """One keep-alive HTTP/1.1 connection posting JSON by hand (``--client raw``): no client
    library between the bench and the socket, so the bench's own CPU per request stays small."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, base: str) -> RawConnection:
        host, port = base.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def post(self, path: str, body: bytes, headers: str) -> tuple[int, bytes]:
        """POST ``body`` (JSON) to ``path`` with the ``headers`` lines; (status, body)."""
        self.writer.write(
            f"POST {path} HTTP/1.1\r\n{headers}content-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return int(head.split(b" ", 2)[1]), await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def _measure(
    base: str,
    pid: int,
    alice: dict[str, Any],
    bob: dict[str, Any],
    posts: int,
    in_flight: int,
    client_kind: str = "httpx",
) -> dict[str, float]:
    h = {"Authorization": f"Bearer {alice['access_token']}"}
    limits = httpx.Limits(max_connections=in_flight * 2)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        conv = await client.post(
            "/v1/conversations", json={"participant_did": bob["user"]["did"]}, headers=h
        )
        conv.raise_for_status()
        path = f"/v1/conversations/{conv.json()['id']}/messages"
        [ws] = await open_sockets(base.replace("http", "ws") + "/v1/ws", [bob["access_token"]])
        for i in range(50):  # warm the statement caches and the connections
            (await client.post(path, json={"content": f"warm {i}"}, headers=h)).raise_for_status()
        latencies: list[float] = []
        queue = iter(range(posts))

        async def sender() -> None:
            for j in queue:
                start = time.perf_counter()
                r = await client.post(path, json={"content": f"m{j}"}, headers=h)
                r.raise_for_status()
                latencies.append((time.perf_counter() - start) * 1000)

        raw_headers = (
            f"host: {base.removeprefix('http://')}\r\nauthorization: {h['Authorization']}\r\n"
        )
        connections = (
            [await RawConnection.open(base) for _ in range(in_flight)]
            if client_kind == "raw"
            else []
        )

        async def raw_sender(connection: RawConnection) -> None:
            for j in queue:
                start = time.perf_counter()
                status, body = await connection.post(
                    path, json.dumps({"content": f"m{j}"}).encode(), raw_headers
                )
                if status != 201:
                    raise RuntimeError(f"{status}: {body[:200]!r}")
                latencies.append((time.perf_counter() - start) * 1000)

        senders = [raw_sender(c) for c in connections] or [sender() for _ in range(in_flight)]
        cpu, own = cpu_seconds(pid), time.process_time()
        start = time.perf_counter()
        await asyncio.gather(*senders)
        elapsed = time.perf_counter() - start
        cpu, own = cpu_seconds(pid) - cpu, time.process_time() - own
        for connection in connections:
            connection.close()
        await ws.close()
    return {
        "posts_per_s": posts / elapsed,
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "cpu_ms_per_post": cpu * 1000 / posts,
        "client_cpu_ms_per_post": own * 1000 / posts,
    }


def _mean(results: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.mean(r[k] for r in results) for k in results[0]}


async def main(args: argparse.Namespace) -> None:
    checkouts = {"this": str(CHECKOUT), **({"baseline": args.baseline} if args.baseline else {})}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for round_ in range(args.rounds):
        for name, checkout in checkouts.items():
            result = await one_server(checkout, args.posts, args.in_flight, args.client)
            print(f"round {round_ + 1} {name}: {result}", flush=True)
            results[name].append(result)
    means = {name: _mean(r) for name, r in results.items()}
    print(
        f"\n| {args.posts} posts, one conversation, {args.in_flight} in flight, {args.client} "
        "| posts/s | p50 ms | p99 ms | server CPU ms/post | bench client CPU ms/post |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in means.items():
        print(
            f"| {name} ({checkouts[name]}) | {m['posts_per_s']:,.0f} | {m['p50_ms']:.1f} "
            f"| {m['p99_ms']:.1f} | {m['cpu_ms_per_post']:.2f} "
            f"| {m['client_cpu_ms_per_post']:.2f} |"
        )
    if "baseline" in means:
        t, b = means["this"], means["baseline"]
        print(
            f"| ratio this/baseline | {t['posts_per_s'] / b['posts_per_s']:.2f}x "
            f"| {t['p50_ms'] / b['p50_ms']:.2f}x | {t['p99_ms'] / b['p99_ms']:.2f}x "
            f"| {t['cpu_ms_per_post'] / b['cpu_ms_per_post']:.2f}x |"
        )
    write_json(args.json, means)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", help="another checkout whose server runs alongside")
    parser.add_argument(
        "--client",
        choices=["httpx", "raw"],
        default="httpx",
        help="httpx (as ever), or keep-alive connections written by hand (little client CPU)",
    )
    parser.add_argument("--json", help="also write the means per checkout to this file")
    asyncio.run(main(parser.parse_args()))
