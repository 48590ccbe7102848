"""JSON-RPC batches between instances (``urn:confer:a2a:ext:jsonrpc-batch:v1``): many
deliveries to one destination in one signed request, in order per conversation, exactly once;
single requests for peers that do not declare the extension; the inbound bounds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from a2a.batch import BATCH_EXTENSION, batch_extension
from tests.did.httpserver import LoopbackServer, SeenRequest, respond, respond_json
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.test_delivery_idle import _peer
from tests.gateway.test_delivery_status import deliveries


async def _fetchval(instance: Instance, sql: str, *args: Any) -> Any:
    async with instance.state.pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def _eventually(check: Any, within: float = 60.0) -> None:
    """Poll ``check()`` until it is true (generous deadline: the machine is shared)."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 (polls the database)
            await asyncio.sleep(0.1)


async def _batch_capable(a: Instance, b: Instance) -> None:
    """Wait until ``a`` has read ``b``'s card (the first delivery triggers it)."""
    destination = b.base_url.split("//", 1)[1]

    async def known() -> bool:
        value = await _fetchval(
            a,
            "SELECT card_checked_at FROM federation_destinations WHERE destination = $1",
            destination,
        )
        return value is not None

    await _eventually(known)


@contextlib.asynccontextmanager
async def _held(a: Instance) -> AsyncIterator[None]:
    """Hold ``a``'s delivery worker off (its claim reads ``federation_destinations``) while
    the body queues messages, so what is queued is claimed at once, in one batch."""
    async with a.state.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL lock_timeout = '30s'")
        await conn.execute("LOCK TABLE federation_destinations IN ACCESS EXCLUSIVE MODE")
        yield


async def _nonces(b: Instance, did: str) -> int:
    """How many signed requests ``b`` accepted from ``did`` (one nonce each)."""
    return int(
        await _fetchval(b, "SELECT count(*) FROM signature_nonces WHERE keyid LIKE $1", did + "#%")
    )


async def _texts(instance: Instance, user: User, peer_did: str) -> list[str]:
    """The texts of ``user``'s direct conversation with ``peer_did``, in stored order."""
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT m.content FROM messages m
               JOIN conversation_participants p ON p.conversation_id = m.conversation_id
               JOIN conversation_participants q ON q.conversation_id = m.conversation_id
               JOIN peer_agents pa ON pa.id = q.peer_id
               WHERE p.user_id = $1 AND pa.did = $2 ORDER BY m.id""",
            user.profile["id"],
            peer_did,
        )
    return [r["content"] for r in rows]


async def _warm_up(a: Instance, b: Instance, sender: User, conversation: str) -> None:
    """A first message: delivered, and ``b``'s card read."""
    await sender.send(conversation, "warm-up")
    await _batch_capable(a, b)

    async def delivered() -> bool:
        sql = "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NULL"
        return int(await _fetchval(a, sql)) == 0

    await _eventually(delivered)


async def test_batches_keep_per_conversation_order_and_arrive_once(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        alice = await a.register("alice")
        bob, carol = await b.register("bob"), await b.register("carol")
        to_bob = (await alice.direct_with(bob.did))["id"]
        to_carol = (await alice.direct_with(carol.did))["id"]
        await _warm_up(a, b, alice, to_bob)
        before = await _nonces(b, alice.did)

        async def burst(conversation: str, tag: str, count: int) -> None:
            for i in range(count):
                await alice.send(conversation, f"{tag} {i}")

        async with _held(a):
            await asyncio.gather(burst(to_bob, "bob", 30), burst(to_carol, "carol", 30))
        # More while the first batches are in flight: they queue behind, in order.
        await asyncio.gather(burst(to_bob, "bob-late", 15), burst(to_carol, "carol-late", 15))

        want_bob = ["warm-up"] + [f"bob {i}" for i in range(30)]
        want_bob += [f"bob-late {i}" for i in range(15)]
        want_carol = [f"carol {i}" for i in range(30)] + [f"carol-late {i}" for i in range(15)]

        async def arrived() -> bool:
            got = await _texts(b, bob, alice.did), await _texts(b, carol, alice.did)
            return len(got[0]) >= len(want_bob) and len(got[1]) >= len(want_carol)

        await _eventually(arrived)
        await asyncio.sleep(1)  # anything duplicated would arrive now
        assert await _texts(b, bob, alice.did) == want_bob
        assert await _texts(b, carol, alice.did) == want_carol
        # 90 messages in far fewer signed requests: they travelled in batches.
        assert await _nonces(b, alice.did) - before < 45
        pending = await _fetchval(
            a, "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NULL"
        )
        assert pending == 0


async def test_a_peer_without_the_extension_gets_single_requests(make_database) -> None:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database(), federation_batch_max_items=1) as b,
    ):
        card = (await b.client.get("/.well-known/agent-card.json")).json()
        uris = [e["uri"] for e in card["capabilities"]["extensions"]]
        assert BATCH_EXTENSION not in uris
        on_a = (await a.client.get("/.well-known/agent-card.json")).json()
        (declared,) = [e for e in on_a["capabilities"]["extensions"] if e["uri"] == BATCH_EXTENSION]
        assert declared["params"]["maxItems"] == a.settings.federation_batch_max_items

        alice, bob = await a.register("alice"), await b.register("bob")
        conversation = (await alice.direct_with(bob.did))["id"]
        await _warm_up(a, b, alice, conversation)
        before = await _nonces(b, alice.did)
        async with _held(a):
            for i in range(10):
                await alice.send(conversation, f"single {i}")

        async def arrived() -> bool:
            return len(await _texts(b, bob, alice.did)) >= 11

        await _eventually(arrived)
        assert await _texts(b, bob, alice.did) == ["warm-up"] + [f"single {i}" for i in range(10)]
        assert await _nonces(b, alice.did) - before == 10  # one request per message
        destination = b.base_url.split("//", 1)[1]
        assert (
            await _fetchval(
                a,
                "SELECT batch_max_items FROM federation_destinations WHERE destination = $1",
                destination,
            )
            is None
        )


async def test_a_bad_item_fails_alone_and_a_retried_batch_does_not_duplicate(
    make_database,
) -> None:
    async with (
        run_instance(await make_database(), max_message_chars=100_000) as a,
        run_instance(await make_database(), max_message_chars=200) as b,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        conversation = (await alice.direct_with(bob.did))["id"]
        await _warm_up(a, b, alice, conversation)
        before = await _nonces(b, alice.did)
        async with _held(a):
            sent = [await alice.send(conversation, "ok before")]
            sent.append(await alice.send(conversation, "too long " + "x" * 300))
            sent.append(await alice.send(conversation, "ok after"))

        async def settled() -> bool:
            done = await _fetchval(
                a,
                """SELECT count(*) FROM federation_outbox
                   WHERE message_id = ANY($1::text[])
                     AND (delivered_at IS NOT NULL OR failed_at IS NOT NULL)""",
                [m["id"] for m in sent],
            )
            return int(done) == 3

        await _eventually(settled)
        assert await _nonces(b, alice.did) - before == 1  # the three went as one batch
        statuses = [await deliveries(alice, conversation, m["id"]) for m in sent]
        states = [s[0]["state"] for s in statuses]
        assert states == ["delivered", "failed", "delivered"], statuses
        assert await _texts(b, bob, alice.did) == ["warm-up", "ok before", "ok after"]

        # The answer to that batch is lost: the rows are pending again and sent again, the
        # same calls with the same message ids. Each arrives once.
        async with a.state.pool.acquire() as conn:
            await conn.execute(
                """UPDATE federation_outbox
                   SET delivered_at = NULL, failed_at = NULL, next_attempt_at = now()
                   WHERE message_id = ANY($1::text[])""",
                [sent[0]["id"], sent[2]["id"]],
            )
            await conn.execute("NOTIFY confer_outbox")

        async def redelivered() -> bool:
            return (
                int(
                    await _fetchval(
                        a,
                        """SELECT count(*) FROM federation_outbox
                       WHERE message_id = ANY($1::text[]) AND delivered_at IS NOT NULL""",
                        [sent[0]["id"], sent[2]["id"]],
                    )
                )
                == 2
            )

        await _eventually(redelivered)
        assert await _nonces(b, alice.did) - before == 2
        assert await _texts(b, bob, alice.did) == ["warm-up", "ok before", "ok after"]


def _call(peer: FakePeer, text: str, rpc_id: Any) -> dict[str, Any]:
    call = json.loads(peer.rpc(text, uuid.uuid4().hex))
    call["id"] = rpc_id
    return dict(call)


async def test_inbound_batches_are_bounded(make_database) -> None:
    settings = {"federation_batch_max_items": 3, "federation_batch_max_bytes": 4096}
    async with run_instance(await make_database(), **settings) as b, run_fake_peer() as peer:
        bob = await b.register("bob")
        url = f"{b.base_url}/users/bob/a2a"

        async def post(payload: Any, signed: bool = True) -> Any:
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            headers = (
                peer.signed_headers(url, body)
                if signed
                else {"Content-Type": "application/json", "A2A-Version": "1.0"}
            )
            return await b.client.post("/users/bob/a2a", content=body, headers=headers)

        # Each call on its own: a good one, a nested array, an unknown method, not a call.
        good = _call(peer, "batched hello", "good")
        unknown = {"jsonrpc": "2.0", "id": "unknown", "method": "NoSuchMethod", "params": {}}
        answer = await post([good, [good], unknown])
        assert answer.status_code == 200, answer.text
        by_id = {item["id"]: item for item in answer.json()}
        assert "result" in by_id["good"]
        assert by_id[None]["error"]["code"] == -32600  # the nested array
        assert by_id["unknown"]["error"]["code"] == -32601
        assert len(answer.json()) == 3
        assert await _texts(b, bob, peer.did) == ["batched hello"]

        # The array itself refused: empty, too many calls, too large, unsigned, not JSON.
        for payload in ([], [_call(peer, f"n{i}", i) for i in range(4)]):
            refused = await post(payload)
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == -32600
        large = [_call(peer, "y" * 3000, 1), _call(peer, "z" * 3000, 2)]
        assert (await post(large)).json()["error"]["code"] == -32600
        unsigned = await post([_call(peer, "unsigned", 1)], signed=False)
        assert unsigned.status_code == 401
        broken = await post(b"[{")
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        assert await _texts(b, bob, peer.did) == ["batched hello"]


async def test_the_peer_budget_counts_every_call_of_a_batch(make_database) -> None:
    async with (
        run_instance(await make_database(), peer_rate_limit_agent="4/minute") as b,
        run_fake_peer() as peer,
    ):
        await b.register("bob")
        url = f"{b.base_url}/users/bob/a2a"

        async def post(calls: list[dict[str, Any]]) -> int:
            body = json.dumps(calls).encode()
            answer = await b.client.post(
                "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
            )
            return answer.status_code

        assert await post([_call(peer, "budget 1", 1), _call(peer, "budget 2", 2)]) == 200
        assert await post([_call(peer, "budget 3", 1), _call(peer, "budget 4", 2)]) == 200
        # Four calls counted (not two requests): the fifth is over the budget of 4.
        assert await post([_call(peer, "budget 5", 1)]) == 429


async def test_a_peer_that_declares_batches_but_refuses_one_gets_single_requests(
    make_database,
) -> None:
    """A card that declares the extension, an endpoint that answers an array with a 400: the
    batch's rows are retried one by one, and the destination gets single requests after."""
    async with LoopbackServer() as server, run_instance(await make_database()) as a:
        peer = _peer(server, "lisa", server.url("/users/lisa/a2a"))
        card = {"capabilities": {"extensions": [batch_extension(10, 65536)]}}
        server.routes["/.well-known/agent-card.json"] = respond_json(card)

        async def endpoint(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
            body = json.loads(request.body)
            if isinstance(body, list):
                answer = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
                await respond(400, json.dumps(answer).encode(), "application/json")(request, writer)
                return
            answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"message": {}}}
            await respond_json(answer)(request, writer)

        server.routes["/users/lisa/a2a"] = endpoint
        alice = await a.register("alice")
        conversation = (await alice.direct_with(peer))["id"]
        await alice.send(conversation, "warm-up")
        destination = f"localhost:{server.port}"

        async def declared() -> bool:
            sql = "SELECT batch_max_items FROM federation_destinations WHERE destination = $1"
            return await _fetchval(a, sql, destination) == 10

        await _eventually(declared)
        async with _held(a):
            for i in range(3):
                await alice.send(conversation, f"after {i}")

        async def delivered() -> bool:
            sql = "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NOT NULL"
            return int(await _fetchval(a, sql)) == 4

        await _eventually(delivered)
        bodies = [json.loads(r.body) for r in server.requests if r.path == "/users/lisa/a2a"]
        arrays = [b for b in bodies if isinstance(b, list)]
        assert len(arrays) == 1 and len(arrays[0]) == 3
        texts = [b["params"]["message"]["parts"][0]["text"] for b in bodies if isinstance(b, dict)]
        assert texts == ["warm-up", "after 0", "after 1", "after 2"]
        sql = "SELECT batch_max_items FROM federation_destinations WHERE destination = $1"
        assert await _fetchval(a, sql, destination) is None


async def test_an_inbound_batch_stores_each_good_call_once_in_order(make_database) -> None:
    """The calls share one transaction, each in a savepoint: a refused call among good ones
    stores nothing and spoils nothing, every good one is stored once, in order, with its task,
    audit row and stream event; the same batch sent again stores nothing twice."""
    async with run_instance(await make_database(), max_message_chars=200) as b:
        async with run_fake_peer() as peer:
            bob = await b.register("bob")
            url = f"{b.base_url}/users/bob/a2a"
            calls = [_call(peer, "ok 1", "a"), _call(peer, "x" * 300, "bad")]
            calls += [_call(peer, "ok 2", "b"), _call(peer, "ok 3", "c")]
            calls[3]["params"]["message"]["contextId"] = "another-context"  # another run

            async def post() -> dict[Any, dict[str, Any]]:
                body = json.dumps(calls).encode()
                answer = await b.client.post(
                    "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
                )
                assert answer.status_code == 200, answer.text
                return {item["id"]: item for item in answer.json()}

            async def count(sql: str) -> int:
                return int(await _fetchval(b, sql, bob.profile["id"]))

            first = await post()
            assert first["bad"]["error"]["code"] == -32602
            tasks = {k: first[k]["result"]["task"]["id"] for k in "abc"}
            assert await _texts(b, bob, peer.did) == ["ok 1", "ok 2", "ok 3"]
            events = (
                "SELECT count(*) FROM user_events e JOIN event_payloads p ON p.id = e.event_id"
                " WHERE user_id = $1 AND type = $2"
            )
            created = "message.created"
            assert int(await _fetchval(b, events, bob.profile["id"], created)) == 3
            audited = """SELECT count(*) FROM audit_log
                         WHERE user_id = $1 AND action = 'federation.inbound'"""
            assert await count(audited) == 3
            async with b.state.pool.acquire() as conn:
                rows = await conn.fetch(
                    """SELECT details_json, host(ip_address) AS ip FROM audit_log
                       WHERE user_id = $1 AND action = 'federation.inbound' ORDER BY id""",
                    bob.profile["id"],
                )
            # a row per stored call, in order, each naming its own task, from the caller's address
            assert [r["details_json"]["task_id"] for r in rows] == [tasks[k] for k in "abc"]
            assert {r["details_json"]["caller"] for r in rows} == {f"peer:{peer.did}"}
            assert {r["ip"] for r in rows} == {"127.0.0.1"}
            refused = """SELECT count(*) FROM audit_log
                         WHERE user_id = $1 AND action = 'federation.inbound.rejected'"""
            assert await count(refused) == 1

            again = await post()  # the answer was lost: the peer sends the batch again
            assert {k: again[k]["result"]["task"]["id"] for k in "abc"} == tasks
            assert await _texts(b, bob, peer.did) == ["ok 1", "ok 2", "ok 3"]
            assert int(await _fetchval(b, events, bob.profile["id"], created)) == 3
            assert await count("SELECT count(*) FROM a2a_tasks WHERE user_id = $1") == 3


async def test_a_strangers_batch_opens_one_request_and_holds_every_call(make_database) -> None:
    """A batch's calls share a transaction that reads the recipient's message request once:
    the first call of a stranger opens it, the later ones are held by it as well (no
    ``message.created`` for the recipient), and each call still gets its task."""
    async with run_instance(await make_database(), message_requests_default=True) as b:
        async with run_fake_peer() as peer:
            bob = await b.register("bob")
            url = f"{b.base_url}/users/bob/a2a"
            body = json.dumps([_call(peer, f"hello {i}", i) for i in range(3)]).encode()
            answer = await b.client.post(
                "/users/bob/a2a", content=body, headers=peer.signed_headers(url, body)
            )
            assert answer.status_code == 200, answer.text
            assert all("result" in item for item in answer.json()), answer.text
            assert await _texts(b, bob, peer.did) == ["hello 0", "hello 1", "hello 2"]
            async with b.state.pool.acquire() as conn:
                types = await conn.fetch(
                    "SELECT type FROM user_events e JOIN event_payloads p ON p.id = e.event_id"
                    " WHERE user_id = $1 ORDER BY seq",
                    bob.profile["id"],
                )
                requests = await conn.fetchval(
                    """SELECT count(*) FROM message_requests
                       WHERE user_id = $1 AND state = 'pending'""",
                    bob.profile["id"],
                )
            kinds = [r["type"] for r in types]
            assert kinds.count("message_request.created") == 1 and "message.created" not in kinds
            assert requests == 1
