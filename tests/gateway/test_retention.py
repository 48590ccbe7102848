"""Retention: every table stays bounded under repeated traffic, and rows still needed survive.

A real instance receives real signed messages from a FakePeer round after round while an
injected clock moves 10 h per round; outbox rows and permissions are written with the store
functions the services use. :func:`retain_once` runs after each round.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from ulid import ULID

from gateway.clock import Clock
from gateway.ids import new_id
from gateway.services.peers import KeyedLocks
from gateway.store import federation as federation_store
from gateway.store import permissions as permissions_store
from gateway.workers.retention import retain_once
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, run_instance

HOUR = 3600
STEP = timedelta(hours=10)
KEEP_EVENTS = 5
WINDOWS = {
    "ws_replay_window": KEEP_EVENTS,
    "retention_batch_size": 3,  # several batches per table and pass
    "retention_inbox_seconds": 24 * HOUR,
    "retention_outbox_delivered_seconds": 24 * HOUR,
    "retention_outbox_failed_seconds": 48 * HOUR,
    "retention_permissions_seconds": 24 * HOUR,
}


class MovableClock(Clock):
    """A clock the test moves forward."""

    def advance(self, by: timedelta) -> None:
        self.offset += by.total_seconds()


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[tuple[Instance, FakePeer, MovableClock]]:
    clock = MovableClock()
    async with run_instance(database_url, clock=clock, **WINDOWS) as b, run_fake_peer() as peer:
        await b.register("bob")
        yield b, peer, clock


async def signed(b: Instance, peer: FakePeer, clock: Clock, body: bytes) -> dict[str, Any]:
    url = f"{b.base_url}/users/bob/a2a"
    headers = peer.signed_headers(url, body, created=int(clock.time()))
    response = await b.client.post("/users/bob/a2a", content=body, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def value(b: Instance, sql: str, *args: Any) -> Any:
    async with b.state.pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def our_id(b: Instance, remote_id: str) -> str:
    sql = "SELECT message_id FROM federation_inbox WHERE remote_message_id = $1"
    return str(await value(b, sql, remote_id))


async def settled_head(b: Instance, user_id: str, at_least: int) -> int:
    """Bob's stream head once the fire-and-forget publishes of a round have landed."""
    sql = "SELECT head FROM user_streams WHERE user_id = $1"
    last, stable = -1, 0
    async with asyncio.timeout(30):
        while stable < 5:
            head = int(await value(b, sql, user_id) or 0)
            stable = stable + 1 if head == last and head >= at_least else 0
            last = head
            await asyncio.sleep(0.05)
    return last


async def outbox_traffic(b: Instance, peer_did: str, message_id: str, clock: Clock) -> None:
    """One delivered original send, one delivered edit notice and one failed delivery."""
    async with b.state.pool.acquire() as conn, conn.transaction():
        peer_id = await conn.fetchval("SELECT id FROM peer_agents WHERE did = $1", peer_did)
        for kind in ("original", "change", "failed"):
            sent_id = message_id if kind == "original" else new_id()
            row = await federation_store.insert_outbox(
                conn,
                destination="peer.invalid",
                endpoint="https://peer.invalid/a2a",
                sender_did=b.did,
                peer_id=peer_id,
                message_id=message_id,
                payload={"message": {"messageId": sent_id, "parts": [{"text": kind}]}},
            )
            if kind == "failed":
                await federation_store.mark_failed(conn, id=row, now=clock.now(), error="410")
            else:
                await federation_store.mark_delivered(conn, id=row, now=clock.now())


async def permission_traffic(b: Instance, user_id: str, clock: Clock) -> None:
    """One request left pending, one denied, one granted for always."""
    async with b.state.pool.acquire() as conn, conn.transaction():
        for decision in ("pending", "deny", "allow_always"):
            permission = await permissions_store.insert_permission(
                conn,
                id=new_id(),
                user_id=user_id,
                peer_id=None,
                action="ask",
                scope={},
                level="L1",
                requested_by=user_id,
                expires_at=clock.now() + timedelta(days=365),
            )
            if decision != "pending":
                await permissions_store.decide_permission(
                    conn,
                    id=permission.id,
                    decision=decision,
                    decision_scope="peer" if decision == "allow_always" else None,
                    decided_by=user_id,
                    now=clock.now(),
                )


async def test_every_table_stays_bounded_under_repeated_traffic(setup) -> None:
    b, peer, clock = setup
    bob_id = await value(b, "SELECT id FROM users WHERE username = 'bob'")
    first: list[str] = []
    events = 0
    for r in range(6):
        clock.advance(STEP)
        sent = [str(ULID()) for _ in range(3)]
        for remote_id in sent:
            await signed(b, peer, clock, peer.rpc(f"round {r}", message_id=remote_id))
        # the peer deletes one of them: its inbox row now only de-duplicates
        await signed(b, peer, clock, peer.rpc("(deleted)", delete={"messageId": sent[2]}))
        first = first or sent
        await outbox_traffic(b, peer.did, await our_id(b, sent[0]), clock)
        await permission_traffic(b, bob_id, clock)
        events = await settled_head(b, bob_id, events + 4)

        deleted = await retain_once(b.state.pool, clock, b.settings)

        assert set(deleted) == {
            "signature_nonces",
            "federation_inbox",
            "federation_outbox",
            "a2a_push_outbox",
            "user_events",
            "event_payloads",
            "permissions",
            "password_resets",
        }
        within = {"24h": min(r + 1, 3), "48h": min(r + 1, 5)}  # rounds 10 h apart
        # this round's four signatures are inside their window; older ones are gone
        assert await value(b, "SELECT count(*) FROM signature_nonces") == 4
        # two visible messages per round keep their id maps; deleted ones stay 24 h
        inbox = await value(b, "SELECT count(*) FROM federation_inbox")
        assert inbox == 2 * (r + 1) + within["24h"]
        # original sends stay for later edits; notices 24 h, failures 48 h
        outbox = await value(b, "SELECT count(*) FROM federation_outbox")
        assert outbox == (r + 1) + within["24h"] + within["48h"]
        # pending requests and standing grants stay; denials 24 h
        permissions = await value(b, "SELECT count(*) FROM permissions")
        assert permissions == 2 * (r + 1) + within["24h"]
        kept = await value(b, "SELECT count(*) FROM user_events WHERE user_id = $1", bob_id)
        newest = await value(b, "SELECT max(seq) FROM user_events WHERE user_id = $1", bob_id)
        assert kept == min(events, KEEP_EVENTS) and newest == events
        # every payload left is one a stream row still names, with the count of those rows
        payloads = await value(b, "SELECT count(*) FROM event_payloads")
        named = await value(b, "SELECT count(DISTINCT event_id) FROM user_events")
        assert payloads == named
        miscounted = """SELECT count(*) FROM event_payloads p
                        WHERE refs <> (SELECT count(*) FROM user_events WHERE event_id = p.id)"""
        assert await value(b, miscounted) == 0

    # Days later the peer's ids of its first, still visible messages still map to our copies:
    # an edit reaches it, and a reply threads under it.
    clock.advance(STEP)
    original = await our_id(b, first[0])
    edit = peer.rpc("edited", edit={"messageId": first[0], "version": 2})
    await signed(b, peer, clock, edit)
    content = "SELECT content FROM messages WHERE id = $1"
    assert await value(b, content, original) == "edited"
    reply_id = str(ULID())
    await signed(b, peer, clock, peer.rpc("a reply", message_id=reply_id, inReplyTo=first[1]))
    in_reply_to = await value(
        b, "SELECT in_reply_to FROM messages WHERE id = $1", await our_id(b, reply_id)
    )
    assert in_reply_to == await our_id(b, first[1])
    # a late retry of the deleted first-round message (its inbox row is gone) stores nothing
    messages = await value(b, "SELECT count(*) FROM messages")
    await signed(b, peer, clock, peer.rpc("round 0", message_id=first[2]))
    assert await value(b, "SELECT count(*) FROM messages") == messages
    # and the peer directory holds no lock for any of the DIDs it resolved
    assert len(b.state.peers._locks) == 0


async def test_keyed_locks_exclude_per_key_and_forget_unused_keys() -> None:
    locks = KeyedLocks()
    inside: dict[str, int] = {}
    most = 0

    async def work(key: str) -> None:
        nonlocal most
        async with locks.hold(key):
            inside[key] = inside.get(key, 0) + 1
            most = max(most, inside[key])
            await asyncio.sleep(0.01)
            inside[key] -= 1

    await asyncio.gather(*(work(f"did:web:peer{i % 50}") for i in range(500)))
    assert most == 1  # one holder per key at a time
    assert len(locks) == 0  # and nothing kept for 50 keys no longer in use

    # a waiter cancelled while it waits leaves nothing behind either
    async with locks.hold("did:web:busy"):
        waiter = asyncio.create_task(work("did:web:busy"))
        await asyncio.sleep(0.01)
        assert len(locks) == 1
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
    assert len(locks) == 0
