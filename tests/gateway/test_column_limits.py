"""Every column with a length limit, walked from the live schema, against the REST API of a real
``confer serve``: a value one character past the column's limit, sent where a client's value
reaches that column, is refused with a 4xx and a stable ``code`` — never a 5xx, never a
traceback in the server's log. So are deeply nested, malformed and oversized bodies, headers
and query values on every entry point a client reaches.

Each limited column is either reached by a probe below (a request that stores a short value
there, to prove the path, then the oversized one) or classified: identifiers and hashes the
server makes, values it derives, and what only federation peers send (signed A2A bodies and
DID documents, a separate entry point).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import websockets
from pydantic import TypeAdapter

from a2a import protocol, signatures
from did import resolver, web
from gateway.services import public_profiles
from tests.gateway.harness import free_port
from tests.gateway.serving import Served, confer_serve, serve_env

LIMITED = """SELECT table_name, column_name, data_type, character_maximum_length
             FROM information_schema.columns
             WHERE table_schema = 'public' AND character_maximum_length IS NOT NULL"""

FEDERATION = "sent by federation peers (signed A2A bodies, DID documents), not the REST API"
SERVER = "made or chosen by the server"
ADMIN_ONLY = (
    "admin API only; its model's max_length is the column's (tests/gateway/test_reports.py)"
)
A2A_PUSH = "A2A push-notification config params, bounded before any write (test_a2a_push.py)"
NOT_FROM_CLIENTS: dict[tuple[str, str], str] = {
    **{
        (t, c): FEDERATION
        for t, c in [
            ("a2a_tasks", "caller"),
            ("a2a_tasks", "context_id"),
            ("a2a_tasks", "remote_message_id"),
            ("federation_inbox", "origin_did"),
            ("federation_inbox", "recipient_did"),
            ("federation_inbox", "remote_message_id"),
            ("group_replicas", "home"),
            ("group_replicas", "remote_id"),
            ("peer_agents", "etag"),
            ("peer_agents", "name"),
            ("peer_agents", "organization"),
            ("peer_agents", "did"),
            ("peer_profiles", "display_name"),  # a peer's published profile, cleaned
            ("peer_profiles", "avatar_url"),
            ("signature_nonces", "keyid"),
            ("signature_nonces", "nonce"),
            ("permissions", "action"),
            ("messages", "sender_did"),
        ]
    },
    **{
        (t, c): SERVER
        for t, c in [
            ("a2a_tasks", "state"),
            ("agent_tasks", "status"),
            ("alembic_version", "version_num"),
            ("attachment_fetches", "state"),
            ("audit_log", "action"),
            ("conversation_participants", "participant_type"),
            ("federation_destinations", "destination"),
            ("federation_outbox", "destination"),
            ("federation_outbox", "sender_did"),
            ("federation_outbox", "lane"),  # a conversation id
            ("instance_identity", "did"),
            ("instance_keys", "fragment"),
            ("instance_keys", "purpose"),
            ("api_keys", "prefix"),
            ("concept_relations", "kind"),  # an enum of the model
            ("concept_vaccines", "scope"),  # an enum of the model
            ("concept_measurements", "outcome"),  # an enum of the model
            ("concept_measurements", "declared_agent"),  # MCP only: tests/agents
            ("concepts", "name_key"),  # the folded name, never longer than the name
            ("concepts", "status"),
            ("concepts", "type"),
            ("concept_frames", "alias"),  # from a relation's target, bounded as a name
            ("agents", "did"),
            ("agents", "style"),  # an enum of the model
            ("agent_memories", "type"),  # an enum of the model
            ("conversations", "type"),  # an enum of the model
            ("conversation_participants", "role"),  # an enum of the model
            ("conversation_participants", "notification"),  # an enum of the model
            ("messages", "content_type"),  # an enum of the model
            ("messages", "sender_type"),
            ("messages", "via"),  # an enum of the model
            ("peer_agents", "trust_level"),  # an enum of the model
            ("peer_contacts", "added_via"),
            ("permissions", "decision"),  # an enum of the model
            ("permissions", "decision_scope"),  # an enum of the model
            ("permissions", "level"),
            ("project_memory_versions", "written_via"),
            ("sessions", "platform"),  # an enum of the model
            ("event_payloads", "type"),
            ("user_streams", "epoch"),
            ("username_skeletons", "skeleton"),  # derived from the username
            ("users", "did"),  # derived from the username
            ("mcp_audit_log", "tool_name"),
            ("mcp_audit_log", "target_id"),
            ("mcp_audit_log", "target_table"),
            ("mcp_audit_log", "agent"),  # MCP only: tests/agents/test_mcp_arguments.py
            ("message_translations", "target_language"),  # the probe of its twin below
            ("federation_policy", "mode"),  # an enum of the model
            ("federation_policy_entries", "list"),  # an enum of the model
            ("message_requests", "state"),
            ("message_requests", "sender_did"),  # a peer's DID, bounded like messages.sender_did
            ("reports", "status"),
            ("reports", "category"),  # an enum of the model
            ("reports", "target_type"),  # an enum of the model
            ("reports", "action"),  # an enum of the model
            # only where pgvector exists (the embedded PostgreSQL has it): the owner's table
            # name, and the embedding model the operator configured
            ("embeddings", "owner_table"),
            ("embeddings", "model"),
        ]
    },
    **{
        (t, c): ADMIN_ONLY
        for t, c in [
            ("federation_policy_entries", "pattern"),
            ("federation_policy_entries", "note"),
            ("reports", "resolution_note"),
        ]
    },
    **{
        (t, c): A2A_PUSH
        for t, c in [
            ("a2a_push_configs", "id"),
            ("a2a_push_configs", "url"),
            ("a2a_push_configs", "token"),
            ("a2a_push_configs", "auth_scheme"),
            ("a2a_push_configs", "auth_credentials"),
            ("a2a_push_outbox", "config_id"),
        ]
    },
    ("a2a_push_outbox", "state"): SERVER,
}


def _federation_bounds() -> dict[tuple[str, str], int]:
    """The limits the federation entry points enforce before any work, by the column each
    guards (signature parameters, DID document headers, DIDs, A2A ids)."""
    a2a_id = TypeAdapter(protocol.Id).json_schema()["maxLength"]
    return {
        ("signature_nonces", "keyid"): signatures.MAX_KEYID_LENGTH,
        ("signature_nonces", "nonce"): signatures.MAX_NONCE_LENGTH,
        ("peer_agents", "etag"): resolver.MAX_ETAG_LENGTH,
        ("peer_agents", "did"): web.MAX_DID_LENGTH,
        ("peer_profiles", "display_name"): public_profiles.MAX_NAME_CHARS,
        ("peer_profiles", "avatar_url"): public_profiles.MAX_AVATAR_URL_CHARS,
        ("federation_inbox", "origin_did"): web.MAX_DID_LENGTH,
        ("federation_inbox", "recipient_did"): web.MAX_DID_LENGTH,
        ("messages", "sender_did"): web.MAX_DID_LENGTH,
        ("a2a_tasks", "context_id"): a2a_id,
        ("a2a_tasks", "remote_message_id"): a2a_id,
        ("federation_inbox", "remote_message_id"): a2a_id,
    }


@dataclass
class World:
    """What the probes act on: two users of the served instance and a few of their rows."""

    client: httpx.AsyncClient
    alice: dict[str, str]
    bob: dict[str, Any]
    agent_id: str
    conversation_id: str
    message_id: str
    memory_id: str


@dataclass
class Probe:
    """A request that stores ``value`` in one column: ``build(world, value)`` gives the method,
    path and request keyword arguments; ``short`` is a value that must be accepted (2xx), and
    ``long(n)`` a value of ``n`` characters otherwise as valid."""

    build: Callable[[World, str], tuple[str, str, dict[str, Any]]]
    short: str = "ok"
    long: Callable[[int], str] = lambda n: "a" * n


def _json(method: str, path: Callable[[World], str], field: str, **rest: Any) -> Callable:
    def build(world: World, value: str) -> tuple[str, str, dict[str, Any]]:
        return method, path(world), {"json": {**rest, field: value}}

    return build


MEMORIES = lambda w: f"/v1/agents/{w.agent_id}/memories"  # noqa: E731
KNOWLEDGE = lambda w: "/v1/knowledge"  # noqa: E731
OCCURRENCES = lambda w: "/v1/concepts/occurrences"  # noqa: E731
SEEN = {"session": "s1", "type": "event"}
MESSAGES = lambda w: f"/v1/conversations/{w.conversation_id}/messages"  # noqa: E731


def _language(n: int) -> str:
    """A well-formed BCP 47 tag of ``n`` characters (``zh-Hant-TW``-like)."""
    tag = "zh"
    while len(tag) + 3 <= n:
        tag += "-" + "ab"
    return (tag + "a" * (n - len(tag)))[:n] if len(tag) < n else tag[:n]


def _did(n: int) -> str:
    return ("did:web:" + "a" * n)[:n]


def _idempotent(world: World, value: str) -> tuple[str, str, dict[str, Any]]:
    return (
        "POST",
        MESSAGES(world),
        {"json": {"content": "x"}, "headers": {"Idempotency-Key": value}},
    )


def _upload(world: World, value: str) -> tuple[str, str, dict[str, Any]]:
    return "POST", "/v1/attachments", {"files": {"file": (value, b"hello", "text/plain")}}


def _upload_type(world: World, value: str) -> tuple[str, str, dict[str, Any]]:
    return "POST", "/v1/attachments", {"files": {"file": ("f.txt", b"hello", value)}}


def _model_choice(world: World, provider: str, model: str) -> tuple[str, str, dict[str, Any]]:
    choice = {"provider": provider, "model": model}
    return (
        "PATCH",
        f"/v1/agents/{world.agent_id}",
        {"json": {"model_config": {"summarize": choice}}},
    )


def _project_memory(world: World, value: str) -> tuple[str, str, dict[str, Any]]:
    return (
        "PUT",
        f"/v1/project-memory/{value}",
        {"params": {"peer": world.bob["agent_did"]}, "json": {"facts_md": "f"}},
    )


REPORTS = lambda w: "/v1/reports"  # noqa: E731
PEER_REPORT = {"target_type": "peer", "category": "spam"}

PROBES: dict[tuple[str, str], list[Probe]] = {
    ("reports", "text"): [
        Probe(_json("POST", REPORTS, "text", did="did:web:example.org", **PEER_REPORT))
    ],
    ("reports", "target_did"): [
        Probe(_json("POST", REPORTS, "did", **PEER_REPORT), short="did:web:example.org", long=_did)
    ],
    ("users", "username"): [
        Probe(_json("POST", lambda w: "/v1/auth/register", "username", password="x" * 12))
    ],
    ("users", "display_name"): [Probe(_json("PATCH", lambda w: "/v1/me", "display_name"))],
    ("users", "email"): [
        Probe(
            _json("PATCH", lambda w: "/v1/me", "email"),
            short="a@example.org",
            long=lambda n: "a" * (n - 12) + "@example.org",
        )
    ],
    ("users", "phone"): [
        Probe(
            _json("PATCH", lambda w: "/v1/me", "phone"),
            short="+34600000000",
            long=lambda n: "+" + "6" * (n - 1),
        )
    ],
    ("sessions", "device_id"): [
        Probe(
            _json(
                "POST",
                lambda w: "/v1/auth/login",
                "device_id",
                username="alice",
                password="correct horse battery",
            )
        )
    ],
    ("api_keys", "name"): [Probe(_json("POST", lambda w: "/v1/api-keys", "name"))],
    ("agents", "name"): [Probe(_json("PATCH", lambda w: f"/v1/agents/{w.agent_id}", "name"))],
    ("agents", "primary_language"): [
        Probe(
            _json("PATCH", lambda w: f"/v1/agents/{w.agent_id}", "primary_language"),
            short="en",
            long=_language,
        )
    ],
    ("agent_memories", "project_id"): [
        Probe(_json("POST", MEMORIES, "project_id", type="fact", content="c"))
    ],
    ("agent_memories", "domain"): [
        Probe(_json("POST", MEMORIES, "domain", type="fact", content="c"))
    ],
    **{
        ("knowledge", field): [
            Probe(_json("POST", KNOWLEDGE, field, category="project", content=f"k {field}"))
        ]
        for field in ("title", "source", "project_id", "domain")
    },
    ("knowledge", "category"): [Probe(_json("POST", KNOWLEDGE, "category", content="k cat"))],
    ("conversations", "name"): [
        Probe(
            lambda w, v: (
                "POST",
                "/v1/conversations",
                {"json": {"type": "group", "name": v, "participant_dids": [w.bob["did"]]}},
            )
        ),
        Probe(_json("PATCH", lambda w: f"/v1/conversations/{w.conversation_id}", "name")),
    ],
    ("peer_contacts", "alias"): [
        Probe(lambda w, v: ("POST", "/v1/contacts", {"json": {"did": w.bob["did"], "alias": v}}))
    ],
    ("messages", "language"): [
        Probe(_json("POST", MESSAGES, "language", content="hola"), short="es", long=_language)
    ],
    ("message_idempotency", "key"): [Probe(_idempotent)],
    ("conversation_auto_translations", "language"): [
        Probe(
            _json("PUT", lambda w: f"/v1/conversations/{w.conversation_id}/auto-translation", "to"),
            short="en",
            long=_language,
        )
    ],
    ("threads", "title"): [
        Probe(
            lambda w, v: (
                "POST",
                f"/v1/conversations/{w.conversation_id}/threads",
                {"json": {"root_message_id": w.message_id, "title": v}},
            )
        )
    ],
    ("concepts", "name"): [Probe(_json("POST", OCCURRENCES, "concept", **SEEN), short="Concept")],
    ("concept_occurrences", "session"): [
        Probe(_json("POST", OCCURRENCES, "session", concept="Concept", type="event"))
    ],
    ("concept_occurrences", "project"): [
        Probe(_json("POST", OCCURRENCES, "project", concept="Concept", **SEEN))
    ],
    ("concept_domains", "slug"): [
        Probe(
            lambda w, v: (
                "POST",
                "/v1/concepts/occurrences",
                {"json": {"concept": "Concept", **SEEN, "domains": [v]}},
            ),
            short="slug",
        )
    ],
    ("concept_measurements", "project"): [
        Probe(
            _json(
                "POST",
                lambda w: "/v1/concepts/measurements",
                "project",
                context="c",
                outcome="resolved",
            )
        )
    ],
    ("concept_vaccines", "name"): [
        Probe(_json("PUT", lambda w: "/v1/concepts/vaccines", "name", terms=["t"]))
    ],
    ("project_memory", "project_id"): [Probe(_project_memory)],
    # a summary records the model that wrote it: the agent's choice must fit there
    ("conversation_summaries", "provider"): [
        Probe(lambda w, v: _model_choice(w, v, "m"), short="openai")
    ],
    ("conversation_summaries", "model"): [Probe(lambda w, v: _model_choice(w, "openai", v))],
    ("attachments", "filename"): [
        Probe(_upload, short="notes.txt", long=lambda n: "a" * (n - 4) + ".txt")
    ],
    ("attachments", "content_type"): [
        Probe(_upload_type, short="text/plain", long=lambda n: "text/" + "a" * (n - 5)),
    ],
}


def _classified(table: str, column: str, data_type: str, limit: int) -> bool:
    # CHAR(26) columns are ULIDs (made by the server, or checked by the Ulid pattern where a
    # client names one); CHAR(64) ones are SHA-256 hex digests the server computes.
    return data_type == "character" and limit in (26, 64)


async def _world(base_url: str) -> World:
    client = httpx.AsyncClient(base_url=base_url, timeout=30)
    users = []
    for name in ("alice", "bob"):
        made = await client.post(
            "/v1/auth/register", json={"username": name, "password": "correct horse battery"}
        )
        assert made.status_code == 201, made.text
        users.append(made.json())
    alice, bob = users
    client.headers["Authorization"] = f"Bearer {alice['access_token']}"
    agent_id = alice["user"]["agent_did"].rsplit(":", 1)[-1]
    contact = await client.post("/v1/contacts", json={"did": bob["user"]["agent_did"]})
    assert contact.status_code == 201, contact.text
    conversation = await client.post(
        "/v1/conversations",
        json={"type": "group", "name": "limits", "participant_dids": [bob["user"]["did"]]},
    )
    assert conversation.status_code == 201, conversation.text
    message = await client.post(
        f"/v1/conversations/{conversation.json()['id']}/messages", json={"content": "root"}
    )
    assert message.status_code == 201, message.text
    memory = await client.post(
        f"/v1/agents/{agent_id}/memories", json={"type": "fact", "content": "m"}
    )
    assert memory.status_code == 201, memory.text
    return World(
        client,
        alice["user"],
        bob["user"],
        agent_id,
        conversation.json()["id"],
        message.json()["id"],
        memory.json()["id"],
    )


def _no_traceback(served: Served) -> None:
    output = served.output()
    import os

    if os.environ.get("C13_DUMP"):
        open("/tmp/c13_served.log", "w").write(output)
    assert "Traceback" not in output, output[-5000:]


async def test_every_limited_column_refuses_an_oversized_value_with_a_4xx(
    database_url: str,
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        columns = [tuple(r) for r in await conn.fetch(LIMITED)]
    finally:
        await conn.close()
    assert len(columns) > 150
    unknown = [
        f"{t}.{c} ({d} {n})"
        for t, c, d, n in columns
        if (t, c) not in PROBES and (t, c) not in NOT_FROM_CLIENTS and not _classified(t, c, d, n)
    ]
    assert not unknown, f"classify these columns: a probe, or why no client reaches them: {unknown}"
    stale = set(PROBES) - {(t, c) for t, c, _, _ in columns}
    assert not stale, stale
    limits = {(t, c): n for t, c, _, n in columns}
    wider = {k: (v, limits[k]) for k, v in _federation_bounds().items() if v > limits[k]}
    assert not wider, f"federation bounds wider than their columns: {wider}"

    port = free_port()
    async with confer_serve(serve_env(port, database_url)) as served:
        world = await _world(served.base_url)
        failures = []
        for (table, column), probes in PROBES.items():
            limit = limits[(table, column)]
            for probe in probes:
                method, path, kwargs = probe.build(world, probe.short)
                if table == "users" and column == "username":
                    kwargs["json"]["username"] = "carol"
                short = await world.client.request(method, path, **kwargs)
                if short.status_code >= 300:
                    failures.append(f"{table}.{column}: short value refused {short.text[:300]}")
                value = probe.long(limit + 1)
                assert len(value) == limit + 1, (table, column, value)
                method, path, kwargs = probe.build(world, value)
                long = await world.client.request(method, path, **kwargs)
                code = long.json().get("code") if long.content else None
                if not (400 <= long.status_code < 500 and long.status_code not in (401, 404, 405)):
                    failures.append(f"{table}.{column}: {long.status_code} {long.text[:300]}")
                elif not isinstance(code, str):
                    failures.append(f"{table}.{column}: no code {long.text[:300]}")
        await world.client.aclose()
        assert not failures, "\n".join(failures)
        _no_traceback(served)


KNOWN_ULID = "01J9Z8Q6X3V5N2K7M4R1T0W8YB"


def _fill(path: str, world: World, values: dict[str, str] | None = None) -> str:
    """``path`` with its ``{param}``s filled: from ``values``, else the world's rows (a
    conversation, message, agent, memory, the user ``alice``), else an unknown ULID."""
    known = {
        "conversation_id": world.conversation_id,
        "message_id": world.message_id,
        "agent_id": world.agent_id,
        "memory_id": world.memory_id,
        "username": "alice",
        **(values or {}),
    }
    for name in re.findall(r"{(\w+)}", path):
        path = path.replace("{" + name + "}", known.get(name, KNOWN_ULID))
    return path


def _nested(depth: int) -> str:
    """A JSON text nested ``depth`` objects-in-lists deep."""
    return '{"a": [' * depth + '"leaf"' + "]}" * depth


async def _declared_oversized(base_url: str, method: str, path: str, world: World) -> int:
    """The status a request declaring a 3 MiB body gets before sending any of it (the server
    answers early and closes, RFC 9112 §9.6, so a client still sending may not read it)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    try:
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: {world.client.headers['Authorization']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {3 * 1024 * 1024}\r\n\r\n".encode()
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
    finally:
        writer.close()
    return int(status_line.split()[1])


async def test_nested_malformed_and_oversized_inputs_get_4xx_on_every_entry_point(
    database_url: str,
) -> None:
    port = free_port()
    async with confer_serve(serve_env(port, database_url)) as served:
        world = await _world(served.base_url)
        c = world.client
        deep = _nested(5000)
        bodies: list[tuple[str, str, dict[str, Any]]] = []
        spec = (await c.get("/openapi.json")).json()
        operations = [
            (method.upper(), path, op)
            for path, item in spec["paths"].items()
            for method, op in item.items()
            if method in ("get", "post", "put", "patch", "delete")
        ]
        writable = [
            (method, _fill(path, world))
            for method, path, op in operations
            if "application/json" in op.get("requestBody", {}).get("content", {})
        ]
        assert len(writable) >= 35, len(writable)
        writable += [("POST", "/users/alice/a2a"), ("POST", f"/agents/{world.agent_id}/a2a")]
        writable += [("POST", "/a2a")]
        for method, path in writable:
            headers = {"content-type": "application/json"}
            bodies += [
                (method, path, {"content": deep, "headers": headers}),
                (method, path, {"content": b'{"content": "x', "headers": headers}),
                (method, path, {"content": b"\xff\xfe\x00garbage", "headers": headers}),
                (method, path, {"content": b"[1, 2, 3]", "headers": headers}),
                (method, path, {"content": b'{"content": "\\ud800"}', "headers": headers}),
                (method, path, {"content": b'{"importance": 1e400}', "headers": headers}),
            ]
        failures: list[str] = []
        for method, path, kwargs in bodies:
            try:
                response = await c.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                failures.append(f"{method} {path} {kwargs['content'][:30]!r}: {exc!r}")
                continue
            sent = f"{method} {path} {kwargs['content'][:30]!r}"
            if response.status_code >= 500:
                failures.append(f"{sent}: {response.text[:200]}")
            elif "a2a" not in path and not (
                400 <= response.status_code < 500 and isinstance(response.json().get("code"), str)
            ):
                failures.append(f"{sent}: not a 4xx problem: {response.text[:200]}")
        for method, path in writable:  # a body over the cap is refused before it is read
            status = await _declared_oversized(served.base_url, method, path, world)
            if status != 413:
                failures.append(f"{method} {path} with a 3 MiB body: {status}")
        # query values and path segments: oversized, malformed, NUL
        odd = ["x" * 5000, "%00", "%ED%A0%80", "' OR 1=1 --", "1" * 400]
        probed = 0
        for method, path, op in operations:
            params = [p for p in op.get("parameters", []) if p["in"] in ("path", "query")]
            required = {p["name"]: "a" for p in params if p["in"] == "query" and p.get("required")}
            for param in params:
                for value in odd:
                    probed += 1
                    if param["in"] == "path":
                        url, query = _fill(path, world, {param["name"]: value}), required
                    else:
                        url, query = _fill(path, world), {**required, param["name"]: value}
                    query_text = "&".join(f"{k}={v}" for k, v in query.items())
                    target = f"{url}?{query_text}" if query_text else url
                    body = {"json": {}} if "requestBody" in op else {}
                    response = await c.request(method, target, **body)
                    if response.status_code >= 500:
                        failures.append(f"{method} {target[:120]!r}: {response.status_code}")
        assert probed >= 500, probed
        # A2A bodies with an API key, and WebSocket frames with and without credentials
        key = (await c.post("/v1/api-keys", json={"name": "limits"})).json()["key"]
        for path in ("/users/bob/a2a", f"/agents/{world.agent_id}/a2a", "/a2a"):
            for body in (deep, '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": '):
                response = await c.post(
                    path,
                    content=body,
                    headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
                )
                if response.status_code >= 500:
                    failures.append(f"A2A {path}: {response.status_code} {response.text[:200]}")
        ws_url = served.base_url.replace("http://", "ws://") + "/v1/ws"
        token = world.client.headers["Authorization"].removeprefix("Bearer ")
        for protocols in (["confer.v1"], ["confer.v1", f"bearer.{token}"]):
            for frame in (deep, "{not json", '{"type": "auth", "token": "' + "t" * 100_000 + '"}'):
                async with websockets.connect(ws_url, subprotocols=protocols) as ws:  # type: ignore[list-item]
                    await ws.send(frame)
                    with contextlib.suppress(websockets.ConnectionClosed, TimeoutError):
                        async with asyncio.timeout(10):
                            while True:
                                await ws.recv()
        for header in ("Idempotency-Key", "If-Match", "Authorization"):
            response = await c.post(
                MESSAGES(world), json={"content": "h"}, headers={header: "k" * 10_000}
            )
            if response.status_code >= 500:
                failures.append(f"{header}: {response.status_code}")
        await c.aclose()
        assert not failures, "\n".join(failures)
        _no_traceback(served)
