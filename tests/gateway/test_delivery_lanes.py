"""Several requests in flight to one destination, one per conversation (lane), each lane in
order; wakes that cannot lead anywhere claim nothing; a batch answered in part is completed,
every message stored once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from a2a.batch import batch_extension
from gateway.store import outbox_batches
from gateway.workers.delivery import DeliveryWorker
from tests.did.httpserver import LoopbackServer, SeenRequest, respond_json
from tests.gateway.harness import run_instance
from tests.gateway.test_delivery_idle import _peer
from tests.gateway.test_federation_batch import (
    _batch_capable,
    _eventually,
    _fetchval,
    _held,
    _nonces,
    _texts,
    _warm_up,
)

Route = Callable[[SeenRequest, asyncio.StreamWriter], Awaitable[None]]


def _texts_of(body: Any) -> list[str]:
    """The texts of a single call or a batch, in order."""
    calls = body if isinstance(body, list) else [body]
    return [c["params"]["message"]["parts"][0]["text"] for c in calls]


def _answer(body: Any) -> Any:
    """A JSON-RPC ``result`` for the call, or for every call of the batch."""
    if isinstance(body, list):
        return [{"jsonrpc": "2.0", "id": c["id"], "result": {"message": {}}} for c in body]
    return {"jsonrpc": "2.0", "id": body["id"], "result": {"message": {}}}


class Gate:
    """A peer endpoint that holds every request until ``release``; counts the most it held
    at once."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.holding = 0
        self.most = 0
        self.arrived: dict[str, list[str]] = {}

    def route(self) -> Route:
        async def endpoint(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
            body = json.loads(request.body)
            self.arrived.setdefault(request.path, []).extend(_texts_of(body))
            self.holding += 1
            self.most = max(self.most, self.holding)
            try:
                async with asyncio.timeout(60):
                    await self.open.wait()
            finally:
                self.holding -= 1
            await respond_json(_answer(body))(request, writer)

        return endpoint


async def test_two_conversations_to_one_destination_travel_at_once_each_in_order(
    make_database,
) -> None:
    """Two peers on one host, one conversation each: both conversations' requests are in
    flight at the same time; each conversation's messages arrive in order, exactly once,
    also those posted while the first requests were in flight."""
    async with LoopbackServer() as server, run_instance(await make_database()) as a:
        server.routes["/.well-known/agent-card.json"] = respond_json(
            {"capabilities": {"extensions": [batch_extension(10, 65536)]}}
        )
        gate = Gate()
        lisa = _peer(server, "lisa", server.url("/users/lisa/a2a"))
        mona = _peer(server, "mona", server.url("/users/mona/a2a"))
        server.routes["/users/lisa/a2a"] = gate.route()
        server.routes["/users/mona/a2a"] = gate.route()
        alice = await a.register("alice")
        to_lisa = (await alice.direct_with(lisa))["id"]
        to_mona = (await alice.direct_with(mona))["id"]
        gate.open.set()
        await alice.send(to_lisa, "lisa warm-up")
        await alice.send(to_mona, "mona warm-up")
        destination = f"localhost:{server.port}"

        async def declared() -> bool:
            sql = "SELECT batch_max_items FROM federation_destinations WHERE destination = $1"
            return await _fetchval(a, sql, destination) == 10

        async def idle() -> bool:
            sql = "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NULL"
            return int(await _fetchval(a, sql)) == 0

        await _eventually(declared)
        await _eventually(idle)
        gate.open.clear()
        gate.most = 0
        async with _held(a):  # both conversations' rows are claimed together
            for i in range(4):
                await alice.send(to_lisa, f"lisa {i}")
                await alice.send(to_mona, f"mona {i}")

        async def both_held() -> bool:
            return gate.holding == 2

        await _eventually(both_held)
        for i in range(4, 7):  # queued behind the requests in flight, in their lanes
            await alice.send(to_lisa, f"lisa {i}")
            await alice.send(to_mona, f"mona {i}")
        gate.open.set()
        await _eventually(idle)
        assert gate.most == 2
        for name in ("lisa", "mona"):
            want = [f"{name} warm-up"] + [f"{name} {i}" for i in range(7)]
            assert gate.arrived[f"/users/{name}/a2a"] == want


async def test_wakes_for_a_destination_with_no_free_request_claim_nothing(
    make_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its one request slot taken, new rows for a destination wake the worker without a
    claim; when the request ends, what queued meanwhile goes out, in order, once."""
    claims = 0
    claim = outbox_batches.claim_batches

    async def counted(*args: Any, **kwargs: Any) -> list[outbox_batches.Claimed]:
        nonlocal claims
        claims += 1
        return await claim(*args, **kwargs)

    wakes: list[int] = []  # per NOTIFY: how many claim decisions had been taken before it
    decisions: list[bool] = []
    wake, needed = DeliveryWorker.wake, DeliveryWorker._claim_needed

    def noted(self: DeliveryWorker, *args: Any) -> None:
        if len(args) == 4:  # a NOTIFY
            wakes.append(len(decisions))
        wake(self, *args)

    def decided(self: DeliveryWorker) -> bool:
        decisions.append(needed(self))
        return decisions[-1]

    monkeypatch.setattr(outbox_batches, "claim_batches", counted)
    monkeypatch.setattr(DeliveryWorker, "wake", noted)
    monkeypatch.setattr(DeliveryWorker, "_claim_needed", decided)
    async with (
        LoopbackServer() as server,
        run_instance(await make_database(), federation_batch_concurrency=1) as a,
    ):
        gate = Gate()
        lisa = _peer(server, "lisa", server.url("/users/lisa/a2a"))
        server.routes["/users/lisa/a2a"] = gate.route()
        alice = await a.register("alice")
        to_lisa = (await alice.direct_with(lisa))["id"]
        await alice.send(to_lisa, "first")

        async def held() -> bool:
            return gate.holding == 1

        await _eventually(held)
        claims_before, woken, decided_before = claims, len(wakes), len(decisions)
        for i in range(5):
            await alice.send(to_lisa, f"queued {i}")

        async def considered() -> bool:  # the worker looked again after the fifth NOTIFY
            return len(wakes) >= woken + 5 and len(decisions) > wakes[woken + 4]

        await _eventually(considered)
        assert not any(decisions[decided_before:])
        assert claims == claims_before  # nothing was claimable: no claim ran
        gate.open.set()

        async def delivered() -> bool:
            sql = "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NOT NULL"
            return int(await _fetchval(a, sql)) == 6

        await _eventually(delivered)
        assert gate.arrived["/users/lisa/a2a"] == ["first"] + [f"queued {i}" for i in range(5)]


async def test_a_batch_answered_in_part_is_completed_and_stored_once(
    make_database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver stores a whole batch but the answer that reaches the sender lacks half of
    its calls (a proxy cut it, a partial write): those rows are sent again, the receiver
    recognises their message ids, and every message is stored exactly once, in order."""
    trimmed: list[int] = []
    exchange = DeliveryWorker._exchange

    async def partial(self: DeliveryWorker, request: httpx.Request, *args: Any) -> Any:
        answer = await exchange(self, request, *args)
        response, body = answer
        if isinstance(response, httpx.Response) and not trimmed and body is not None:
            calls = json.loads(body)
            if isinstance(calls, list) and len(calls) >= 4:
                trimmed.append(len(calls))
                body = json.dumps(calls[::2]).encode()  # every other answer is lost
        return response, body

    monkeypatch.setattr(DeliveryWorker, "_exchange", partial)
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        conversation = (await alice.direct_with(bob.did))["id"]
        await _warm_up(a, b, alice, conversation)
        await _batch_capable(a, b)
        before = await _nonces(b, alice.did)
        async with _held(a):
            for i in range(8):
                await alice.send(conversation, f"part {i}")

        async def delivered() -> bool:
            sql = "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NULL"
            return int(await _fetchval(a, sql)) == 0

        await _eventually(delivered)
        assert trimmed == [8]
        assert await _nonces(b, alice.did) - before == 2  # the batch, then its unanswered half
        assert await _texts(b, bob, alice.did) == ["warm-up"] + [f"part {i}" for i in range(8)]
        retried = await _fetchval(
            a,
            """SELECT count(*) FROM federation_outbox
               WHERE attempts = 2 AND delivered_at IS NOT NULL""",
        )
        assert retried == 4
