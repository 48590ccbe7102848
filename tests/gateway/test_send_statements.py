"""How many statements (round trips to PostgreSQL) one REST post costs: a regression guard on
counts, not on time (the time lives in ``bench/send.py``).

The requests run through an in-process ASGI client against a served instance, so the count
is of the request's own connections (:mod:`tests.gateway.statements`), never of the
background workers'.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from gateway.ids import new_id, next_after
from gateway.store.messages import _NEXT_AFTER
from tests.gateway.harness import Instance, User, run_instance
from tests.gateway.statements import counting

# What a post costs now, authentication included: a regression makes these fail. Lower them
# when a change makes a post cheaper.
DIRECT_POST = 4
GROUP_POST = 4


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


async def _statements(instance: Instance, user: User, conversation_id: str) -> list[str]:
    """The statements of the third post (the first ones fill per-process caches).

    No post, the first included, may make asyncpg introspect a type of Confer's schema: a
    pool connection learns those when it opens, whichever connection a post lands on.
    """
    transport = httpx.ASGITransport(app=instance.app)
    async with httpx.AsyncClient(transport=transport, base_url=instance.base_url) as client:
        for i in range(3):
            with counting(instance.state.pool) as statements:
                response = await client.post(
                    f"/v1/conversations/{conversation_id}/messages",
                    json={"content": f"hello @someone {i}"},
                    headers=user.headers,
                )
            assert response.status_code == 201, response.text
            assert not any("typeinfo_tree" in s for s in statements), "\n".join(statements)
    return statements


def _locks_the_conversation(statement: str) -> bool:
    """A statement that locks a conversation's row: one with ``FOR UPDATE``, or the post's
    function (migration 0030), which locks it first."""
    return ("FOR UPDATE" in statement and "conversations" in statement) or (
        "confer_post_message(" in statement
    )


def _check_shape(statements: list[str]) -> None:
    """One transaction, the conversation locked once, no pool reset query."""
    assert statements.count("BEGIN;") == 1, statements
    assert statements.count("COMMIT;") == 1, statements
    assert sum(_locks_the_conversation(s) for s in statements) == 1, statements
    assert not any("RESET ALL" in s for s in statements), statements


async def test_a_direct_post_costs_at_most_the_known_round_trips(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    statements = await _statements(instance, alice, cid)
    _check_shape(statements)
    assert len(statements) <= DIRECT_POST, "\n".join(statements)


async def test_a_group_post_costs_at_most_the_known_round_trips(instance: Instance) -> None:
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    carol = await instance.register("carol")
    response = await alice.request(
        "POST",
        "/v1/conversations",
        json={"type": "group", "name": "g", "participant_dids": [bob.did, carol.did]},
    )
    assert response.status_code == 201, response.text
    statements = await _statements(instance, alice, response.json()["id"])
    _check_shape(statements)
    assert len(statements) <= GROUP_POST, "\n".join(statements)


async def test_the_counter_sees_every_statement_of_a_request(instance: Instance) -> None:
    """The counter itself: a post's statements include its insert (the post's function) and
    its stream append."""
    alice = await instance.register("alice")
    bob = await instance.register("bob")
    cid = (await alice.direct_with(bob.did))["id"]
    statements = await _statements(instance, alice, cid)
    assert any("confer_post_message(" in s for s in statements)
    assert any("INSERT INTO user_events" in s for s in statements)


async def test_the_head_claims_the_id_after_its_own_in_sql(database_url: str) -> None:
    """The statement's ULID increment (when the head is not below a candidate) is
    :func:`gateway.ids.next_after`, carries included."""
    conn = await asyncpg.connect(database_url)
    try:
        for value in [new_id(), "01HZX3Y4Z5A6B7C8D9E0F1G2HZ", "01HZX3Y4Z5A6B7C8D9E0F1GZZZ"]:
            sql = "SELECT " + _NEXT_AFTER.format(ulid="$1::text")
            assert await conn.fetchval(sql, value) == next_after(value)
    finally:
        await conn.close()
