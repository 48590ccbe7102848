"""Budgets for DID resolution: per host and per DID over time, negative caching of failures
(malformed documents, unreachable hosts) — signed requests to a real instance on loopback from
DIDs on loopback DID hosts that count every fetch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a.signatures import sign_request
from did.document import build_did_document
from did.web import did_from_base_url
from tests.gateway.harness import Instance, free_port, run_instance, serve


@dataclass
class DIDHost:
    """A loopback host serving ``/users/<name>/did.json`` for any name, one key for all;
    names starting with ``bad`` get a document that fails validation."""

    base_url: str
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    fetches: Counter[str] = field(default_factory=Counter)

    def did(self, name: str) -> str:
        return did_from_base_url(self.base_url, "users", name)

    def document(self, name: str) -> dict[str, Any]:
        did = self.did(name)
        if name.startswith("bad"):
            return {"id": did, "authentication": ["#nowhere"]}
        return build_did_document(
            did,
            [("key-1", self.key.public_key())],
            services=[
                {
                    "id": f"{did}#a2a",
                    "type": "A2AService",
                    "serviceEndpoint": f"{self.base_url}/users/{name}/a2a",
                }
            ],
        )


@contextlib.asynccontextmanager
async def run_did_host() -> AsyncIterator[DIDHost]:
    port = free_port()
    host = DIDHost(f"http://localhost:{port}")

    async def document(request: Request) -> Response:
        name = request.path_params["name"]
        host.fetches[name] += 1
        return JSONResponse(host.document(name), media_type="application/did+json")

    app = Starlette(routes=[Route("/users/{name}/did.json", document)])
    async with serve(app, port):
        yield host


@contextlib.asynccontextmanager
async def run_dead_host() -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP port that accepts and closes every connection at once; counts connections."""
    connections = [0]

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections[0] += 1
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://localhost:{port}", connections
    finally:
        server.close()
        await server.wait_closed()


async def send_signed(
    instance: Instance, did: str, key: Ed25519PrivateKey, to: str = "bob"
) -> httpx.Response:
    """A signed ``SendMessage`` from ``did`` (keyid ``#key-1``) to the local user ``to``."""
    url = f"{instance.base_url}/users/{to}/a2a"
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "parts": [{"text": "hello"}],
                    "metadata": {"confer": {"sender": did}},
                }
            },
        }
    ).encode()
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    now = int(time.time())
    headers |= sign_request(
        method="POST",
        url=url,
        headers=headers,
        body=body,
        private_key=key,
        keyid=f"{did}#key-1",
        created=now,
        expires=now + 60,
        nonce=uuid.uuid4().hex,
    )
    return await instance.client.post(url, content=body, headers=headers)


async def test_many_dids_of_one_host_spend_its_budget_not_one_fetch_each(database_url) -> None:
    async with (
        run_instance(
            database_url, did_fetch_budget_host="5/minute", did_fetch_budget_did="2/minute"
        ) as instance,
        run_did_host() as host,
    ):
        await instance.register("bob")
        answers = [await send_signed(instance, host.did(f"u{i}"), host.key) for i in range(12)]
        statuses = [a.status_code for a in answers]
        assert statuses == [200] * 5 + [401] * 7, [a.text for a in answers]
        assert sum(host.fetches.values()) == 5
        refused = answers[-1].json()
        assert refused["code"] == "did_unresolvable" and "budget" in refused["detail"]
        # The five known peers still get in: their documents are cached, nothing is fetched.
        for i in range(5):
            assert (await send_signed(instance, host.did(f"u{i}"), host.key)).status_code == 200
        assert sum(host.fetches.values()) == 5


async def test_a_malformed_document_and_an_unreachable_host_are_cached_failures(
    database_url,
) -> None:
    async with (
        run_instance(database_url, did_failure_ttl_seconds=60) as instance,
        run_did_host() as host,
        run_dead_host() as (dead_url, connections),
    ):
        await instance.register("bob")
        bad = [await send_signed(instance, host.did("bad-doc"), host.key) for _ in range(6)]
        assert {a.status_code for a in bad} == {401}
        assert {a.json()["code"] for a in bad} == {"did_document_invalid"}
        assert host.fetches["bad-doc"] == 1

        dead = [
            await send_signed(instance, did_from_base_url(dead_url, "users", f"d{i}"), host.key)
            for i in range(6)
        ]
        assert {a.status_code for a in dead} == {401}
        assert {a.json()["code"] for a in dead} == {"did_unresolvable"}
        assert "unreachable" in dead[-1].json()["detail"]
        assert connections[0] == 1  # one connection for six DIDs of the host


async def test_a_dids_own_budget_bounds_revalidation_and_keeps_the_cached_key(
    database_url,
) -> None:
    async with (
        run_instance(
            database_url, did_fetch_budget_did="2/minute", peer_cache_ttl_seconds=1
        ) as instance,
        run_did_host() as host,
    ):
        await instance.register("bob")
        for _ in range(5):
            answer = await send_signed(instance, host.did("chatty"), host.key)
            assert answer.status_code == 200, answer.text
            await asyncio.sleep(1.1)  # the cached document is stale at every next request
        assert host.fetches["chatty"] == 2
        # An unknown key would force a refetch: the spent budget refuses it, not a fetch.
        other = Ed25519PrivateKey.generate()
        refused = await send_signed(instance, host.did("chatty"), other)
        assert refused.status_code == 401
        assert host.fetches["chatty"] == 2
