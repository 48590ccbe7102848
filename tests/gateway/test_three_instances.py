"""A federated group across three real ``confer serve`` processes (A, B, C), each with its own
database, seen only through what their users see (REST and WebSocket): the same name, members,
roles and messages in the same order on every instance (posted one after another and all at
once); membership changes, a rename and the archive reflected everywhere; every content type
and a file (its SHA-256 checked) intact on B and C; read receipts moving the read state and
unread count on the other instances; a direct reply that never lands in the group; a refused
delivery reaching the sender's WebSocket as ``failed``.

The in-process tests (``test_group_membership.py``, ``test_group_receipts.py``…) look at each
database; this one is the end-to-end view across process boundaries.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import websockets

from tests.gateway.harness import free_port
from tests.gateway.serving import confer_serve, serve_env
from tests.gateway.test_federated_content import BODIES as CONTENT
from tests.gateway.test_federated_content import FIELDS

DEADLINE = 90.0
"""Seconds any one change may take to reach every instance (generous: a loaded machine)."""


@dataclass
class Person:
    """A registered user of one of the served instances."""

    client: httpx.AsyncClient
    token: str
    did: str
    base_url: str

    async def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return await self.client.request(method, path, headers=headers, **kwargs)

    async def ok(self, method: str, path: str, status: int = 200, **kwargs: Any) -> Any:
        response = await self.call(method, path, **kwargs)
        assert response.status_code == status, (method, path, response.text)
        return response.json() if response.content else None

    @contextlib.asynccontextmanager
    async def websocket(self) -> AsyncIterator[Any]:
        url = self.base_url.replace("http://", "ws://") + "/v1/ws"
        protocols: Any = ["confer.v1", f"bearer.{self.token}"]
        async with websockets.connect(url, subprotocols=protocols) as ws:
            ready = await asyncio.wait_for(ws.recv(), 30)
            assert '"ready"' in ready
            yield ws


async def register(client: httpx.AsyncClient, base_url: str, username: str) -> Person:
    response = await client.post(
        "/v1/auth/register", json={"username": username, "password": "correct horse battery"}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return Person(client, body["access_token"], body["user"]["did"], base_url)


async def eventually(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """``check()``'s first truthy value, polled until :data:`DEADLINE`."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.1)


async def the_group(person: Person) -> str:
    """The id of the one group ``person`` takes part in (waits for its replica)."""

    async def found() -> str | None:
        body = await person.ok("GET", "/v1/conversations")
        items = body["items"] if isinstance(body, dict) else body
        groups = [c["id"] for c in items if c["type"] == "group"]
        return groups[0] if len(groups) == 1 else None

    return str(await eventually(found, f"a group for {person.did}"))


async def state(person: Person, cid: str) -> dict[str, Any] | None:
    """What ``person`` sees of the group: name, members with roles, archived (None: 404)."""
    response = await person.call("GET", f"/v1/conversations/{cid}")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    view = response.json()
    return {
        "name": view["name"],
        "members": {p["did"]: p["role"] for p in view["participants"] if p.get("did")},
        "archived": view["archived_at"] is not None,
    }


async def messages(person: Person, cid: str) -> list[dict[str, Any]]:
    """The messages ``person`` reads in ``cid``, oldest first, in the order the instance
    lists them (newest first, reversed)."""
    body = await person.ok("GET", f"/v1/conversations/{cid}/messages", params={"limit": 200})
    return list(body["items"])[::-1]


async def same_everywhere(
    views: list[tuple[Person, str]], expected: dict[str, Any], what: str
) -> None:
    """Every ``(person, conversation)`` shows exactly ``expected`` (see :func:`state`)."""

    async def agreed() -> bool:
        return all([await state(p, cid) == expected for p, cid in views])

    try:
        await eventually(agreed, what)
    except AssertionError:
        seen = [await state(p, cid) for p, cid in views]
        raise AssertionError(f"{what}: expected {expected}, seen {seen}") from None


def texts(items: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(m["sender_did"], m["content"]) for m in items]


async def test_a_group_across_three_served_instances(make_database: Any) -> None:
    ports = [free_port() for _ in range(3)]
    envs = [serve_env(port, await make_database()) for port in ports]
    async with (
        confer_serve(envs[0]) as a,
        confer_serve(envs[1]) as b,
        confer_serve(envs[2]) as c,
        httpx.AsyncClient(base_url=a.base_url, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=60) as on_b,
        httpx.AsyncClient(base_url=c.base_url, timeout=60) as on_c,
    ):
        alice = await register(on_a, a.base_url, "alice")
        dave = await register(on_a, a.base_url, "dave")
        bob = await register(on_b, b.base_url, "bob")
        carol = await register(on_c, c.base_url, "carol")
        erin = await register(on_c, c.base_url, "erin")

        created = await alice.ok(
            "POST",
            "/v1/conversations",
            201,
            json={
                "type": "group",
                "name": "Launch",
                "participant_dids": [bob.did, carol.did, dave.did],
            },
        )
        g = created["id"]
        gb, gc = await the_group(bob), await the_group(carol)
        views = [(alice, g), (dave, g), (bob, gb), (carol, gc)]
        members = {alice.did: "admin", bob.did: "member", carol.did: "member", dave.did: "member"}
        expected = {"name": "Launch", "members": members, "archived": False}
        await same_everywhere(views, expected, "the created group on A, B and C")

        # Posts from every instance, one after another: the same order everywhere.
        await alice.ok("POST", f"/v1/conversations/{g}/messages", 201, json={"content": "one"})
        await eventually(lambda: _has(carol, gc, "one"), "'one' on C")
        await bob.ok("POST", f"/v1/conversations/{gb}/messages", 201, json={"content": "two"})
        await eventually(lambda: _has(carol, gc, "two"), "'two' on C")
        await carol.ok("POST", f"/v1/conversations/{gc}/messages", 201, json={"content": "three"})
        await eventually(lambda: _has(bob, gb, "three"), "'three' on B")
        await eventually(lambda: _has(alice, g, "three"), "'three' on A")
        order = [(alice.did, "one"), (bob.did, "two"), (carol.did, "three")]
        for person, cid in views:
            assert texts(await messages(person, cid)) == order, person.did

        # Posts from A, B and C at once: once every instance has them all, each lists the
        # home's one order, every message at the home's id of it (its position).
        burst = [(alice, g, "a"), (bob, gb, "b"), (carol, gc, "c")]
        posted = 3 + 5 * len(burst)
        await asyncio.gather(
            *(
                p.ok("POST", f"/v1/conversations/{cid}/messages", 201, json={"content": f"{t}{n}"})
                for n in range(5)
                for p, cid, t in burst
            )
        )
        await eventually(
            lambda: _everywhere_in_one_order(views, posted), "the burst in one order on A, B and C"
        )

        # Every content type and a file from A: intact on B and C.
        sent = [
            await alice.ok("POST", f"/v1/conversations/{g}/messages", 201, json=body)
            for body in CONTENT
        ]
        payload = os.urandom(40_000)
        upload = await alice.ok(
            "POST", "/v1/attachments", 201,
            files={"file": ("notes.bin", payload, "application/octet-stream")},
        )  # fmt: skip
        assert upload["sha256"] == hashlib.sha256(payload).hexdigest()
        file_json = {
            "attachment_id": upload["id"],
            "filename": "notes.bin",
            "mime_type": "application/octet-stream",
            "size_bytes": len(payload),
        }
        await alice.ok(
            "POST", f"/v1/conversations/{g}/messages", 201,
            json={"content_type": "file", "content_json": file_json},
        )  # fmt: skip
        for person, cid in ((bob, gb), (carol, gc)):
            arrived = await eventually(
                lambda p=person, c=cid: _when_count(p, c, posted + len(CONTENT) + 1),
                f"every content type on {person.base_url}",
            )
            copies = arrived[posted : posted + len(CONTENT)]
            for mine, theirs in zip(sent, copies, strict=True):
                assert theirs["sender_did"] == alice.did
                for field in FIELDS:
                    assert theirs[field] == mine[field], (person.base_url, field, mine, theirs)
            copy = arrived[-1]
            assert copy["content_type"] == "file"
            local = copy["content_json"]["attachment_id"]
            assert local != upload["id"]  # the receiving instance's own copy
            assert {**copy["content_json"], "attachment_id": upload["id"]} == file_json
            download = await eventually(
                lambda p=person, i=local: _downloaded(p, i), f"the file on {person.base_url}"
            )
            assert download.content == payload
            assert download.headers["digest-sha256"] == upload["sha256"]

        # A read on B moves the read state on A and C (bob's receipt, relayed by the home):
        # the last message there gains its one reader (remote readers are listed by the ids
        # each instance gives them).
        # Bob's unread count, as every instance shows it (GET …/reads), drops to 0 there too.
        lasts = {}
        for person, cid in ((alice, g), (carol, gc)):
            last = (await messages(person, cid))[-1]["id"]
            lasts[person.did] = (last, len(await _read_by(person, cid, last)))
            assert (await _read_state(person, cid, bob.did))["unread"] > 0
        on_b = await messages(bob, gb)
        await bob.ok("POST", f"/v1/conversations/{gb}/read", json={"message_id": on_b[-1]["id"]})
        assert (await bob.ok("GET", f"/v1/conversations/{gb}"))["membership"]["unread"] == 0
        assert (await _read_state(bob, gb, bob.did))["unread"] == 0
        for person, cid in ((alice, g), (carol, gc)):
            last, before = lasts[person.did]
            await eventually(
                lambda p=person, c=cid, m=last, n=before: _more_readers(p, c, m, n),
                f"bob's read on {person.base_url}",
            )
            bobs = await _read_state(person, cid, bob.did)
            assert bobs["unread"] == 0 and bobs["last_read_message_id"] == last
        assert (await carol.ok("GET", f"/v1/conversations/{gc}"))["membership"]["unread"] > 0
        assert (await _read_state(alice, g, carol.did))["unread"] > 0

        # Membership: erin (C) added, bob promoted, dave removed, renamed, then archived.
        await alice.ok("POST", f"/v1/conversations/{g}/participants", 201, json={"did": erin.did})
        members[erin.did] = "member"
        ge = await the_group(erin)
        views.append((erin, ge))
        await same_everywhere(views, expected, "erin added on A, B and C")
        home = await alice.ok("GET", f"/v1/conversations/{g}")
        ids = {p["did"]: p["id"] for p in home["participants"] if p.get("did")}
        await alice.ok(
            "PATCH", f"/v1/conversations/{g}/participants/{ids[bob.did]}", 204,
            json={"role": "admin"},
        )  # fmt: skip
        members[bob.did] = "admin"
        await same_everywhere(views, expected, "bob promoted on A, B and C")
        # bob, an admin now, removes dave and renames from his replica on B
        replica = await bob.ok("GET", f"/v1/conversations/{gb}")
        dave_on_b = next(p["id"] for p in replica["participants"] if p.get("did") == dave.did)
        await bob.ok("DELETE", f"/v1/conversations/{gb}/participants/{dave_on_b}", 204)
        del members[dave.did]
        views.remove((dave, g))
        assert await state(dave, g) is None
        gone = await dave.call("GET", f"/v1/conversations/{g}/reads")
        assert gone.status_code == 404 and gone.json()["code"] == "conversation_not_found"
        await same_everywhere(views, expected, "dave removed on A, B and C")
        await bob.ok("PATCH", f"/v1/conversations/{gb}", json={"name": "Launch v2"})
        expected["name"] = "Launch v2"
        await same_everywhere(views, expected, "renamed on A, B and C")

        # A direct reply on B never appears in the group.
        direct = await _direct(bob, alice.did)
        await bob.ok(
            "POST", f"/v1/conversations/{direct['id']}/messages", 201,
            json={"content": "just between us"},
        )  # fmt: skip

        async def private_arrived() -> bool:
            body = await alice.ok("GET", "/v1/conversations")
            items = body["items"] if isinstance(body, dict) else body
            for conv in items:
                if conv["type"] != "group" and any(
                    m["content"] == "just between us" for m in await messages(alice, conv["id"])
                ):
                    return True
            return False

        await eventually(private_arrived, "the direct reply on A")
        for person, cid in views:
            assert "just between us" not in [m["content"] for m in await messages(person, cid)]

        await carol.ok("PATCH", f"/v1/conversations/{gc}", 403, json={"archived": True})
        await alice.ok("PATCH", f"/v1/conversations/{g}", json={"archived": True})
        expected["archived"] = True
        await same_everywhere(views, expected, "archived on A, B and C")
        for person, cid in views:
            refused = await person.call(
                "POST", f"/v1/conversations/{cid}/messages", json={"content": "still here?"}
            )
            assert refused.status_code == 409, (person.did, refused.text)
            assert refused.json()["code"] == "conversation_archived"

        # A refused delivery reaches the sender's WebSocket as failed: carol blocks alice.
        known = [x for x in await carol.ok("GET", "/v1/contacts") if x["did"] == alice.did]
        contact = (
            known[0]
            if known
            else await carol.ok("POST", "/v1/contacts", 201, json={"did": alice.did})
        )
        await carol.ok("PATCH", f"/v1/contacts/{contact['id']}", json={"trust_level": "blocked"})
        to_carol = await _direct(alice, carol.did)
        async with alice.websocket() as ws:
            sent_direct = await alice.ok(
                "POST", f"/v1/conversations/{to_carol['id']}/messages", 201,
                json={"content": "are you there?"},
            )  # fmt: skip
            failed = await _delivery_event(ws, sent_direct["id"], "failed")
        assert failed["delivery"]["peer_did"] == carol.did
        assert "HTTP 403" in failed["delivery"]["reason"]


async def _direct(person: Person, did: str) -> dict[str, Any]:
    """The direct conversation of ``person`` with ``did`` (created, 201, or found, 200)."""
    response = await person.call("POST", "/v1/conversations", json={"participant_did": did})
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


async def _has(person: Person, cid: str, text: str) -> bool:
    return any(m["content"] == text for m in await messages(person, cid))


async def _when_count(person: Person, cid: str, count: int) -> list[dict[str, Any]] | None:
    found = await messages(person, cid)
    return found if len(found) >= count else None


async def _downloaded(person: Person, attachment_id: str) -> httpx.Response | None:
    response = await person.call("GET", f"/v1/attachments/{attachment_id}")
    if response.status_code == 409 and response.json()["code"] == "attachment_pending":
        return None
    assert response.status_code == 200, response.text
    return response


async def _read_by(person: Person, cid: str, message_id: str) -> list[Any]:
    detail = await person.ok("GET", f"/v1/conversations/{cid}/messages/{message_id}")
    return list(detail["read_by"])


async def _everywhere_in_one_order(views: list[tuple[Person, str]], count: int) -> bool:
    """True once every view lists ``count`` messages, all in the first view's order (the
    home's) and at the home's ids; False while some are still on their way."""
    lists = [await messages(p, cid) for p, cid in views]
    if any(len(found) < count for found in lists):
        return False
    home = lists[0]
    for found in lists[1:]:
        if [m["position"] for m in found] != [m["id"] for m in home]:
            return False  # an answer that places a post may still be on its way
        assert texts(found) == texts(home)
    return True


async def _read_state(person: Person, cid: str, did: str) -> dict[str, Any]:
    """The read state of the participant ``did`` as ``person``'s instance shows it."""
    states = (await person.ok("GET", f"/v1/conversations/{cid}/reads"))["items"]
    (state,) = [s for s in states if s["did"] == did]
    return dict(state)


async def _more_readers(person: Person, cid: str, message_id: str, before: int) -> bool:
    return len(await _read_by(person, cid, message_id)) > before


async def _delivery_event(ws: Any, message_id: str, state_name: str) -> dict[str, Any]:
    async with asyncio.timeout(DEADLINE):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("type") != "message.delivery_updated":
                continue
            data = frame["data"]
            if data["message_id"] == message_id and data["delivery"]["state"] == state_name:
                return dict(data)
