"""The instance federation policy: modes, wildcards, the signed refusal of an inbound peer, the
outbound delivery that fails without being sent, the admin API and CLI, and a change made in
one process reaching another through NOTIFY — real instances on loopback, real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import asyncpg
import httpx
import pytest

from a2a.signatures import parse_signature, verify_response
from gateway.errors import FederationRefusedError, ValidationFailedError
from gateway.services.federation_policy import (
    FederationPolicy,
    normalise_pattern,
    parse_rule,
)
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import NATS_URL, User, free_port, reachable, run_instance
from tests.gateway.serving import confer_serve, serve_env
from tests.gateway.test_delivery_status import deliveries, delivery_event


def policy(mode: Any, *entries: tuple[str, str]) -> FederationPolicy:
    rules = tuple(parse_rule(normalise_pattern(p), lst) for lst, p in entries)
    return FederationPolicy(mode, rules, local_did="did:web:home.example")


def test_modes_wildcards_ports_and_dids() -> None:
    deny = policy("denylist", ("deny", "*.spam.example"), ("deny", "did:web:ok.example:users:eve"))
    assert deny.verdict("did:web:a.spam.example:users:x").allowed is False
    assert deny.verdict("did:web:deep.a.spam.example").allowed is False
    assert deny.verdict("did:web:spam.example").allowed is True  # the wildcard is subdomains only
    assert deny.verdict("did:web:ok.example:users:eve").allowed is False
    assert deny.verdict("did:web:ok.example:users:bob").allowed is True
    assert "deny list" in deny.verdict("did:web:x.spam.example").reason

    allow = policy(
        "allowlist",
        ("allow", "*.example.org"),
        ("allow", "localhost:8123"),
        ("deny", "bad.example.org"),
    )
    assert allow.verdict("did:web:a.example.org").allowed is True
    assert allow.verdict("did:web:bad.example.org").allowed is False  # deny wins
    assert allow.verdict("did:web:localhost%3A8123:users:b").allowed is True
    assert allow.verdict("did:web:localhost%3A8124:users:b").allowed is False  # other port
    assert allow.verdict("did:web:example.net").reason.endswith("not on this instance's allow list")
    assert allow.verdict("did:web:home.example:users:me").allowed is True  # never ourselves
    assert allow.verdict("did:key:z6Mk").allowed is False  # no domain: only a DID entry passes
    with pytest.raises(FederationRefusedError):
        allow.check("did:web:example.net")

    everything = policy("open", ("deny", "*.spam.example"))
    assert everything.verdict("did:web:a.spam.example").allowed is True

    assert normalise_pattern(" *.Example.ORG. ") == "*.example.org"
    for bad in ("exa mple.org", "*", "a.*.org", "example.org:99999", "10.0.0.0/8", "did:web:"):
        with pytest.raises(ValidationFailedError):
            normalise_pattern(bad)


async def _audit(database_url: str, action: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT details_json FROM audit_log WHERE action = $1 ORDER BY id", action
        )
    finally:
        await conn.close()
    return [json.loads(r[0]) if isinstance(r[0], str) else dict(r[0]) for r in rows]


async def _inbound_count(user: User, cid: str) -> int:
    response = await user.request("GET", f"/v1/conversations/{cid}/messages")
    return len(response.json()["items"])


async def test_refused_both_ways_with_a_signed_refusal_and_the_admin_api(make_database) -> None:
    db_a, db_b = await make_database(), await make_database()
    async with (
        run_instance(db_a, admin_usernames="alice") as a,
        run_instance(db_b, admin_usernames="bob") as b,
    ):
        alice, bob = await a.register("alice"), await b.register("bob")
        carol = await a.register("carol")
        port_a, port_b = (int(i.base_url.rsplit(":", 1)[1]) for i in (a, b))
        cid = (await alice.direct_with(bob.did))["id"]
        async with alice.websocket() as ws:
            first = await alice.send(cid, "before any policy")
            await delivery_event(ws, first["id"], "delivered")

            # Only admins; a malformed pattern is a 422 with nothing stored.
            assert (await carol.request("GET", "/v1/admin/federation/policy")).status_code == 403
            bad = await bob.request(
                "POST", "/v1/admin/federation/policy/entries", json={"pattern": "*", "list": "deny"}
            )
            assert bad.status_code == 422 and bad.json()["code"] == "validation_failed"

            # B denies A's domain (in denylist mode): A's next message is refused at B's door
            # with a signed JSON-RPC refusal, audited, and A's sender sees the failure.
            entry = await bob.request(
                "POST",
                "/v1/admin/federation/policy/entries",
                json={"pattern": f"LOCALHOST:{port_a}", "list": "deny", "note": "test"},
            )
            assert entry.status_code == 201, entry.text
            assert entry.json()["pattern"] == f"localhost:{port_a}"
            mode = await bob.request(
                "PATCH", "/v1/admin/federation/policy", json={"mode": "denylist"}
            )
            assert mode.status_code == 200 and mode.json()["mode"] == "denylist"
            [shown] = mode.json()["entries"]
            assert shown["list"] == "deny" and shown["note"] == "test"

            second = await alice.send(cid, "after B denied A")
            failed = (await delivery_event(ws, second["id"], "failed"))["delivery"]
            assert "HTTP 403" in failed["reason"] and "federation_refused" in failed["reason"]
            rejected = await _audit(db_b, "federation.inbound.rejected")
            assert rejected[-1]["code"] == "federation_refused"
            assert [d["mode"] for d in await _audit(db_b, "admin.federation.mode")] == ["denylist"]
            assert (await _audit(db_b, "admin.federation.deny"))[0]["pattern"] == (
                f"localhost:{port_a}"
            )

            # The refusal is signed by B's instance key over @status, type and digest.
            body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {}})
            url = f"{b.base_url}/users/bob/a2a"
            signer = a.state.identity.signer_for(alice.did)
            headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
            headers |= signer.headers_for("POST", url, headers, body.encode())
            async with httpx.AsyncClient() as client:
                answer = await client.post(url, content=body, headers=headers)
            assert answer.status_code == 403
            assert answer.json()["error"]["data"]["code"] == "federation_refused"
            parsed = parse_signature(answer.headers)
            assert parsed.keyid == f"{b.did}#{b.state.identity.signing_key.fragment}"
            verify_response(
                parsed,
                status=403,
                headers=answer.headers,
                body=answer.content,
                public_key=b.state.identity.signing_key.public_key,
                now=int(time.time()),
            )

            # B lifts it; A denies B instead: the message fails on A, never sent.
            gone = await bob.request(
                "DELETE", f"/v1/admin/federation/policy/entries/localhost:{port_a}"
            )
            assert gone.status_code == 200
            again = await bob.request(
                "DELETE", f"/v1/admin/federation/policy/entries/localhost:{port_a}"
            )
            assert again.status_code == 404
            bob_cid = (await bob.direct_with(alice.did))["id"]
            seen_by_bob = await _inbound_count(bob, bob_cid)
            await alice.request("PATCH", "/v1/admin/federation/policy", json={"mode": "denylist"})
            await alice.request(
                "POST",
                "/v1/admin/federation/policy/entries",
                json={"pattern": f"localhost:{port_b}", "list": "deny"},
            )
            third = await alice.send(cid, "to a denied peer")
            failed = (await delivery_event(ws, third["id"], "failed"))["delivery"]
            assert failed["reason"] == (
                "refused by this instance's federation policy: "
                f"localhost:{port_b} is on this instance's deny list"
            )
            [status] = await deliveries(alice, cid, third["id"])
            assert status["state"] == "failed" and status["attempts"] == 1
            # A stranger's DID on a denied domain is not even resolved.
            contact = await alice.request(
                "POST", "/v1/contacts", json={"did": f"did:web:localhost%3A{port_b}:users:zed"}
            )
            assert contact.status_code == 403 and contact.json()["code"] == "federation_refused"

            # Allow list: only the allowed domain passes; a wildcard that does not match B fails.
            await alice.request("DELETE", f"/v1/admin/federation/policy/entries/localhost:{port_b}")
            await alice.request("PATCH", "/v1/admin/federation/policy", json={"mode": "allowlist"})
            await alice.request(
                "POST",
                "/v1/admin/federation/policy/entries",
                json={"pattern": "*.localhost", "list": "allow"},
            )
            fourth = await alice.send(cid, "not allowed")
            failed = (await delivery_event(ws, fourth["id"], "failed"))["delivery"]
            assert failed["reason"].endswith("localhost is not on this instance's allow list")
            await alice.request(
                "POST",
                "/v1/admin/federation/policy/entries",
                json={"pattern": f"localhost:{port_b}", "list": "allow"},
            )
            fifth = await alice.send(cid, "allowed")
            await delivery_event(ws, fifth["id"], "delivered")
            assert await _inbound_count(bob, bob_cid) == seen_by_bob + 1


async def _cli(database_url: str, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "admin",
        "federation",
        *args,
        env={**os.environ, "CONFER_DATABASE_URL": database_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    return output.decode()


async def _signed_status(peer: Any, public_url: str, served: Any) -> int:
    """POST a signed message for bob to ``served`` (signed over the shared public URL)."""
    body = peer.rpc("hi")
    headers = peer.signed_headers(f"{public_url}/users/bob/a2a", body)
    async with httpx.AsyncClient() as client:
        answer = await client.post(
            f"{served.base_url}/users/bob/a2a", content=body, headers=headers
        )
    return answer.status_code


@pytest.mark.skipif(
    not reachable(NATS_URL), reason="needs the local NATS on 4222 (.ci/run starts it)"
)
async def test_the_cli_changes_reach_two_running_processes(make_database) -> None:
    database_url = await make_database()
    port_1, port_2 = free_port(), free_port()
    public = f"http://localhost:{port_1}"
    # two processes on one database need a shared bus (confer serve refuses otherwise)
    bus = {
        "CONFER_NATS_URL": NATS_URL,
        "CONFER_AGENT_QUEUE_STREAM": f"POLICY_{port_1}",
        "CONFER_AGENT_QUEUE_SUBJECT_PREFIX": f"policy{port_1}.",
    }
    env_1 = serve_env(port_1, database_url, **bus)
    env_2 = serve_env(port_2, database_url, CONFER_PUBLIC_URL=public, **bus)
    async with (
        run_fake_peer() as mallory,
        confer_serve(env_1) as one,
        confer_serve(env_2) as two,
    ):
        async with httpx.AsyncClient(base_url=one.base_url) as client:
            registered = await client.post(
                "/v1/auth/register", json={"username": "bob", "password": "correct horse battery"}
            )
            assert registered.status_code == 201, registered.text
        # Both processes accept the stranger first (200: the JSON-RPC answer).
        for served in (one, two):
            assert await _signed_status(mallory, public, served) == 200

        mallory_host = mallory.base_url.removeprefix("http://")
        assert "deny list" in await _cli(database_url, "deny", mallory_host, "--note", "spam")
        assert "denylist" in await _cli(database_url, "mode", "denylist")
        listed = await _cli(database_url, "list")
        assert "mode denylist" in listed and f"deny {mallory_host}  spam" in listed

        # Each process hears the NOTIFY: within seconds, not at the 30 s reload.
        for served in (one, two):
            deadline = time.monotonic() + 10
            while await _signed_status(mallory, public, served) != 403:
                assert time.monotonic() < deadline, "the policy change never reached a process"
                await asyncio.sleep(0.2)
        fetches = mallory.fetches
        assert await _signed_status(mallory, public, two) == 403
        assert mallory.fetches == fetches  # a refused peer's document is not fetched

        await _cli(database_url, "remove", mallory_host)
        for served in (one, two):
            deadline = time.monotonic() + 10
            while await _signed_status(mallory, public, served) != 200:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
    audit = await _audit(database_url, "admin.federation.deny")
    assert audit == [{"pattern": mallory_host, "note": "spam", "via": "cli"}]
