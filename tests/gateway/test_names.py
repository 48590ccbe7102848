"""Names shown to other people are cleaned on the way in: a display name (registration,
``PATCH /v1/me``), a group name (``POST /v1/conversations``, ``PATCH /v1/conversations/{id}``)
and a peer's group name lose control, bidi and zero-width characters and have their whitespace
collapsed and trimmed, like a peer's ``senderName``; a name with nothing left is 422
``validation_failed``. Real HTTP against real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from a2a.confer import ConferConversation
from gateway.services.groups import group_name
from gateway.services.public_profiles import display_name
from models.base import clean_name
from tests.gateway.harness import Instance, run_instance

CLEANED = [
    ("\u202eevil", "evil"),  # right-to-left override
    ("line1\nline2", "line1 line2"),
    ("admin\u200b", "admin"),  # zero-width space
    ("  Ana\u00a0\u00a0María \t", "Ana María"),
    ("a\u2066b\u2069c\u200d\u2028d", "abc d"),  # isolates, zero-width joiner, line separator
    ("Zoë 😀", "Zoë 😀"),
]
EMPTY = ["", "\t", "   ", "\u200b\u202e", "\n\r"]


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


def test_one_cleaning_for_every_name() -> None:
    for raw, shown in CLEANED:
        assert clean_name(raw) == shown
        assert display_name(raw) == shown  # a peer's senderName / profile name
        claim = ConferConversation(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", home="did:web:b", name=raw)
        assert group_name(claim) == shown  # a peer's group name
    for raw in EMPTY:
        assert clean_name(raw) is None and display_name(raw) is None
        claim = ConferConversation(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", home="did:web:b", name=raw)
        assert group_name(claim) is None  # the replica keeps the name it has
    long = ConferConversation(id="01ARZ3NDEKTSV4RRFFQ69G5FAV", home="did:web:b", name="x " * 200)
    assert len(group_name(long) or "") <= 255


def _refused(response, field: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["code"] == "validation_failed"
    assert [e["loc"] for e in body["errors"]] == [["body", field]], body


async def test_display_names_are_cleaned(instance: Instance) -> None:
    alice = await instance.register("alice")
    for raw, shown in CLEANED:
        patched = await alice.request("PATCH", "/v1/me", json={"display_name": raw})
        assert patched.status_code == 200, patched.text
        assert patched.json()["display_name"] == shown
        me = await alice.request("GET", "/v1/me")
        assert me.json()["display_name"] == shown
    for raw in EMPTY:
        _refused(await alice.request("PATCH", "/v1/me", json={"display_name": raw}), "display_name")
    assert (await alice.request("GET", "/v1/me")).json()["display_name"] == CLEANED[-1][1]
    cleared = await alice.request("PATCH", "/v1/me", json={"display_name": None})
    assert cleared.status_code == 200 and cleared.json()["display_name"] is None

    registered = await instance.client.post(
        "/v1/auth/register",
        json={
            "username": "bob",
            "password": "correct horse battery",
            "display_name": "\u202eBob\n",
        },
    )
    assert registered.status_code == 201, registered.text
    bob = await instance.client.get(
        "/v1/me", headers={"Authorization": f"Bearer {registered.json()['access_token']}"}
    )
    assert bob.json()["display_name"] == "Bob"
    blank = await instance.client.post(
        "/v1/auth/register",
        json={"username": "carol", "password": "correct horse battery", "display_name": "\u200b"},
    )
    _refused(blank, "display_name")


async def test_group_names_are_cleaned(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    for raw, shown in CLEANED:
        created = await alice.request(
            "POST",
            "/v1/conversations",
            json={"type": "group", "name": raw, "participant_dids": [bob.did]},
        )
        assert created.status_code == 201, created.text
        assert created.json()["name"] == shown
    group = created.json()["id"]
    for raw in EMPTY:
        _refused(
            await alice.request(
                "POST",
                "/v1/conversations",
                json={"type": "group", "name": raw, "participant_dids": [bob.did]},
            ),
            "name",
        )
        _refused(
            await alice.request("PATCH", f"/v1/conversations/{group}", json={"name": raw}), "name"
        )
    for raw, shown in CLEANED:
        renamed = await alice.request("PATCH", f"/v1/conversations/{group}", json={"name": raw})
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["name"] == shown
    seen = await bob.request("GET", f"/v1/conversations/{group}")
    assert seen.json()["name"] == CLEANED[-1][1]
