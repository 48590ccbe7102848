"""A group's history reaches the instance of a member who joins it later: real ``confer serve``
processes (A the home, B the joining member's instance, C a third member's), each with its
own database, seen through what their users see (REST and WebSocket).

- An instance new to the group gets the group's history: the joining member lists the same
  messages as the home, in the same order, each at the home's id, with the authors' times,
  every content type, a reply and a file intact, and a post of C's member (relayed by the
  home) too — quietly: no ``message.created``, one ``message.history``, ``unread`` 0 there
  and at the home. Later edits and deletes of that history follow it to B.
- An instance that had a member, lost it and gets another has its gap filled, nothing twice.
- The history is bounded by ``CONFER_GROUP_BACKFILL_MESSAGES`` (the time a backfill of 200
  messages takes, from the add to the last one stored on B, is printed).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.gateway.harness import free_port
from tests.gateway.serving import confer_serve, serve_env
from tests.gateway.test_federated_content import BODIES as CONTENT
from tests.gateway.test_federated_content import FIELDS
from tests.gateway.test_three_instances import (
    Person,
    _downloaded,
    _read_state,
    eventually,
    messages,
    register,
    the_group,
)


@contextlib.asynccontextmanager
async def served(
    make_database: Any, count: int, **extra: str
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """``count`` instances (``extra`` settings for the first, the home), a client for each."""
    envs = []
    for n in range(count):
        port = free_port()
        envs.append(serve_env(port, await make_database(), **(extra if n == 0 else {})))
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for env in envs:
            instance = await stack.enter_async_context(confer_serve(env))
            clients.append(
                await stack.enter_async_context(
                    httpx.AsyncClient(base_url=instance.base_url, timeout=60)
                )
            )
        yield clients


async def post(person: Person, cid: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(await person.ok("POST", f"/v1/conversations/{cid}/messages", 201, json=body))


async def all_messages(person: Person, cid: str) -> list[dict[str, Any]]:
    """Every message ``person`` reads in ``cid``, oldest first (pages of 200)."""
    items: list[dict[str, Any]] = []
    before: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 200, **({"before": before} if before else {})}
        page = await person.ok("GET", f"/v1/conversations/{cid}/messages", params=params)
        items.extend(page["items"])
        before = page["next_before"]
        if before is None:
            return items[::-1]


def seen(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a reader sees of each message: author, content, and its place in the order."""
    return [(m["sender_did"], m["content_type"], m["content"], m["position"]) for m in items]


async def frames(ws: Any, within: float) -> list[dict[str, Any]]:
    """The frames ``ws`` receives for ``within`` seconds."""
    got: list[dict[str, Any]] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            while True:
                got.append(json.loads(await ws.recv()))
    return got


async def unread(person: Person, cid: str) -> int:
    return int((await person.ok("GET", f"/v1/conversations/{cid}"))["membership"]["unread"])


async def test_a_member_on_a_new_instance_gets_the_groups_history(make_database: Any) -> None:
    async with served(make_database, 3) as (on_a, on_b, on_c):
        alice = await register(on_a, str(on_a.base_url), "alice")
        bob = await register(on_b, str(on_b.base_url), "bob")
        carol = await register(on_c, str(on_c.base_url), "carol")
        created = await alice.ok(
            "POST", "/v1/conversations", 201,
            json={"type": "group", "name": "History", "participant_dids": [carol.did]},
        )  # fmt: skip
        g = created["id"]
        gc = await the_group(carol)

        # The history: every content type, a post of carol's (C) and a reply to it, a file,
        # and a message deleted before bob joins (never sent).
        for body in CONTENT:
            await post(alice, g, body)
        await post(carol, gc, {"content": "from C"})
        carols = await eventually(lambda: _find(alice, g, "from C"), "carol's post at the home")
        await post(alice, g, {"content": "answering C", "in_reply_to": carols["id"]})
        payload = os.urandom(30_000)
        upload = await alice.ok(
            "POST", "/v1/attachments", 201,
            files={"file": ("notes.bin", payload, "application/octet-stream")},
        )  # fmt: skip
        file_json = {
            "attachment_id": upload["id"],
            "filename": "notes.bin",
            "mime_type": "application/octet-stream",
            "size_bytes": len(payload),
        }
        await post(alice, g, {"content_type": "file", "content_json": file_json})
        gone = await post(alice, g, {"content": "said, then deleted"})
        await alice.ok("DELETE", f"/v1/conversations/{g}/messages/{gone['id']}", 204)
        await post(alice, g, {"content": "the latest"})
        home = await all_messages(alice, g)
        assert len(home) == len(CONTENT) + 4

        async with bob.websocket() as ws:
            await alice.ok(
                "POST", f"/v1/conversations/{g}/participants", 201, json={"did": bob.did}
            )
            gb = await the_group(bob)
            on_b = await eventually(lambda: _count(bob, gb, len(home)), "the history on B")
            got = await frames(ws, 3.0)
        kinds = [f.get("type") for f in got]
        assert kinds.count("message.history") == 1, kinds
        assert "message.created" not in kinds, kinds
        assert next(f for f in got if f.get("type") == "message.history")["data"] == {
            "conversation_id": gb
        }

        # The same messages in the same order, each at the home's id, as written.
        assert seen(on_b) == [
            (m["sender_did"], m["content_type"], m["content"], m["id"]) for m in home
        ]
        assert [m["created_at"] for m in on_b] == [m["created_at"] for m in home]
        for mine, theirs in zip(home[: len(CONTENT)], on_b, strict=False):
            for field in FIELDS:
                assert theirs[field] == mine[field], (field, mine, theirs)
        reply = next(m for m in on_b if m["content"] == "answering C")
        assert reply["in_reply_to"] == next(m["id"] for m in on_b if m["content"] == "from C")
        copy = next(m for m in on_b if m["content_type"] == "file")
        local = copy["content_json"]["attachment_id"]
        assert local != upload["id"]
        download = await eventually(lambda: _downloaded(bob, local), "the file on B")
        assert hashlib.sha256(download.content).hexdigest() == upload["sha256"]

        # History is not unread for the member who joined: on B and at the home alike.
        assert await unread(bob, gb) == 0
        assert (await _read_state(alice, g, bob.did))["unread"] == 0

        # ... and on C, the third member's instance, which takes bob's join but no history
        async def bob_on_c() -> dict[str, Any] | None:
            states = (await carol.ok("GET", f"/v1/conversations/{gc}/reads"))["items"]
            return next((s for s in states if s["did"] == bob.did), None)

        assert (await eventually(bob_on_c, "bob a member on C"))["unread"] == 0

        # What the home changes later follows the history to B: alice's edit, carol's delete.
        first = home[0]
        detail = await alice.ok("GET", f"/v1/conversations/{g}/messages/{first['id']}")
        await alice.ok(
            "PATCH", f"/v1/conversations/{g}/messages/{first['id']}",
            json={"version": detail["version"], "content": "hi, edited"},
        )  # fmt: skip
        carols_copy = next(m for m in await all_messages(carol, gc) if m["content"] == "from C")
        await carol.ok("DELETE", f"/v1/conversations/{gc}/messages/{carols_copy['id']}", 204)
        await eventually(lambda: _find(bob, gb, "hi, edited"), "alice's edit on B")
        await eventually(lambda: _absent(bob, gb, "from C"), "carol's delete on B")

        # And a new post is news again.
        await post(alice, g, {"content": "after bob joined"})
        await eventually(lambda: _find(bob, gb, "after bob joined"), "a new post on B")
        assert await unread(bob, gb) == 1


async def test_a_gap_is_filled_once(make_database: Any) -> None:
    """B had a member (bob), who left; the group went on; dave (B) joins: B lists the whole
    history once, in the home's order — the part it kept and the gap the home sent."""
    async with served(make_database, 2) as (on_a, on_b):
        alice = await register(on_a, str(on_a.base_url), "alice")
        bob = await register(on_b, str(on_b.base_url), "bob")
        dave = await register(on_b, str(on_b.base_url), "dave")
        created = await alice.ok(
            "POST", "/v1/conversations", 201,
            json={"type": "group", "name": "Gap", "participant_dids": [bob.did]},
        )  # fmt: skip
        g = created["id"]
        gb = await the_group(bob)
        await post(alice, g, {"content": "m1"})
        await post(bob, gb, {"content": "b1"})
        await eventually(lambda: _count(alice, g, 2), "b1 at the home")
        await post(alice, g, {"content": "m2"})
        await eventually(lambda: _count(bob, gb, 3), "m1, b1, m2 on B")
        await bob.ok("POST", f"/v1/conversations/{gb}/leave", 204)
        await eventually(lambda: _members(alice, g, 1), "bob gone at the home")
        for text in ("m3", "m4", "m5"):  # the gap: B has no member
            await post(alice, g, {"content": text})
        home = await all_messages(alice, g)
        assert [m["content"] for m in home] == ["m1", "b1", "m2", "m3", "m4", "m5"]

        await alice.ok("POST", f"/v1/conversations/{g}/participants", 201, json={"did": dave.did})
        assert await the_group(dave) == gb  # the replica B kept
        on_b = await eventually(lambda: _count(dave, gb, len(home)), "the gap on B")
        await asyncio.sleep(2)  # nothing more arrives
        on_b = await all_messages(dave, gb)
        assert seen(on_b) == [
            (m["sender_did"], m["content_type"], m["content"], m["id"]) for m in home
        ]
        assert len({m["id"] for m in on_b}) == len(home)
        assert await unread(dave, gb) == 0
        assert (await _read_state(alice, g, dave.did))["unread"] == 0

        # erin (B) joins too: B holds everything; the home sends only where the history ends,
        # which B already holds — nothing twice, and nothing unread for erin either.
        erin = await register(dave.client, dave.base_url, "erin")
        async with erin.websocket() as ws:
            await alice.ok(
                "POST", f"/v1/conversations/{g}/participants", 201, json={"did": erin.did}
            )
            got = await frames(ws, 4.0)
        assert [f.get("type") for f in got].count("message.history") == 1
        on_b = await all_messages(erin, gb)
        assert [m["id"] for m in on_b] == [m["id"] for m in await all_messages(dave, gb)]
        assert [m["content"] for m in on_b] == ["m1", "b1", "m2", "m3", "m4", "m5"]
        assert await unread(erin, gb) == 0


async def test_the_history_is_bounded_by_the_setting(make_database: Any) -> None:
    """230 messages at the home, CONFER_GROUP_BACKFILL_MESSAGES=200: B gets the latest 200."""
    async with served(make_database, 2, CONFER_GROUP_BACKFILL_MESSAGES="200") as (on_a, on_b):
        alice = await register(on_a, str(on_a.base_url), "alice")
        bob = await register(on_b, str(on_b.base_url), "bob")
        created = await alice.ok(
            "POST", "/v1/conversations", 201,
            json={"type": "group", "name": "Busy", "participant_dids": []},
        )  # fmt: skip
        g = created["id"]
        for n in range(230):
            await post(alice, g, {"content": f"message {n}"})
        home = await all_messages(alice, g)

        started = time.monotonic()
        await alice.ok("POST", f"/v1/conversations/{g}/participants", 201, json={"did": bob.did})
        gb = await the_group(bob)
        await eventually(lambda: _has_last(bob, gb, "message 229"), "the last message on B")
        took = time.monotonic() - started
        print(f"\nbackfill of 200 messages: {took:.2f} s from the add to the last one on B")
        on_b = await all_messages(bob, gb)
        assert seen(on_b) == [
            (m["sender_did"], m["content_type"], m["content"], m["id"]) for m in home[-200:]
        ]
        assert await unread(bob, gb) == 0


async def _find(person: Person, cid: str, text: str) -> dict[str, Any] | None:
    return next((m for m in await messages(person, cid) if m["content"] == text), None)


async def _absent(person: Person, cid: str, text: str) -> bool:
    return await _find(person, cid, text) is None


async def _has_last(person: Person, cid: str, text: str) -> bool:
    found = await person.ok("GET", f"/v1/conversations/{cid}/messages", params={"limit": 1})
    return bool(found["items"]) and found["items"][0]["content"] == text


async def _count(person: Person, cid: str, count: int) -> list[dict[str, Any]] | None:
    found = await all_messages(person, cid)
    return found if len(found) >= count else None


async def _members(person: Person, cid: str, count: int) -> bool:
    view = await person.ok("GET", f"/v1/conversations/{cid}")
    return len(view["participants"]) == count
