"""One rule for ids at the HTTP edge: a ULID in its canonical text form (26 upper-case Crockford
base32 characters) or 422 ``validation_failed`` naming the parameter — in a path, in a paging
cursor, in a body field, on a federation route — never a 404 from a lookup that cannot match,
and never a 200 page compared as a string. Real HTTP against real PostgreSQL."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from ulid import ULID

from a2a.signatures import FETCH_COMPONENTS, sign_request
from gateway.ids import is_ulid, new_id, ulid_text
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import Instance, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


def _names(response: httpx.Response, *loc: str) -> None:
    """``response`` is the 422 ``validation_failed`` problem naming the parameter at ``loc``."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert body["code"] == "validation_failed", body
    assert [e["loc"] for e in body["errors"]] == [list(loc)], body


def test_only_the_canonical_spelling_is_a_ulid() -> None:
    issued = new_id()
    assert is_ulid(issued)
    assert not is_ulid(issued.lower())
    assert not is_ulid(issued[:-1] + "u")  # U is not in Crockford's alphabet
    assert not is_ulid("8" + issued[1:])  # above 128 bits
    assert not is_ulid(issued + "\n")


def test_ids_are_ulids_in_creation_order() -> None:
    """``new_id`` spells a ULID as python-ulid does, and each is above the one before."""
    for value in [0, 1, 2**80, 2**127, 2**128 - 1, *(int(ULID()) for _ in range(1000))]:
        assert ulid_text(value) == str(ULID.from_int(value))
    ids = [new_id() for _ in range(10_000)]
    assert ids == sorted(set(ids))
    assert all(is_ulid(i) for i in ids)
    assert abs(ULID.from_str(ids[-1]).timestamp - time.time()) < 5


async def test_a_lowercase_id_is_422_wherever_an_id_is_expected(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    sent = [await alice.send(cid, f"m{i}") for i in range(3)]
    messages = f"/v1/conversations/{cid}/messages"

    # a lower-case cursor compares below every upper-case id: it used to answer 200, wrong rows
    _names(
        await alice.request("GET", messages, params={"before": sent[-1]["id"].lower()}),
        "query",
        "before",
    )
    right = await alice.request("GET", messages, params={"before": sent[-1]["id"]})
    assert [m["id"] for m in right.json()["items"]] == [sent[1]["id"], sent[0]["id"]]
    thread = f"{messages}/{sent[0]['id']}/thread"
    _names(
        await alice.request("GET", thread, params={"after": sent[0]["id"].lower()}),
        "query",
        "after",
    )

    # a lower-case conversation id was a 404, a malformed one a 422: both are 422 now
    for bad in (cid.lower(), "not-a-ulid"):
        _names(await alice.request("GET", f"/v1/conversations/{bad}"), "path", "conversation_id")
        _names(
            await alice.request("POST", f"/v1/conversations/{bad}/messages", json={"content": "x"}),
            "path",
            "conversation_id",
        )
    _names(await alice.request("GET", f"{messages}/{sent[0]['id'].lower()}"), "path", "message_id")
    _names(
        await alice.request("GET", f"/v1/attachments/{new_id().lower()}"), "path", "attachment_id"
    )
    _names(await alice.request("GET", f"/v1/contacts/{new_id().lower()}"), "path", "contact_id")
    _names(
        await alice.request("POST", f"/v1/message-requests/{cid.lower()}/accept"),
        "path",
        "conversation_id",
    )
    _names(
        await alice.request(
            "POST", messages, json={"content": "x", "in_reply_to": sent[0]["id"].lower()}
        ),
        "body",
        "in_reply_to",
    )
    # an unknown id in canonical form is still looked up: 404
    missing = await alice.request("GET", f"/v1/conversations/{new_id()}")
    assert missing.status_code == 404, missing.text


async def test_a_lowercase_id_on_the_signed_file_fetch_is_422(instance: Instance) -> None:
    """The signature is checked first (401 unsigned); a signed GET naming a non-canonical id
    is 422, not the 403 of a file the signer may not see."""
    url = f"{instance.base_url}/federation/attachments/{new_id().lower()}"
    async with httpx.AsyncClient() as client, run_fake_peer() as peer:
        assert (await client.get(url)).status_code == 401
        created = int(time.time())
        headers = sign_request(
            method="GET",
            url=url,
            headers={},
            body=b"",
            private_key=peer.key,
            keyid=peer.keyid,
            created=created,
            expires=created + 60,
            nonce=uuid.uuid4().hex,
            components=FETCH_COMPONENTS,
        )
        _names(await client.get(url, headers=headers), "path", "attachment_id")
