"""Message retention over real HTTP and PostgreSQL: the instance's retention, a group's shorter
one, the purge in batches (each its own transaction and audit row), attachments leaving the
storage, and the bounds and permissions of ``PUT /v1/conversations/{id}/retention``.

Messages take their ``created_at`` from the database; the instance runs on an injected clock
the test moves forward, and the setup backdates the "old" messages' rows by SQL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.clock import Clock
from gateway.ids import new_id
from gateway.store import translations as translations_store
from gateway.workers.retention import purge_messages
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.s3server import stored_blobs
from tests.gateway.test_retention import MovableClock

DAY = timedelta(days=1)


@pytest.fixture
async def running(
    database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[Instance, MovableClock]]:
    clock = MovableClock()
    async with run_instance(
        database_url,
        clock=clock,
        message_retention_days=30,
        retention_batch_size=2,
        retention_interval_seconds=3600,  # the test runs the passes itself
        attachments_dir=tmp_path / "files",
    ) as instance:
        yield instance, clock


async def fetch(instance: Instance, sql: str, *args: Any) -> list[Any]:
    async with instance.state.pool.acquire() as conn:
        return list(await conn.fetch(sql, *args))


async def value(instance: Instance, sql: str, *args: Any) -> Any:
    async with instance.state.pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def new_group(owner: User, dids: list[str]) -> str:
    created = await owner.request(
        "POST", "/v1/conversations", json={"type": "group", "name": "g", "participant_dids": dids}
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def visible(instance: Instance, conversation_id: str) -> int:
    sql = "SELECT count(*) FROM messages WHERE conversation_id = $1 AND deleted_at IS NULL"
    return int(await value(instance, sql, conversation_id))


async def purge(instance: Instance, clock: Clock) -> tuple[int, int]:
    state = instance.state
    return await purge_messages(state.pool, state.hub, state.storage, clock, instance.settings)


async def test_instance_and_group_retention_purge_in_batches_with_their_files(
    running: tuple[Instance, MovableClock],
) -> None:
    instance, clock = running
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    direct = (await alice.direct_with(bob.did))["id"]
    group = await new_group(alice, [bob.did])
    short = await alice.request("PUT", f"/v1/conversations/{group}/retention", json={"days": 7})
    assert short.status_code == 200, short.text

    upload = await alice.request("POST", "/v1/attachments", files={"file": ("a.txt", b"abc")})
    assert upload.status_code == 201, upload.text
    attachment_id = upload.json()["id"]
    body = {
        "content_type": "file",
        "content_json": {"attachment_id": attachment_id, "filename": "a.txt"},
    }
    with_file = await alice.request("POST", f"/v1/conversations/{direct}/messages", json=body)
    assert with_file.status_code == 201, with_file.text
    old = [with_file.json()["id"]] + [
        (await alice.send(direct, f"old {i}"))["id"] for i in range(4)
    ]
    await fetch(
        instance,
        "UPDATE messages SET created_at = created_at - interval '40 days' WHERE id = ANY($1)",
        old,
    )
    async with instance.state.pool.acquire() as conn:
        stored = await translations_store.insert_translation(
            conn,
            id=new_id(),
            message_id=old[1],
            target="fr",
            source_sha256="0" * 64,
            translation={
                "from": "en",
                "to": "fr",
                "provider": "test",
                "model": "m",
                "text": "vieux 0",
            },
            requested_by=bob.profile["id"],
        )
    assert stored is not None
    fresh = (await alice.send(direct, "fresh"))["id"]
    for i in range(2):
        await bob.send(group, f"group {i}")
    assert await stored_blobs(instance.settings) == [attachment_id]

    # 5 messages past the instance's 30 days, 2 a batch: 2 + 2 + 1, three rounds.
    assert await purge(instance, clock) == (5, 3)
    assert await visible(instance, direct) == 1 and await visible(instance, group) == 2
    rows = await fetch(instance, "SELECT content, deleted_at FROM messages WHERE id = ANY($1)", old)
    assert all(r["content"] is None and r["deleted_at"] is not None for r in rows)
    assert await value(instance, "SELECT count(*) FROM attachments") == 0
    assert await value(instance, "SELECT count(*) FROM message_translations") == 0
    for _ in range(50):  # the bytes go once the batch has committed
        if not await stored_blobs(instance.settings):
            break
        await asyncio.sleep(0.1)
    assert await stored_blobs(instance.settings) == []
    audits = await fetch(
        instance,
        """SELECT details_json FROM audit_log WHERE action = 'retention.messages_purged'
           ORDER BY created_at, id""",
    )
    counts = sorted(int(_json(r["details_json"])["count"]) for r in audits)
    assert counts == [1, 2, 2]
    history = await bob.request("GET", f"/v1/conversations/{direct}/messages")
    assert [m["id"] for m in history.json()["items"]] == [fresh]
    # nothing for peers: retention is this instance's own business
    assert await value(instance, "SELECT count(*) FROM federation_outbox") == 0

    # 8 days on: the group's 7 days apply to it alone; the direct one keeps the instance's 30.
    clock.advance(8 * DAY)
    assert await purge(instance, clock) == (2, 2)  # a full batch, then an empty one
    assert await visible(instance, group) == 0 and await visible(instance, direct) == 1

    clock.advance(23 * DAY)  # 31 days on
    assert await purge(instance, clock) == (1, 1)
    assert await visible(instance, direct) == 0
    assert await purge(instance, clock) == (0, 1)


def _json(raw: Any) -> dict[str, Any]:
    return dict(json.loads(raw) if isinstance(raw, str) else raw)


async def test_retention_endpoint_bounds_and_who_may_set_it(
    running: tuple[Instance, MovableClock],
) -> None:
    instance, _ = running
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    eve = await instance.register("eve")
    group = await new_group(alice, [bob.did])
    path = f"/v1/conversations/{group}/retention"

    got = await bob.request("GET", path)
    assert got.status_code == 200, got.text
    assert got.json() == {"days": None, "instance_days": 30, "effective_days": 30}
    for bad in (0, 3651, "5", 1.0, 7.5, True, [], {}):
        r = await alice.request("PUT", path, json={"days": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["code"] == "validation_failed"
    assert (await alice.request("PUT", path, json={})).status_code == 422
    longer = await alice.request("PUT", path, json={"days": 31})
    assert longer.status_code == 422 and longer.json()["code"] == "retention_too_long"
    member = await bob.request("PUT", path, json={"days": 7})
    assert member.status_code == 403 and member.json()["code"] == "not_conversation_admin"
    outsider = await eve.request("PUT", path, json={"days": 7})
    assert outsider.status_code == 404
    assert await value(instance, "SELECT count(*) FROM conversation_retention") == 0

    ok = await alice.request("PUT", path, json={"days": 7})
    assert ok.status_code == 200, ok.text
    assert ok.json() == {"days": 7, "instance_days": 30, "effective_days": 7}
    assert (await bob.request("GET", path)).json()["days"] == 7
    audit = await fetch(
        instance,
        "SELECT user_id, details_json FROM audit_log WHERE action = 'conversation.retention_set'",
    )
    assert len(audit) == 1 and audit[0]["user_id"] == alice.profile["id"]
    assert _json(audit[0]["details_json"]) == {"conversation_id": group, "days": 7}

    # Either participant of a direct conversation may set it; null follows the instance again.
    direct = (await alice.direct_with(bob.did))["id"]
    direct_path = f"/v1/conversations/{direct}/retention"
    set_by_bob = await bob.request("PUT", direct_path, json={"days": 30})
    assert set_by_bob.status_code == 200, set_by_bob.text
    cleared = await alice.request("PUT", direct_path, json={"days": None})
    assert cleared.json() == {"days": None, "instance_days": 30, "effective_days": 30}
    assert (await alice.request("GET", "/v1/conversations/not-an-id/retention")).status_code == 422


async def test_without_an_instance_retention_only_a_conversation_choice_purges_in_the_worker(
    database_url: str,
) -> None:
    clock = MovableClock()
    async with run_instance(database_url, clock=clock, retention_interval_seconds=0.2) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        short = (await alice.direct_with(bob.did))["id"]
        kept = (await alice.direct_with(carol.did))["id"]
        path = f"/v1/conversations/{short}/retention"
        assert (await alice.request("GET", path)).json() == {
            "days": None,
            "instance_days": None,
            "effective_days": None,
        }
        longest = await alice.request("PUT", path, json={"days": 3650})  # no instance bound
        assert longest.status_code == 200 and longest.json()["effective_days"] == 3650
        assert (await bob.request("PUT", path, json={"days": 1})).status_code == 200
        for i in range(3):
            await alice.send(short, f"short {i}")
            await alice.send(kept, f"kept {i}")

        clock.advance(400 * 365 * DAY)  # centuries on: only the conversation's own day counts
        async with asyncio.timeout(30):  # the supervised worker's next passes
            while await visible(instance, short):  # noqa: ASYNC110 (polls the database)
                await asyncio.sleep(0.1)
        assert await visible(instance, kept) == 3
