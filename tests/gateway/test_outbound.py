"""The outbound pipeline's rows: one per remote destination, each in that peer's terms."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a.confer import ConferChange, ConferMetadata
from a2a.protocol import SendMessageParams
from tests.gateway.harness import Instance, next_event, run_instance


@pytest.fixture
async def pair(make_database) -> AsyncIterator[tuple[Instance, Instance]]:
    async with (
        run_instance(await make_database()) as a,
        run_instance(await make_database()) as b,
    ):
        yield a, b


async def outbox(instance: Instance) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        records = await conn.fetch(
            """SELECT o.message_id, o.sender_did, o.destination, o.endpoint, p.did AS peer_did,
                      o.payload_json
               FROM federation_outbox o JOIN peer_agents p ON p.id = o.peer_id ORDER BY o.id"""
        )
    return [dict(r) for r in records]


def confer(row: dict[str, Any]) -> ConferMetadata:
    """The row's payload as the receiving instance parses it."""
    params = SendMessageParams.model_validate(row["payload_json"])
    return ConferMetadata.of(params.message.metadata)


async def test_a_group_message_and_its_changes_go_once_per_instance_naming_its_members(
    pair,
) -> None:
    a, b = pair
    alice = await a.register("alice")
    bob, carol = await b.register("bob"), await b.register("carol")
    group = await alice.request(
        "POST",
        "/v1/conversations",
        json={"type": "group", "name": "launch", "participant_dids": [bob.did, carol.did]},
    )
    assert group.status_code == 201, group.text
    cid = group.json()["id"]
    (event,) = await outbox(a)  # the group's create event, signed by the instance
    assert event["message_id"] is None and event["sender_did"] == a.did
    assert confer(event).membership is not None
    assert event["endpoint"] == f"{b.base_url}/a2a"
    sent = await alice.send(cid, "ship it")
    (row,) = [r for r in await outbox(a) if r["message_id"]]
    assert row["message_id"] == sent["id"] and row["sender_did"] == alice.did
    assert row["endpoint"] == f"{b.base_url}/a2a"
    message = row["payload_json"]["message"]
    assert message["messageId"] == sent["id"] and message["contextId"] == cid
    assert message["parts"] == [{"text": "ship it"}]
    meta = confer(row)
    assert meta.sender == alice.did and sorted(meta.recipients or []) == sorted(
        [bob.did, carol.did]
    )
    assert meta.recipient in (bob.did, carol.did)
    assert meta.senderName == "alice" and meta.createdAt is not None
    assert meta.change() is None and meta.taskId is None

    path = f"/v1/conversations/{cid}/messages/{sent['id']}"
    edited = await alice.request("PATCH", path, json={"content": "ship it monday", "version": 1})
    assert edited.status_code == 200, edited.text
    (edit,) = [r for r in await outbox(a) if r["message_id"]][1:]
    meta = confer(edit)
    assert meta.change() == ("edit", ConferChange(messageId=sent["id"], version=2))
    assert meta.sender == alice.did and edit["endpoint"] == f"{b.base_url}/a2a"
    message = edit["payload_json"]["message"]
    assert message["messageId"] != sent["id"]  # a change is a message of its own
    assert message["parts"] == [{"text": "ship it monday"}]
    # Both of B's members have the edited message, stored once in B's replica.
    for _ in range(600):
        async with b.state.pool.acquire() as conn:
            copies = await conn.fetch(
                "SELECT conversation_id FROM messages WHERE content = 'ship it monday'"
            )
        if copies:
            break
        await asyncio.sleep(0.05)
    (copy,) = copies
    for member in (bob, carol):
        listed = await member.request(
            "GET", f"/v1/conversations/{copy['conversation_id']}/messages"
        )
        assert listed.status_code == 200, listed.text


async def test_the_consent_answer_names_the_task_the_decision_and_the_request(pair) -> None:
    a, b = pair
    alice, bob = await a.register("alice"), await b.register("bob")
    conversation = await alice.direct_with(bob.profile["agent_did"])
    async with bob.websocket() as bob_ws:
        question = await alice.send(conversation["id"], "May I see the plan?")
        requested = (await next_event(bob_ws, "permission.requested"))["data"]
        decided = await bob.request(
            "POST", f"/v1/permissions/{requested['id']}/decision", json={"decision": "deny"}
        )
        assert decided.status_code == 200, decided.text
    for _ in range(200):
        answers = [r for r in await outbox(b) if r["sender_did"] == bob.profile["agent_did"]]
        if answers:
            break
        await asyncio.sleep(0.05)
    [answer] = answers
    async with b.state.pool.acquire() as conn:
        task = await conn.fetchrow("SELECT id, context_id FROM a2a_tasks")
    assert answer["peer_did"] == alice.did
    message = answer["payload_json"]["message"]
    assert message["contextId"] == task["context_id"]
    meta = confer(answer)
    assert (meta.sender, meta.recipient) == (bob.profile["agent_did"], alice.did)
    assert (meta.taskId, meta.decision) == (task["id"], "deny")
    assert meta.inReplyTo == question["id"]  # the requester's own id of its request
