"""``confer serve`` logs: JSON lines with request_id and did; X-Request-ID honoured."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from gateway.http_errors import install_error_handlers
from gateway.logs import RequestIdMiddleware
from tests.gateway.harness import free_port
from tests.gateway.serving import confer_serve, serve_env


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every output line, each parsed as JSON (any line that is not fails the test)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def test_json_logs_carry_the_request_id_and_the_instance_did(database_url: str) -> None:
    port = free_port()
    env = serve_env(
        port,
        database_url,
        CONFER_LOG_FORMAT="json",
        CONFER_LOG_LEVEL="INFO",
        CONFER_ACCESS_LOG="on",
    )
    async with confer_serve(env) as served, httpx.AsyncClient(base_url=served.base_url) as client:
        given = await client.get("/readyz", headers={"X-Request-ID": "probe-42"})
        assert given.headers["x-request-id"] == "probe-42"
        made = await client.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"})
        generated = made.headers["x-request-id"]
        assert generated != "bad id\twith spaces" and len(generated) == 32
        await served.wait_for_output(generated)
        records = json_lines(served.output())
    did = f"did:web:localhost%3A{port}"
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    by_id = {r["request_id"]: r for r in access}
    assert "GET /readyz" in by_id["probe-42"]["message"]
    assert "GET /healthz" in by_id[generated]["message"]
    assert by_id[generated]["did"] == did
    assert {"time", "level", "logger", "message", "request_id", "did"} <= set(records[-1])
    # Records made after the identity is loaded carry the DID, outside requests too.
    assert any(r["did"] == did and r["request_id"] is None for r in records)


async def test_text_is_the_default_and_a_level_hides_info(database_url: str) -> None:
    port = free_port()
    env = serve_env(port, database_url, CONFER_LOG_LEVEL="warning")
    async with confer_serve(env) as served:
        text = served.output()
    assert "Application startup complete" not in text  # uvicorn's INFO line


async def test_the_start_up_line_names_the_did_addresses_and_backends(database_url: str) -> None:
    port = free_port()
    env = serve_env(
        port, database_url, CONFER_LOG_FORMAT="json", CONFER_REDIS_URL="redis://127.0.0.1:6379/0"
    )
    async with confer_serve(env) as served:
        await served.wait_for_output("Confer is up")
        records = json_lines(served.output())
    [banner] = [r for r in records if r["message"].startswith("Confer is up")]
    base = f"http://localhost:{port}"
    assert banner["did"] == f"did:web:localhost%3A{port}"
    assert banner["public_url"] == base
    assert banner["client"] == f"{base}/" and banner["docs"] == f"{base}/docs"
    assert banner["backends"] == {
        "postgresql": "external",
        "redis": "on",
        "nats": "off",
        "attachments": "local",
    }
    assert banner["did"] in banner["message"] and f"{base}/docs" in banner["message"]


async def test_the_start_up_line_in_text(database_url: str) -> None:
    port = free_port()
    async with confer_serve(serve_env(port, database_url)) as served:
        text = await served.wait_for_output("Confer is up")
    [line] = [line for line in text.splitlines() if "Confer is up" in line]
    assert f"did:web:localhost%3A{port}" in line and f"http://localhost:{port}/docs" in line
    assert "backends: postgresql external, redis " in line


async def test_an_unexpected_error_keeps_the_connection_and_carries_the_request_id() -> None:
    """An exception no handler knows is answered 500 ``internal_error`` with the request's
    ``X-Request-ID`` and ``nosniff``, logged with that id, and the keep-alive connection stays
    open: the client's next request on it is answered (the framework's last-resort handler
    re-raised to the server, which dropped the connection and the request after it)."""
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(RequestIdMiddleware)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("a defect")

    @app.get("/fine")
    async def fine() -> dict[str, bool]:
        return {"ok": True}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    serving = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(120):
            for _ in range(2400):  # a loaded machine may take a while to start serving
                if server.started:
                    break
                await asyncio.sleep(0.05)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            answers = []
            for path in ("/boom", "/fine"):
                request = f"GET {path} HTTP/1.1\r\nHost: t\r\nX-Request-ID: req-{path[1:]}\r\n\r\n"
                writer.write(request.encode())
                head = (await reader.readuntil(b"\r\n\r\n")).decode().lower()
                length = int(head.split("content-length: ")[1].split("\r\n")[0])
                answers.append((head, json.loads(await reader.readexactly(length))))
            writer.close()
    finally:
        server.should_exit = True
        await serving
    (head, body), (fine_head, fine_body) = answers
    assert head.startswith("http/1.1 500"), head
    assert "x-request-id: req-boom" in head and "x-content-type-options: nosniff" in head, head
    assert "connection: close" not in head, head
    assert body["code"] == "internal_error" and body["status"] == 500, body
    assert fine_head.startswith("http/1.1 200") and fine_body == {"ok": True}
