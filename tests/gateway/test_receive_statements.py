"""How many statements (round trips to PostgreSQL) a received JSON-RPC batch costs per
message: a regression guard on counts, not on time (the time lives in ``bench/roundtrip.py``).

The batch runs through an in-process ASGI client against a served instance, so the count is
of the request's own connections (:mod:`tests.gateway.statements`), never of the background
workers'.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import run_instance
from tests.gateway.statements import counting

# What one message of a batch of 20 into one conversation costs now, the request's
# authentication, savepoints and commit included. Lower it when receiving gets cheaper.
PER_MESSAGE = 8


def _call(peer: FakePeer, text: str) -> dict[str, Any]:
    call = json.loads(peer.rpc(text, uuid.uuid4().hex))
    call["id"] = uuid.uuid4().hex
    return dict(call)


async def test_a_received_batch_costs_at_most_the_known_round_trips(make_database) -> None:
    async with run_instance(await make_database()) as b, run_fake_peer() as peer:
        await b.register("bob")
        url = f"{b.base_url}/users/bob/a2a"
        transport = httpx.ASGITransport(app=b.app)
        async with httpx.AsyncClient(transport=transport, base_url=b.base_url) as client:

            async def receive(texts: list[str]) -> list[str]:
                body = json.dumps([_call(peer, t) for t in texts]).encode()
                with counting(b.state.pool) as statements:
                    answer = await client.post(
                        "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
                    )
                assert answer.status_code == 200, answer.text
                assert all("result" in item for item in answer.json()), answer.text
                return statements

            await receive(["first contact"])  # the contact, the conversation, the caches
            statements = await receive([f"message {i}" for i in range(20)])
        assert len(statements) / 20 <= PER_MESSAGE, "\n".join(statements)
        print(f"{len(statements) / 20:.2f} statements per received message")
