"""Delivery that survives failure: B stops while A sends, B restarts, nothing lost or doubled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from did.document import build_did_document
from tests.did.httpserver import (
    LoopbackServer,
    Route,
    SeenRequest,
    raw_head,
    redirect,
    respond,
    respond_json,
)
from tests.gateway.harness import Instance, User, run_instance


async def fetch(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def wait_until(check: Any, within: float = 20.0) -> None:
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 (polls another process's database)
            await asyncio.sleep(0.1)


async def bobs_messages(b: Instance) -> list[str]:
    rows = await fetch(
        b, "SELECT content FROM messages WHERE sender_type = 'peer_agent' ORDER BY id"
    )
    return [r["content"] for r in rows]


async def test_stopped_peer_gets_every_message_once_in_order(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    sent = [f"message {i:02d}" for i in range(16)]
    async with run_instance(db_a, delivery_park_after_failures=2) as a:
        alice = await a.register("alice")
        async with run_instance(db_b) as b:
            port = int(b.base_url.rsplit(":", 1)[1])
            bob = await b.register("bob")
            conversation = await alice.direct_with(bob.did)
            for text in sent[:4]:
                await alice.send(conversation["id"], text)
            await wait_until(lambda: _has(b, 4))
        # B is down: A keeps sending; the destination fails, then is parked.
        for text in sent[4:]:
            await alice.send(conversation["id"], text)
        destination = f"localhost:{port}"

        async def parked() -> bool:
            rows = await fetch(
                a,
                "SELECT parked_at FROM federation_destinations WHERE destination = $1",
                destination,
            )
            return bool(rows and rows[0]["parked_at"])

        await wait_until(parked)
        pending = await fetch(
            a, "SELECT failed_at FROM federation_outbox WHERE delivered_at IS NULL"
        )
        assert len(pending) == 12 and all(r["failed_at"] is None for r in pending)

        async with run_instance(db_b, port=port) as b:
            bob = User(b, bob.token, bob.profile)
            # Bob writes to Alice: inbound contact from B resumes A's parked queue at once.
            [bob_conversation] = (await bob.request("GET", "/v1/conversations")).json()
            await bob.send(bob_conversation["id"], "I am back")
            await wait_until(lambda: _has(b, 16))
            assert await bobs_messages(b) == sent
            # Retries must not have duplicated anything, and no more deliveries are pending.
            await asyncio.sleep(0.5)
            assert await bobs_messages(b) == sent
        outbox = await fetch(a, "SELECT delivered_at, failed_at FROM federation_outbox")
        assert len(outbox) == 16 and all(r["delivered_at"] and not r["failed_at"] for r in outbox)
        [health] = await fetch(a, "SELECT failures, parked_at FROM federation_destinations")
        assert health == {"failures": 0, "parked_at": None}


async def _has(b: Instance, n: int) -> bool:
    return len(await bobs_messages(b)) >= n


async def test_a_parked_destination_recovers_through_a_probe(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_a, delivery_park_after_failures=1, delivery_probe_seconds=1.0) as a:
        alice = await a.register("alice")
        async with run_instance(db_b) as b:
            port = int(b.base_url.rsplit(":", 1)[1])
            bob = await b.register("bob")
            conversation = await alice.direct_with(bob.did)
        await alice.send(conversation["id"], "while you were out")
        await wait_until(
            lambda: _count(a, "SELECT 1 FROM federation_destinations WHERE parked_at IS NOT NULL")
        )
        async with run_instance(db_b, port=port) as b:
            await wait_until(lambda: _has(b, 1))
            assert await bobs_messages(b) == ["while you were out"]


async def _count(instance: Instance, sql: str) -> bool:
    return bool(await fetch(instance, sql))


# -- hostile peers -------------------------------------------------------------------------


def _hostile(peer: LoopbackServer, name: str, answer: Route) -> str:
    """Serve ``name``'s DID document on ``peer``, its A2A endpoint answering with ``answer``."""
    did = peer.did("users", name)
    peer.routes[f"/users/{name}/did.json"] = respond_json(
        build_did_document(
            did,
            [("key-1", Ed25519PrivateKey.generate().public_key())],
            services=[
                {
                    "id": f"{did}#a2a",
                    "type": "A2AService",
                    "serviceEndpoint": peer.url(f"/users/{name}/a2a"),
                }
            ],
        )
    )
    peer.routes[f"/users/{name}/a2a"] = answer
    return did


def _endless(delay: float) -> Route:
    """A 200 whose chunked JSON body never ends: 1 KiB every ``delay`` seconds."""

    async def route(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(
            raw_head(200, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        )
        writer.write(b"1\r\n[\r\n")
        while True:
            writer.write(b"400\r\n" + b"0," * 512 + b"\r\n")
            await writer.drain()
            await asyncio.sleep(delay)

    return route


HOSTILE_ANSWERS: dict[str, tuple[Route, str, str]] = {
    # name: (answer, final outcome, a phrase of the audited reason)
    "array": (respond(200, b"[]", "application/json"), "failed", "not an object"),
    "string": (respond(200, b'"ok"', "application/json"), "failed", "not an object"),
    "number": (respond(200, b"42", "application/json"), "failed", "not an object"),
    "invalid": (respond(200, b'{"result": ', "application/json"), "failed", "not valid JSON"),
    "html": (
        respond(200, b"<html><body>Hi</body></html>", "text/html"),
        "failed",
        "not valid JSON",
    ),
    "endless": (_endless(0.001), "failed", "answer over 65536 bytes"),
    "trickle": (_endless(0.5), "retry", "no complete answer within 2 s"),
}


async def test_hostile_peers_never_stop_deliveries_to_a_healthy_one(
    make_database, caplog: pytest.LogCaptureFixture
) -> None:
    """Strange answers are each classified (and audited); the healthy peer gets every message.

    Each hostile peer is its own server, so its own destination; a redirect to a private address
    is never followed (the canary behind it sees no request).
    """
    caplog.set_level(logging.ERROR, logger="gateway.workers.supervisor")
    db_a, db_b = await make_database(), await make_database()
    async with contextlib.AsyncExitStack() as stack:
        canary = await stack.enter_async_context(LoopbackServer())
        hostile: dict[str, tuple[str, str, str]] = {}  # did -> (name, outcome, reason)
        for name, (answer, outcome, reason) in HOSTILE_ANSWERS.items():
            peer = await stack.enter_async_context(LoopbackServer())
            hostile[_hostile(peer, name, answer)] = (name, outcome, reason)
        peer = await stack.enter_async_context(LoopbackServer())
        private = redirect(f"http://127.0.0.1:{canary.port}/users/bob/a2a", status=307)
        hostile[_hostile(peer, "redirect", private)] = ("redirect", "failed", "not followed")
        a = await stack.enter_async_context(
            run_instance(db_a, outbound_timeout_seconds=2.0, delivery_park_after_failures=100)
        )
        b = await stack.enter_async_context(run_instance(db_b))
        alice, bob = await a.register("alice"), await b.register("bob")
        with_bob = await alice.direct_with(bob.did)
        for did in hostile:
            conversation = await alice.direct_with(did)
            await alice.send(conversation["id"], "hello, stranger")
        sent = [f"to bob {i}" for i in range(5)]
        for text in sent:
            await alice.send(with_bob["id"], text)
            await asyncio.sleep(0.2)  # deliveries interleave with the hostile attempts
        await wait_until(lambda: _has(b, len(sent)), within=60)
        assert await bobs_messages(b) == sent

        async def classified() -> bool:
            endpoints = {r["endpoint"] for r in await _outbound_audit(a)}
            return all(
                any(e.endswith(f"/users/{n}/a2a") for e in endpoints) for n, *_ in hostile.values()
            )

        await wait_until(classified, within=60)
        audit = await _outbound_audit(a)
        for name, outcome, reason in hostile.values():
            mine = [r for r in audit if r["endpoint"].endswith(f"/users/{name}/a2a")]
            assert mine, name
            assert mine[0]["outcome"] == outcome, (name, mine[0])
            assert reason in mine[0]["reason"], (name, mine[0])
        assert canary.requests == []
        # After the hostile answers the worker still delivers, and it never crashed.
        await alice.send(with_bob["id"], "still here")
        await wait_until(lambda: _has(b, len(sent) + 1))
    assert not [r for r in caplog.records if "background worker" in r.getMessage()]


async def _outbound_audit(instance: Instance) -> list[dict[str, Any]]:
    """``details`` of every ``federation.outbound`` audit row, oldest first."""
    sql = "SELECT details_json FROM audit_log WHERE action = 'federation.outbound' ORDER BY id"
    return [r["details_json"] for r in await fetch(instance, sql)]


# -- the outbound address policy -----------------------------------------------------------

STRICT = {"allow_private_networks": False, "peer_cache_ttl_seconds": 3600}
LOOPBACK_EXEMPT = {**STRICT, "outbound_allowed_networks": ["127.0.0.0/8", "::1/128"]}


async def test_a_delivery_to_a_private_address_is_refused_audited_and_kept(make_database) -> None:
    """With the policy on, a peer whose name resolves to loopback is never posted to: the
    attempt is audited as refused and retried; exempting loopback delivers it, pinned to the
    checked address and still signed for the peer's real host."""
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_b) as b:
        bob = await b.register("bob")
        async with run_instance(db_a) as a:  # development: resolution of bob's DID works
            alice = await a.register("alice")
            conversation = await alice.direct_with(bob.did)
        async with run_instance(db_a, **STRICT) as a:
            alice = User(a, alice.token, alice.profile)
            await alice.send(conversation["id"], "through the front door only")

            async def refused() -> bool:
                return any(
                    "refused by the outbound address policy" in r["reason"]
                    for r in await _outbound_audit(a)
                )

            await wait_until(refused)
            [audit, *_] = await _outbound_audit(a)
            assert audit["outcome"] == "retry"
            assert "127.0.0.1, which is not a public address" in audit["reason"]
            assert await bobs_messages(b) == []
            [row] = await fetch(a, "SELECT delivered_at, failed_at FROM federation_outbox")
            assert row == {"delivered_at": None, "failed_at": None}
        async with run_instance(db_a, **LOOPBACK_EXEMPT) as a:
            await wait_until(lambda: _has(b, 1))
            assert await bobs_messages(b) == ["through the front door only"]

            async def recorded() -> bool:  # the sender records after the receiver answered
                [row] = await fetch(a, "SELECT delivered_at FROM federation_outbox")
                return row["delivered_at"] is not None

            await wait_until(recorded)
