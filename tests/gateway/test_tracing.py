"""OpenTelemetry traces across the signed federation hop, between real ``confer serve``
processes exporting to a loopback OTLP/HTTP receiver (``tests/gateway/otlpreceiver.py``).

A trace starts at alice's REST send on A, continues in A's delivery span (its context kept with
the outbox row), crosses to B in a ``traceparent`` the RFC 9421 signature covers, and B's server
span is the child of A's delivery span. B trusts an inbound ``traceparent`` only when a verified
signature covers it. Without ``CONFER_OTLP_ENDPOINT`` nothing is exported and the SDK is never
imported.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import asyncpg
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import ValidationError

from a2a.signatures import DEFAULT_COMPONENTS
from gateway.otlp import traces_url
from gateway.settings import Settings
from tests.gateway.fakepeer import run_fake_peer
from tests.gateway.harness import free_port
from tests.gateway.otlpreceiver import (
    SPAN_KIND_CLIENT,
    SPAN_KIND_SERVER,
    OtlpReceiver,
    run_otlp_receiver,
)
from tests.gateway.serving import Served, confer_serve, serve_env

A2A_ROUTE = "/users/{username}/a2a"
SEND_ROUTE = "/v1/conversations/{conversation_id}/messages"
# Every import the process makes, whenever it makes it, goes to its stderr.
IMPORT_LOG = {"PYTHONPROFILEIMPORTTIME": "1"}


def traced_env(receiver: OtlpReceiver, name: str) -> dict[str, str]:
    return {
        "CONFER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": name,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within a tenth of a second, not five
        **IMPORT_LOG,
    }


async def register(http: httpx.AsyncClient, served: Served, username: str) -> dict[str, Any]:
    response = await http.post(
        f"{served.base_url}/v1/auth/register",
        json={"username": username, "password": "correct horse battery"},
    )
    assert response.status_code == 201, response.text
    return {"token": response.json()["access_token"], "did": response.json()["user"]["did"]}


async def send(
    http: httpx.AsyncClient, served: Served, user: dict[str, Any], to: str, text: str
) -> str:
    """Start a direct conversation with ``to`` and post ``text`` with request id ``send``."""
    auth = {"Authorization": f"Bearer {user['token']}"}
    started = await http.post(
        f"{served.base_url}/v1/conversations", json={"participant_did": to}, headers=auth
    )
    assert started.status_code in (200, 201), started.text
    conversation_id = str(started.json()["id"])
    posted = await http.post(
        f"{served.base_url}/v1/conversations/{conversation_id}/messages",
        json={"content": text},
        headers={**auth, "X-Request-ID": "send"},
    )
    assert posted.status_code == 201, posted.text
    return conversation_id


def modules_imported(served: Served) -> set[str]:
    """The modules the process imported so far (``PYTHONPROFILEIMPORTTIME`` lines)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in served.output().splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


async def test_a_trace_crosses_the_signed_federation_hop(make_database) -> None:
    async with run_otlp_receiver() as receiver, httpx.AsyncClient(timeout=30) as http:
        a_port, b_port = free_port(), free_port()
        a_env = serve_env(a_port, await make_database(), **traced_env(receiver, "confer-a"))
        b_env = serve_env(b_port, await make_database(), **traced_env(receiver, "confer-b"))
        async with confer_serve(a_env) as a, confer_serve(b_env) as b:
            alice = await register(http, a, "alice")
            bob = await register(http, b, "bob")
            conversation_id = await send(http, a, alice, bob["did"], "Hello Bob, traced")

            post = await receiver.wait_for(
                lambda s: (
                    s.service == "confer-a" and s.attributes.get("confer.request_id") == "send"
                )
            )
            delivery = await receiver.wait_for(
                lambda s: s.service == "confer-a" and s.kind == SPAN_KIND_CLIENT
            )
            inbound = await receiver.wait_for(
                lambda s: s.service == "confer-b" and s.attributes.get("http.route") == A2A_ROUTE
            )
            assert "opentelemetry.sdk" in modules_imported(a)

    # the REST send: a server span named by its route template, never the raw path
    assert post.kind == SPAN_KIND_SERVER
    assert post.name == f"POST {SEND_ROUTE}"
    assert post.attributes["http.route"] == SEND_ROUTE
    assert post.attributes["http.response.status_code"] == 201
    assert post.parent_span_id == ""
    assert conversation_id not in repr(post)
    assert post.instance == f"did:web:localhost%3A{a_port}"
    # the delivery continues the send's trace through the outbox row
    assert delivery.name == "SendMessage"
    assert delivery.trace_id == post.trace_id
    assert delivery.parent_span_id == post.span_id
    assert delivery.attributes["confer.delivery.outcome"] == "delivered"
    assert delivery.attributes["http.response.status_code"] == 200
    # B continued the trace from the signed traceparent: its span is the delivery's child
    assert inbound.kind == SPAN_KIND_SERVER
    assert inbound.name == f"POST {A2A_ROUTE}"
    assert inbound.trace_id == delivery.trace_id
    assert inbound.parent_span_id == delivery.span_id
    assert inbound.attributes["http.response.status_code"] == 200
    assert inbound.instance == f"did:web:localhost%3A{b_port}"


def traceparent() -> tuple[str, str, str]:
    """A fresh valid ``traceparent`` and its trace id and parent span id (W3C §3.2)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


async def test_only_a_verified_signature_covering_traceparent_joins_a_trace(
    make_database,
) -> None:
    covering = (*DEFAULT_COMPONENTS, "traceparent")
    async with (
        run_otlp_receiver() as receiver,
        run_fake_peer() as peer,
        httpx.AsyncClient(timeout=30) as http,
    ):
        port = free_port()
        env = serve_env(port, await make_database(), **traced_env(receiver, "confer-b"))
        async with confer_serve(env) as b:
            await register(http, b, "bob")
            url = f"{b.base_url}/users/bob/a2a"
            sent: dict[str, tuple[str, str, int]] = {}

            async def post(case: str, headers: dict[str, str], body: bytes, tp: str) -> None:
                headers = {**headers, "X-Request-ID": case}
                response = await http.post(url, content=body, headers=headers)
                sent[case] = (tp, response.text, response.status_code)

            tp, _, _ = traceparent()
            body = peer.rpc("unsigned")
            await post(
                "unsigned", {"Content-Type": "application/json", "traceparent": tp}, body, tp
            )

            tp, _, _ = traceparent()
            body = peer.rpc("forged")
            forged = peer.signed_headers(
                url,
                body,
                key=Ed25519PrivateKey.generate(),  # not the key mallory's document lists
                components=covering,
                extra={"traceparent": tp},
            )
            await post("forged", forged, body, tp)

            tp, _, _ = traceparent()
            body = peer.rpc("not covered")
            await post("uncovered", {**peer.signed_headers(url, body), "traceparent": tp}, body, tp)

            body = peer.rpc("malformed")
            bad = "00-not-a-trace-context"
            malformed = peer.signed_headers(
                url, body, components=covering, extra={"traceparent": bad}
            )
            await post("malformed", malformed, body, bad)

            tp, trace_id, parent_id = traceparent()
            body = peer.rpc("covered")
            signed = peer.signed_headers(
                url,
                body,
                components=(*covering, "tracestate"),
                extra={"traceparent": tp, "tracestate": "mallory=1"},
            )
            await post("covered", signed, body, tp)

            spans = {case: await receiver.wait_for(receiver.by_request_id(case)) for case in sent}

    assert [sent[c][2] for c in ("unsigned", "forged")] == [401, 401], sent
    assert [sent[c][2] for c in ("uncovered", "malformed", "covered")] == [200, 200, 200], sent
    for case in ("unsigned", "forged", "uncovered", "malformed"):
        span = spans[case]
        assert span.attributes["http.route"] == A2A_ROUTE
        assert span.parent_span_id == "", case  # a new trace, not the one named
        assert span.trace_id not in sent[case][0], case
    joined = spans["covered"]
    assert (joined.trace_id, joined.parent_span_id) == (trace_id, parent_id)


async def test_without_an_endpoint_nothing_is_exported_or_loaded(make_database) -> None:
    async with (
        run_otlp_receiver() as receiver,
        run_fake_peer() as peer,
        httpx.AsyncClient(timeout=30) as http,
    ):
        database_url = await make_database()
        # the standard variable alone turns nothing on: Confer's setting does
        env = serve_env(
            free_port(), database_url, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, **IMPORT_LOG
        )
        async with confer_serve(env) as a:
            alice = await register(http, a, "alice")
            await send(http, a, alice, peer.did, "to a peer that answers 404")
            url = f"{a.base_url}/users/alice/a2a"
            body = peer.rpc("inbound, signed, with a traceparent")
            tp, _, _ = traceparent()
            headers = peer.signed_headers(
                url,
                body,
                components=(*DEFAULT_COMPONENTS, "traceparent"),
                extra={"traceparent": tp},
            )
            inbound = await http.post(url, content=body, headers=headers)
            assert inbound.status_code == 200, inbound.text
            await _delivery_attempted(database_url)
            await asyncio.sleep(1.0)  # a batch exporter would have sent by now
            imported = modules_imported(a)
    assert "gateway.workers.delivery" in imported  # the import log is there
    assert not {m for m in imported if m.startswith("opentelemetry.sdk")}
    assert "gateway.otlp" not in imported
    assert receiver.requests == 0


async def _delivery_attempted(database_url: str, within: float = 60.0) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        async with asyncio.timeout(within):
            while True:
                if await conn.fetchval(
                    "SELECT count(*) FROM audit_log WHERE action = 'federation.outbound'"
                ):
                    return
                await asyncio.sleep(0.2)
    finally:
        await conn.close()


def test_the_endpoint_must_be_an_http_url() -> None:
    for bad in ("collector:4318", "ftp://collector", "http://"):
        with pytest.raises(ValidationError, match="otlp_endpoint"):
            Settings(otlp_endpoint=bad)
    assert Settings(otlp_endpoint="").otlp_endpoint is None
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_url("https://c.example/otlp/v1/traces") == "https://c.example/otlp/v1/traces"
