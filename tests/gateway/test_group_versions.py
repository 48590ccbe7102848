"""Membership events carry the version of the group's state they made: a replica takes an
event only when it is newer than the state it holds, so a late or repeated event never undoes
a newer one, and a gap is taken as it comes (each event carries the whole state). Real
instances on loopback; the stale events are the home's own, signed again with its key."""

from __future__ import annotations

import json
from typing import Any

from tests.gateway.harness import Instance
from tests.gateway.harness import run_instance as run
from tests.gateway.test_group_membership import (
    member_dids,
    new_group,
    participant_id,
    the_group,
    until,
    view,
)


async def events(home: Instance) -> list[dict[str, Any]]:
    """The membership events the home queued, oldest first (``SendMessage`` params)."""
    async with home.state.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT payload_json FROM federation_outbox
               WHERE payload_json #> '{message,metadata,confer,membership}' IS NOT NULL
               ORDER BY id"""
        )
    out = []
    for r in rows:
        payload = r["payload_json"]
        out.append(json.loads(payload) if isinstance(payload, str) else dict(payload))
    return out


def state_of(event: dict[str, Any]) -> dict[str, Any]:
    return dict(event["message"]["metadata"]["confer"]["conversation"])


async def deliver(home: Instance, replica: Instance, params: dict[str, Any]) -> dict[str, Any]:
    """Send ``params`` to the replica's ``/a2a`` as the home would: signed by its instance."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
    raw = body.encode()
    url = f"{replica.base_url}/a2a"
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    headers |= home.state.identity.signer_for(home.did).headers_for("POST", url, headers, raw)
    answer = await replica.client.post("/a2a", content=raw, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def answer_text(answer: dict[str, Any]) -> str:
    return str(answer["result"]["message"]["parts"][0]["text"])


async def stale_audits(instance: Instance) -> list[dict[str, Any]]:
    async with instance.state.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT details_json FROM audit_log WHERE action = 'group.event.stale' ORDER BY id"
        )
    return [json.loads(r[0]) if isinstance(r[0], str) else dict(r[0]) for r in rows]


async def test_a_replica_ignores_events_older_than_its_state(make_database) -> None:
    async with run(await make_database()) as a, run(await make_database()) as b:
        alice = await a.register("alice")
        bob, bea = await b.register("bob"), await b.register("bea")
        g1 = await new_group(alice, "G1", [bob.did, bea.did])
        rb = (await the_group(bob))["id"]
        renamed = await alice.request("PATCH", f"/v1/conversations/{g1}", json={"name": "G2"})
        assert renamed.status_code == 200, renamed.text
        await until(bob, rb, lambda v: v["name"] == "G2", "G2 on B")
        create, rename = await events(a)
        assert state_of(create)["version"] == 1 and state_of(rename)["version"] == 2

        # The create event again (late, or a duplicate): ignored, answered as a success.
        answer = await deliver(a, b, create)
        assert "error" not in answer and answer_text(answer) == "Already applied."
        # The rename event twice: the same version is no newer either.
        assert answer_text(await deliver(a, b, rename)) == "Already applied."
        seen = await view(bob, rb)
        assert seen is not None and seen["name"] == "G2"
        assert [(d["version"], d["held"]) for d in await stale_audits(b)] == [(1, 2), (2, 2)]

        # The home kicks bea (version 3); replaying version 2, which still lists her, later
        # does not bring her back.
        home = await view(alice, g1)
        assert home is not None
        kicked = await alice.request(
            "DELETE", f"/v1/conversations/{g1}/participants/{participant_id(home, bea.did)}"
        )
        assert kicked.status_code == 204, kicked.text
        await until(bea, rb, lambda v: v is None, "bea out on B")
        assert bea.did in state_of(rename)["members"]
        assert answer_text(await deliver(a, b, rename)) == "Already applied."
        assert await view(bea, rb) is None
        seen = await view(bob, rb)
        assert seen is not None and bea.did not in member_dids(seen)

        # A gap is fine: version 7 (the home's key, its whole state) is taken at once ...
        newer = json.loads(json.dumps(rename))
        newer["message"]["messageId"] = "01J00000000000000000000007"
        newer["message"]["metadata"]["confer"]["conversation"].update(
            name="G7", version=7, members=[alice.did, bob.did]
        )
        assert answer_text(await deliver(a, b, newer)) == "Applied."
        await until(bob, rb, lambda v: v["name"] == "G7", "G7 on B")
        # ... and version 4, older than what B now holds, is not.
        older = json.loads(json.dumps(newer))
        older["message"]["messageId"] = "01J00000000000000000000004"
        older["message"]["metadata"]["confer"]["conversation"].update(name="G4", version=4)
        assert answer_text(await deliver(a, b, older)) == "Already applied."
        seen = await view(bob, rb)
        assert seen is not None and seen["name"] == "G7"
