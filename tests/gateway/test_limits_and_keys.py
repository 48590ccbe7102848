"""Inbound rate limits (in-process and Redis), the Redis nonce store, instance key rotation."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from gateway.db import create_pool
from gateway.services import keys as keys_service
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, next_event, run_instance

REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
    except OSError:
        return False
    return True


needs_redis = pytest.mark.skipif(not redis_up(), reason="no Redis on 127.0.0.1:6379")


async def post(b: Instance, peer: FakePeer, text: str = "hi", url: str | None = None) -> object:
    body = peer.rpc(text)
    headers = peer.signed_headers(url or f"{b.base_url}/users/bob/a2a", body)
    return await b.client.post("/users/bob/a2a", content=body, headers=headers)


async def messages(b: Instance) -> int:
    async with b.state.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM messages"))


@pytest.mark.parametrize(
    "limits",
    [
        {"peer_rate_limit_agent": "2/minute"},
        {"peer_rate_limit_domain": "2/minute", "peer_rate_limit_agent": "100/minute"},
    ],
    ids=["per-agent", "per-domain"],
)
async def test_a_peer_over_its_budget_gets_429_with_retry_after(database_url, limits) -> None:
    async with run_instance(database_url, **limits) as b, run_fake_peer() as peer:
        await b.register("bob")
        assert [(await post(b, peer)).status_code for _ in range(2)] == [200, 200]
        refused = await post(b, peer)
        assert refused.status_code == 429
        assert refused.json()["code"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert await messages(b) == 2


@needs_redis
@pytest.mark.redis
async def test_redis_shares_budgets_and_nonces_across_processes(make_database) -> None:
    database = await make_database()
    async with run_instance(database, redis_url=REDIS_URL, peer_rate_limit_agent="3/minute") as b1:
        # A second gateway process behind the same public URL, database and Redis.
        async with (
            run_instance(
                database,
                redis_url=REDIS_URL,
                peer_rate_limit_agent="3/minute",
                public_url=b1.base_url,
            ) as b2,
            run_fake_peer() as peer,
        ):
            await b1.register("bob")
            url = f"{b1.base_url}/users/bob/a2a"
            body = peer.rpc("once")
            headers = peer.signed_headers(url, body)
            assert (
                await b1.client.post("/users/bob/a2a", content=body, headers=headers)
            ).status_code == 200
            replay = await b2.client.post("/users/bob/a2a", content=body, headers=headers)
            assert replay.status_code == 401
            assert replay.json()["code"] == "signature_replayed"
            assert (await post(b2, peer, url=url)).status_code == 200
            # The budget is shared: 2 used, the refused replay did not count, 1 left.
            assert (await post(b1, peer, url=url)).status_code == 200
            over = await post(b2, peer, url=url)
            assert over.status_code == 429


async def test_key_rotation_keeps_old_signatures_valid_until_removed(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with run_instance(db_b) as b:
        bob = await b.register("bob")
        async with run_instance(db_a) as a:
            port = int(a.base_url.rsplit(":", 1)[1])
            alice = await a.register("alice")
            conversation = await alice.direct_with(bob.did)
            old_key = a.state.identity.signing_key
            async with bob.websocket() as first_ws:
                await alice.send(conversation["id"], "signed with key-1")
                delivered = (await next_event(first_ws, "message.created"))["data"]
                assert delivered["content"] == "signed with key-1"
        pool = await create_pool(db_a)
        try:
            assert await keys_service.rotate(pool) == "key-2"
            assert [
                (k.fragment, k.retired_at is not None) for k in await keys_service.list_keys(pool)
            ] == [
                ("key-1", True),
                ("key-2", False),
            ]
        finally:
            await pool.close()
        async with run_instance(db_a, port=port) as a, bob.websocket() as ws:
            assert a.state.identity.signing_key.fragment == "key-2"
            alice = User(a, alice.token, alice.profile)  # same account, restarted instance
            doc = (await a.client.get("/users/alice/did.json")).json()
            assert [m["id"].rsplit("#", 1)[1] for m in doc["verificationMethod"]] == [
                "key-1",
                "key-2",
            ]
            b.state.clock.offset = 30  # past the refetch interval: the unknown key-2 is fetched
            try:
                await alice.send(conversation["id"], "signed with key-2")
                received = (await next_event(ws, "message.created"))["data"]
                assert received["content"] == "signed with key-2"
                # A request signed with the retired key-1 still verifies.
                fake = FakePeer(a.base_url, key=old_key.private_key)
                body = fake.rpc("late key-1", sender=alice.did)
                url = f"{b.base_url}/users/bob/a2a"
                headers = fake.signed_headers(url, body, keyid=f"{alice.did}#key-1")
                late = await b.client.post("/users/bob/a2a", content=body, headers=headers)
                assert late.status_code == 200, late.text
            finally:
                b.state.clock.offset = 0
        pool = await create_pool(db_a)
        try:
            await keys_service.remove(pool, "key-1")
            assert [k.fragment for k in await keys_service.list_keys(pool)] == ["key-2"]
        finally:
            await pool.close()
        async with run_instance(db_a, port=port) as a:
            doc = (await a.client.get("/users/alice/did.json")).json()
            assert [m["id"].rsplit("#", 1)[1] for m in doc["verificationMethod"]] == ["key-2"]
            b.state.clock.offset = 120  # b's cache is stale: it refetches and drops key-1
            try:
                body = fake.rpc("removed key-1", sender=alice.did, message_id=uuid.uuid4().hex)
                # Signed "now" as b's shifted clock sees it, so only the key can fail.
                headers = fake.signed_headers(
                    url, body, keyid=f"{alice.did}#key-1", created=int(time.time()) + 120
                )
                removed = await b.client.post("/users/bob/a2a", content=body, headers=headers)
            finally:
                b.state.clock.offset = 0
            assert removed.status_code == 401
            assert removed.json()["code"] == "did_key_unknown"
