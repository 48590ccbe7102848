"""Values PostgreSQL cannot hold get a 422 naming the problem, never a 500, never a row.

JSON has no NaN or infinity (RFC 8259 §6) but ``1e400`` parses as infinity; ``jsonb`` refuses
``\\u0000`` and lone surrogates; ``INTEGER`` columns stop at 2^31 − 1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, run_instance

JSON = {"content-type": "application/json"}


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[tuple[Instance, User, FakePeer]]:
    async with run_fake_peer() as peer, run_instance(database_url) as instance:
        alice = await instance.register("alice")
        added = await alice.request("POST", "/v1/contacts", json={"did": peer.did})
        assert added.status_code == 201, added.text
        yield instance, alice, peer


async def count(instance: Instance, table: str) -> int:
    async with instance.state.pool.acquire() as conn:
        return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))


async def raw(user: User, method: str, path: str, body: str, **kwargs: object) -> dict:
    headers = {**JSON, **kwargs.pop("headers", {})}  # type: ignore[dict-item]
    response = await user.request(method, path, content=body, headers=headers, **kwargs)
    assert response.status_code == 422, (path, body, response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json")
    return dict(response.json())


async def test_knowledge_priority_is_bounded(setup) -> None:
    _, alice, _ = setup
    for priority in (2_147_483_648, -99_999_999_999):
        body = f'{{"category":"ops","title":"x","content":"y","priority":{priority}}}'
        problem = await raw(alice, "POST", "/v1/knowledge", body)
        assert problem["code"] == "validation_failed"
    created = await alice.request(
        "POST", "/v1/knowledge", json={"category": "ops", "content": "y", "priority": 5}
    )
    assert created.status_code == 201, created.text
    entry = created.json()["id"]
    problem = await raw(alice, "PATCH", f"/v1/knowledge/{entry}", '{"priority":99999999999}')
    assert problem["code"] == "validation_failed"
    assert (await alice.request("GET", f"/v1/knowledge/{entry}")).json()["priority"] == 5


@pytest.mark.parametrize(
    "bad",
    ["1e400", "-1e400", '"\\ud800"', '"a\\u0000b"', '{"\\udfff": 1}'],
    ids=["infinity", "minus-infinity", "lone-surrogate", "nul", "surrogate-key"],
)
async def test_free_json_fields_refuse_unstorable_values(setup, bad: str) -> None:
    instance, alice, peer = setup
    conversation = await alice.request(
        "POST",
        "/v1/conversations",
        json={"type": "direct_user_agent", "participant_did": alice.profile["agent_did"]},
    )
    cid = conversation.json()["id"]
    before = {t: await count(instance, t) for t in ("ambient_context", "messages")}

    await raw(alice, "POST", "/v1/ambient-context", f'{{"alerts":[{{"x":{bad}}}]}}')
    await raw(
        alice,
        "POST",
        f"/v1/conversations/{cid}/messages",
        '{"content_type":"tool_call","content_json":'
        f'{{"call_id":"c1","name":"n","arguments":{{"x":{bad}}}}}}}',
    )
    params = {"peer": peer.did}
    await raw(alice, "PUT", "/v1/project-memory/confer", f'{{"meta":{{"x":{bad}}}}}', params=params)
    assert {t: await count(instance, t) for t in before} == before
    assert await count(instance, "project_memory") == 0


async def test_ambient_parts_are_lists_or_objects(setup) -> None:
    _, alice, _ = setup
    problem = await raw(alice, "POST", "/v1/ambient-context", '{"servers":"x"}')
    assert problem["code"] == "validation_failed"
    ok = await alice.request(
        "POST",
        "/v1/ambient-context",
        json={"servers": [{"name": "web-1", "status": "up"}], "git_state": {"branch": "main"}},
    )
    assert ok.status_code == 201, ok.text
