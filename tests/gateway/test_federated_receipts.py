"""A read receipt crosses instances: Bob on B reads Alice's message and Alice's devices on A get
the receipt, her message's ``read_by`` names Bob's peer row, and a repeat changes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.gateway.harness import Instance, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


async def test_a_read_on_b_reaches_the_sender_on_a(pair) -> None:
    a, b = pair
    alice = await a.register("alice")
    bob = await b.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    async with bob.websocket() as ws:
        first = await alice.send(cid, "one")
        sent = await alice.send(cid, "two")
        await next_event(ws, "message.created", 30)
        copy = (await next_event(ws, "message.created", 30))["data"]
    assert copy["content"] == "two"
    # Bob answers, then reads up to his own answer: Alice's latest message is what he read
    answer = await bob.send(copy["conversation_id"], "ok")

    async with alice.websocket() as ws:
        read = await bob.request(
            "POST",
            f"/v1/conversations/{copy['conversation_id']}/read",
            json={"message_id": answer["id"]},
        )
        assert read.status_code == 200, read.text
        receipt = (await next_event(ws, "receipt", 30))["data"]
    assert receipt["conversation_id"] == cid
    assert receipt["message_id"] == sent["id"]
    assert receipt["did"] == bob.did

    async def read_by(message_id: str) -> list[str]:
        detail = await alice.request("GET", f"/v1/conversations/{cid}/messages/{message_id}")
        assert detail.status_code == 200, detail.text
        return [r["user_id"] for r in detail.json()["read_by"]]

    assert await read_by(sent["id"]) == [receipt["user_id"]]
    assert await read_by(first["id"]) == []  # the position moved; read_by names the latest

    # the same read again travels nowhere new, and an older one does not move A back
    again = await bob.request(
        "POST", f"/v1/conversations/{copy['conversation_id']}/read", json={"message_id": copy["id"]}
    )
    assert again.status_code == 200, again.text
    deadline = time.monotonic() + 30
    async with b.state.pool.acquire() as conn:
        while True:
            pending = await conn.fetchval(
                "SELECT count(*) FROM federation_outbox WHERE delivered_at IS NULL"
            )
            if pending == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        receipts = await conn.fetchval(
            """SELECT count(*) FROM federation_outbox
               WHERE payload_json #> '{message,metadata,confer,read}' IS NOT NULL"""
        )
    assert pending == 0 and receipts == 1
