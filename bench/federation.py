"""Federation round trips: signed SendMessage beside the same calls with an API key.

Two Confer instances run on loopback (uvicorn, real PostgreSQL). Alice's instance A signs
``SendMessage`` calls to Bob's (public) agent on instance B exactly as its outbox does
(RFC 9421 + Content-Digest, ``a2a.auth.SignatureAuth``, ``returnImmediately``); B verifies each
(DID cache, key, digest, nonce) and stores the message and its task. The unsigned baseline
sends the same JSON-RPC calls to the same agent with the bearer API key of carol, another user
of B (a stock A2A client). Bob is offline and lets no agent answer while he is away, so every
call of either kind is stored and held for him (``TASK_STATE_AUTH_REQUIRED``) and no agent runs
behind it: the ratio isolates signing, digest and verification (and the nonce and DID-cache
lookups they need). B's peer cache TTL is shortened so the steady state includes
revalidations; A counts the DID document fetches it serves (200 vs 304).

Usage: python bench/federation.py [--calls 600] [--concurrency 1] [--json FILE]
Needs CONFER_TEST_DATABASE_URL (a PostgreSQL admin DSN) or runs the embedded PostgreSQL.
``--json FILE`` also writes the figures to ``FILE``; ``CONFER_BENCH_CHECKOUT=DIR`` measures
another checkout's code (``bench/checkout.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
from checkout import CHECKOUT, write_json

from a2a.auth import SignatureAuth
from gateway import migrations
from gateway.app import create_app
from gateway.embedded import embedded_postgres_url, with_database
from tests.gateway.harness import free_port, loopback_settings, serve


class CountDIDFetches:
    """ASGI wrapper counting responses to ``*/did.json`` by status."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.statuses: Counter[int] = Counter()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("did.json"):
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.statuses[message["status"]] += 1
            await send(message)

        await self.app(scope, receive, counting_send)

    @property
    def state(self) -> Any:
        return self.app.state


@contextlib.asynccontextmanager
async def database(admin: str) -> AsyncIterator[str]:
    name = f"confer_bench_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(admin)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = with_database(admin, name)
    try:
        await asyncio.to_thread(migrations.upgrade, url)
        yield url
    finally:
        conn = await asyncpg.connect(admin)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


@contextlib.asynccontextmanager
async def instance(url: str, **overrides: Any) -> AsyncIterator[tuple[str, CountDIDFetches]]:
    port = free_port()
    settings = loopback_settings(url, port, **overrides)
    app = CountDIDFetches(create_app(settings))
    async with serve(app, port):
        yield f"http://localhost:{port}", app


def stored(task: dict[str, Any]) -> bool:
    """Whether ``task`` is the answer to a stored message no agent answered: held for its
    offline owner (``TASK_STATE_AUTH_REQUIRED``, see ``main``), or, as older checkouts answer
    a delivery they stored, ``TASK_STATE_COMPLETED`` with the gateway's own receipt (a data part
    naming the stored ``messageId``) rather than an agent's reply."""
    status = task["status"]
    if status["state"] == "TASK_STATE_AUTH_REQUIRED":
        return True
    parts = status.get("message", {}).get("parts", [])
    receipt = any("messageId" in part.get("data", {}) for part in parts)
    return bool(status["state"] == "TASK_STATE_COMPLETED" and receipt)


NO_PEER_BUDGETS = {
    "peer_rate_limit_domain": "1000000/minute",
    "peer_rate_limit_agent": "1000000/minute",
}
"""Settings that lift the per-peer budgets (600 calls a minute by default) above any load."""


def call(text: str) -> bytes:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    # returnImmediately, as Confer's own outbox sends (a2a.confer).
    params = {"message": message, "configuration": {"returnImmediately": True}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    return json.dumps(body, separators=(",", ":")).encode()


async def run_calls(
    client: httpx.AsyncClient, url: str, calls: int, concurrency: int, **kwargs: Any
) -> float:
    """Send ``calls`` SendMessage requests; returns round trips per second."""
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    queue = iter(range(calls))

    async def worker() -> None:
        for i in queue:
            response = await client.post(url, content=call(f"bench {i}"), headers=headers, **kwargs)
            result = response.json().get("result")
            if response.status_code != 200 or not stored(result["task"]):
                raise RuntimeError(f"unexpected answer: {response.status_code} {response.text}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - start)


async def main(calls: int, concurrency: int, json_path: str | None = None) -> None:
    admin = os.environ.get("CONFER_TEST_DATABASE_URL") or embedded_postgres_url(
        CHECKOUT / ".data" / "bench-pg"
    )
    async with (
        database(admin) as db_a,
        database(admin) as db_b,
        instance(db_a, db_pool_max=20) as (a_url, a_app),
        instance(db_b, db_pool_max=20, peer_cache_ttl_seconds=2, **NO_PEER_BUDGETS) as (
            b_url,
            b_app,
        ),
        httpx.AsyncClient(timeout=30) as client,
    ):
        a_state, b_state = a_app.state.confer, b_app.state.confer
        alice = (
            await client.post(
                f"{a_url}/v1/auth/register",
                json={"username": "alice", "password": "bench password"},
            )
        ).json()
        bob = (
            await client.post(
                f"{b_url}/v1/auth/register", json={"username": "bob", "password": "bench password"}
            )
        ).json()
        agent_id = bob["user"]["agent_did"].rsplit(":", 1)[1]
        # Bob is offline during the bench and his agent may not answer while he is away
        # (privacy.allow_offline_response is off): each call, signed or with the key, stores
        # the message and its task and holds it for him (TASK_STATE_AUTH_REQUIRED), so no
        # agent runs behind either path and the two differ only in how the caller is
        # authenticated.
        async with b_state.pool.acquire() as conn:  # allow signed peers without consent
            await conn.execute(
                """UPDATE agents SET policies_json = '{"default": "auto", "rules": []}'
                   WHERE id = $1""",
                agent_id,
            )
        # The key is carol's, a user of B, calling bob's public agent (a stock client of
        # someone else: held for bob like a peer's call), not bob's own.
        public = await client.patch(
            f"{b_url}/v1/agents/me",
            json={"is_public": True},
            headers={"Authorization": f"Bearer {bob['access_token']}"},
        )
        public.raise_for_status()
        carol = (
            await client.post(
                f"{b_url}/v1/auth/register",
                json={"username": "carol", "password": "bench password"},
            )
        ).json()
        key = (
            await client.post(
                f"{b_url}/v1/api-keys",
                json={"name": "bench"},
                headers={"Authorization": f"Bearer {carol['access_token']}"},
            )
        ).json()["key"]
        endpoint = f"{b_url}/agents/{agent_id}/a2a"
        signer = a_state.identity.signer_for(alice["user"]["did"])
        signed = SignatureAuth(signer)
        bearer = {"Authorization": f"Bearer {key}"}

        # Warm up both paths (first DID resolution, connection pools).
        await run_calls(client, endpoint, 20, 1, auth=signed)
        await run_bearer(client, endpoint, 20, 1, bearer)
        a_app.statuses.clear()
        rounds = []
        for _ in range(3):  # interleave, so both see the same machine conditions
            unsigned_rate = await run_bearer(client, endpoint, calls // 3, concurrency, bearer)
            signed_rate = await run_calls(client, endpoint, calls // 3, concurrency, auth=signed)
            rounds.append((signed_rate, unsigned_rate))
        signed_rate = sum(r[0] for r in rounds) / len(rounds)
        unsigned_rate = sum(r[1] for r in rounds) / len(rounds)
        print(f"calls per mode: {calls // 3 * 3}, concurrency: {concurrency}")
        print(f"signed SendMessage (RFC 9421, verified):  {signed_rate:8.1f} round trips/s")
        print(f"same calls with a bearer API key:         {unsigned_rate:8.1f} round trips/s")
        print(f"signed / unsigned throughput ratio:       {signed_rate / unsigned_rate:8.2f}")
        print(
            f"per-call overhead of signatures:          "
            f"{1000 / signed_rate - 1000 / unsigned_rate:8.2f} ms"
        )
        fetches = dict(a_app.statuses)
        print(
            f"DID document fetches by B in steady state: {sum(fetches.values())} "
            f"(by status: {fetches}; B's cache TTL 2 s)"
        )
        write_json(
            json_path,
            {
                "calls": calls // 3 * 3,
                "concurrency": concurrency,
                "signed_per_s": signed_rate,
                "unsigned_per_s": unsigned_rate,
                "signed_over_unsigned": signed_rate / unsigned_rate,
                "did_fetches": fetches,
            },
        )


async def run_bearer(
    client: httpx.AsyncClient, url: str, calls: int, concurrency: int, headers: dict[str, str]
) -> float:
    """Like run_calls, with a bearer API key instead of a signature."""
    transport_headers = dict(headers)

    class Bearer(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Any:
            request.headers.update(transport_headers)
            yield request

    return await run_calls(client, url, calls, concurrency, auth=Bearer())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.concurrency, args.json))
