"""A client that hangs up in the middle of its request body costs nothing: no 500, no traceback,
on the A2A endpoints (whose signature check reads the body in a dependency) as on REST. A real
``confer serve`` and raw sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.gateway.harness import free_port
from tests.gateway.serving import confer_serve, serve_env


async def hang_up_mid_body(port: int, path: str, headers: dict[str, str]) -> None:
    """Send ``POST path`` announcing 1,000 bytes, send six of them, and close."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = [f"POST {path} HTTP/1.1", f"Host: localhost:{port}", "Content-Length: 1000"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + b'{"a": ')
    await writer.drain()
    await asyncio.sleep(0.3)
    writer.close()
    await writer.wait_closed()


async def test_a_client_hanging_up_mid_body_leaves_no_500_and_no_traceback(
    make_database: Any,
) -> None:
    port = free_port()
    async with (
        confer_serve(serve_env(port, await make_database())) as served,
        httpx.AsyncClient(base_url=served.base_url, timeout=30) as client,
    ):
        registered = await client.post(
            "/v1/auth/register", json={"username": "alice", "password": "correct horse battery"}
        )
        assert registered.status_code == 201, registered.text
        signed = {
            "Content-Type": "application/json",
            "Signature-Input": 'sig1=("@method");keyid="did:web:example.com#key-1"',
            "Signature": "sig1=:AAAA:",
        }
        keyed = {"Content-Type": "application/json", "Authorization": "Bearer ck_not_a_key"}
        for path in ("/a2a", "/users/alice/a2a"):
            await hang_up_mid_body(port, path, signed)
            await hang_up_mid_body(port, path, keyed)
        await hang_up_mid_body(port, "/v1/auth/login", {"Content-Type": "application/json"})

        # the server is fine, said nothing alarming, and counted no 5xx
        assert (await client.get("/healthz")).status_code == 200
        await asyncio.sleep(0.5)  # records are written by another thread
        metrics = (await client.get("/metrics")).text
        output = served.output()
    assert "Traceback" not in output, output[-4000:]
    assert "unhandled error" not in output, output[-4000:]
    assert not [
        line for line in metrics.splitlines() if "http_requests_total" in line and '="5' in line
    ], metrics
