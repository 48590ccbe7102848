"""Edits and deletes follow a federated message to the other instance (real HTTP, signed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.store import federation as federation_store
from tests.gateway.harness import Instance, User, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


async def rows(instance: Instance, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def delivered(instance: Instance, count: int) -> None:
    """Wait until ``count`` outbox rows of ``instance`` are delivered."""
    sql = "SELECT count(*) AS n FROM federation_outbox WHERE delivered_at IS NOT NULL"
    for _ in range(200):
        if (await rows(instance, sql))[0]["n"] >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(await rows(instance, "SELECT * FROM federation_outbox"))


async def conversation_with(a: Instance, b: Instance) -> tuple[User, User, str]:
    alice, bob = await a.register("alice"), await b.register("bob")
    conversation = await alice.direct_with(bob.did)
    return alice, bob, conversation["id"]


async def test_edit_then_delete_reach_the_peer(pair) -> None:
    a, b = pair
    alice, bob, cid = await conversation_with(a, b)
    async with bob.websocket() as bob_ws:
        sent = await alice.send(cid, "meet at 10")
        copy = (await next_event(bob_ws, "message.created"))["data"]
        bob_cid = copy["conversation_id"]
        path = f"/v1/conversations/{cid}/messages/{sent['id']}"
        edited = await alice.request("PATCH", path, json={"content": "meet at 11", "version": 1})
        assert edited.status_code == 200, edited.text
        event = (await next_event(bob_ws, "message.edited"))["data"]
        assert event["id"] == copy["id"] and event["content"] == "meet at 11"
        assert event["version"] == 2
        detail = await bob.request("GET", f"/v1/conversations/{bob_cid}/messages/{copy['id']}")
        assert detail.json()["version"] == 2
        assert [v["content"] for v in detail.json()["previous_versions"]] == ["meet at 10"]

        assert (await alice.request("DELETE", path)).status_code == 204
        tombstone = (await next_event(bob_ws, "message.deleted"))["data"]
    assert tombstone["id"] == copy["id"] and tombstone["conversation_id"] == bob_cid
    [row] = await rows(b, "SELECT content, deleted_at FROM messages WHERE id = $1", copy["id"])
    assert row["content"] is None and row["deleted_at"] is not None
    assert await rows(b, "SELECT * FROM message_versions") == []
    listing = await bob.request("GET", f"/v1/conversations/{bob_cid}/messages")
    assert listing.json()["items"] == []
    gone = await bob.request("GET", f"/v1/conversations/{bob_cid}/messages/{copy['id']}")
    assert gone.status_code == 404
    # The stream replay shows only the tombstone: the text is gone from B's event log too.
    events = await rows(b, "SELECT data_json::text AS d FROM event_payloads")
    assert not any("meet at" in e["d"] for e in events)


async def test_replayed_changes_are_idempotent_and_only_the_sender_may_change(pair) -> None:
    a, b = pair
    alice, bob, cid = await conversation_with(a, b)
    carol = await a.register("carol")
    sent = await alice.send(cid, "v1")
    await delivered(a, 1)
    path = f"/v1/conversations/{cid}/messages/{sent['id']}"
    edited = await alice.request("PATCH", path, json={"content": "v2", "version": 1})
    assert edited.status_code == 200
    await delivered(a, 2)
    [copy] = await rows(b, "SELECT id, content FROM messages WHERE sender_type = 'peer_agent'")
    assert copy["content"] == "v2"
    # The same edit delivered again (a retry after a lost answer) changes nothing.
    edits = (
        "SELECT * FROM federation_outbox "
        "WHERE payload_json->'message'->'metadata'->'confer' ? 'edit'"
    )
    [edit_row] = await rows(a, edits)
    async with a.state.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO federation_outbox (id, destination, endpoint, sender_did, peer_id,
                                              message_id, payload_json)
               SELECT $2, destination, endpoint, sender_did, peer_id, message_id, payload_json
               FROM federation_outbox WHERE id = $1""",
            edit_row["id"],
            "0" * 25 + "Z",
        )
        # Carol (another sender on A) claims Alice's message: signed by carol, so no match.
        forged = dict(edit_row["payload_json"])
        forged["message"] = {
            **forged["message"],
            "messageId": "forged-1",
            "parts": [{"text": "forged"}],
            "metadata": {
                "confer": {
                    "sender": carol.did,
                    "recipient": bob.did,
                    "edit": {"messageId": sent["id"], "version": 9},
                }
            },
        }
    async with a.state.pool.acquire() as conn, conn.transaction():
        await federation_store.insert_outbox(
            conn,
            destination=edit_row["destination"],
            endpoint=edit_row["endpoint"],
            sender_did=carol.did,
            peer_id=edit_row["peer_id"],
            message_id=sent["id"],
            payload=forged,
        )
    await delivered(a, 4)
    [copy] = await rows(b, "SELECT id, content FROM messages WHERE sender_type = 'peer_agent'")
    assert copy["content"] == "v2"
    assert len(await rows(b, "SELECT * FROM message_versions")) == 1
    audits = await rows(
        b,
        "SELECT details_json FROM audit_log WHERE details_json->>'method' = 'SendMessage/edit' "
        "ORDER BY id",
    )
    assert [x["details_json"]["applied"] for x in audits] == [True, False, False]


async def test_delete_before_delivery_sends_nothing(pair) -> None:
    a, b = pair
    alice, _bob, cid = await conversation_with(a, b)
    # Hold A's deliveries: new outbox rows are due only in an hour.
    async with a.state.pool.acquire() as conn:
        await conn.execute(
            "ALTER TABLE federation_outbox ALTER COLUMN next_attempt_at "
            "SET DEFAULT now() + interval '1 hour'"
        )
    sent = await alice.send(cid, "oops")
    path = f"/v1/conversations/{cid}/messages/{sent['id']}"
    assert (await alice.request("DELETE", path)).status_code == 204
    assert await rows(a, "SELECT id FROM federation_outbox") == []
    assert await rows(b, "SELECT id FROM messages WHERE sender_type = 'peer_agent'") == []


async def test_changes_reach_a_message_held_for_consent(pair) -> None:
    a, b = pair
    alice, bob = await a.register("alice"), await b.register("bob")
    conversation = await alice.direct_with(bob.profile["agent_did"])  # bob's policy: ask
    cid = conversation["id"]
    async with bob.websocket() as bob_ws:
        sent = await alice.send(cid, "please share the draft")
        notice = (await next_event(bob_ws, "message.created"))["data"]
        assert notice["content_type"] == "permission_request"
        path = f"/v1/conversations/{cid}/messages/{sent['id']}"
        edited = await alice.request("PATCH", path, json={"content": "share v2", "version": 1})
        assert edited.status_code == 200
        await delivered(a, 2)
        [permission] = await rows(b, "SELECT id, scope_json FROM permissions")
        assert permission["scope_json"]["text"] == "share v2"
        [held] = await rows(b, "SELECT content FROM messages WHERE id = $1", notice["id"])
        assert held["content"].endswith(": share v2")
        [task] = await rows(b, "SELECT history_json FROM a2a_tasks")
        assert task["history_json"][0]["parts"] == [{"text": "share v2"}]

        assert (await alice.request("DELETE", path)).status_code == 204
        tombstone = (await next_event(bob_ws, "message.deleted"))["data"]
    assert tombstone["id"] == notice["id"]
    await delivered(a, 3)
    [task] = await rows(b, "SELECT state, history_json::text AS h FROM a2a_tasks")
    assert task["state"] == "TASK_STATE_CANCELED"
    [permission] = await rows(b, "SELECT id, decision, scope_json FROM permissions")
    assert permission["decision"] == "deny" and "text" not in permission["scope_json"]
    for table, column in (("messages", "content"), ("event_payloads", "data_json::text")):
        found = await rows(b, f"SELECT {column} AS v FROM {table}")
        assert not any(r["v"] and "share" in r["v"] for r in found), table
    assert "share" not in task["h"]
    # The owner can no longer approve it.
    decided = await bob.request(
        "POST", f"/v1/permissions/{permission['id']}/decision", json={"decision": "allow_once"}
    )
    assert decided.status_code == 409 and decided.json()["code"] == "permission_decided"
