"""Benchmark: a message from alice@A to bob@B across two real Confer processes on loopback.

Measures, in one run:
- sign + verify cost of one RFC 9421 request (our a2a library, in-process), per second;
- end-to-end latency: POST on A → signed A2A delivery → verified and stored on B → event on
  bob's WebSocket (p50/p99 over sequential sends);
- throughput: messages per second delivered to bob's WebSocket with 8 concurrent senders.

Usage: python bench/roundtrip.py [--messages 200]   (needs CONFER_DATABASE_URL or uses the
embedded PostgreSQL under .data/). Loopback only; bounded loops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import time
from pathlib import Path

import httpx
import websockets
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a.signatures import parse_signature, sign_request, verify_request
from gateway.demo import confer_process, default_databases
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


async def run(messages: int) -> None:
    settings = Settings()
    urls = await default_databases(settings.database_url, Path(".data"))
    signs, verifies = signing_rate()
    print(f"sign+verify in-process: {signs:.0f} signatures/s, {verifies:.0f} verifications/s")
    async with (
        confer_process(free_port(), urls[0], lambda s: None) as a_url,
        confer_process(free_port(), urls[1], lambda s: None) as b_url,
        httpx.AsyncClient(base_url=a_url, timeout=30) as a,
        httpx.AsyncClient(base_url=b_url, timeout=30) as b,
    ):
        alice, bob = await account(a, "benchalice"), await account(b, "benchbob")
        auth = {"Authorization": f"Bearer {alice['access_token']}"}
        conv = await a.post(
            "/v1/conversations", headers=auth, json={"participant_did": bob["user"]["did"]}
        )
        path = f"/v1/conversations/{conv.json()['id']}/messages"
        ws_url = b_url.replace("http", "ws", 1) + "/v1/ws"
        async with websockets.connect(
            ws_url, subprotocols=[f"bearer.{bob['access_token']}"], max_size=None
        ) as ws:
            await ws.recv()
            latencies = []
            for i in range(messages):
                start = time.perf_counter()
                await a.post(path, headers=auth, json={"content": f"latency {i}"})
                while json.loads(await ws.recv())["type"] != "message.created":
                    pass
                latencies.append((time.perf_counter() - start) * 1000)
            latencies.sort()
            p50 = statistics.median(latencies)
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            print(
                f"end-to-end A→B (POST → bob's WebSocket), {messages} sequential: "
                f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"
            )

            async def sender(n: int) -> None:
                for i in range(n):
                    await a.post(path, headers=auth, json={"content": f"load {i}"})

            start = time.perf_counter()
            senders = asyncio.gather(*(sender(messages // 8) for _ in range(8)))
            received = 0
            while received < (messages // 8) * 8:
                if json.loads(await ws.recv())["type"] == "message.created":
                    received += 1
            await senders
            elapsed = time.perf_counter() - start
            print(
                f"throughput A→B, 8 concurrent senders: {received / elapsed:.0f} messages/s "
                f"({received} in {elapsed:.2f} s)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    asyncio.run(run(parser.parse_args().messages))
