"""What an operator meets around ``confer serve``, run for real as subprocesses: a ``.env``
file, a reverse proxy's forwarded headers, a second process on the same database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.gateway.harness import NATS_URL, free_port, reachable
from tests.gateway.serving import ROOT, confer_serve, serve_env


def _without_confer(env: dict[str, str]) -> dict[str, str]:
    """The environment minus every Confer setting (so only ``.env`` can supply them)."""
    return {k: v for k, v in env.items() if not k.startswith("CONFER_")}


async def test_dotenv_supplies_settings_and_the_environment_wins(
    tmp_path: Path, database_url: str
) -> None:
    port = free_port()
    (tmp_path / ".env").write_text(
        "# an operator's .env\n"
        f"CONFER_PORT={port}\n"
        f"CONFER_DATABASE_URL={database_url}\n"
        "CONFER_PUBLIC_URL=http://dotenv-loses.invalid\n"
        "CONFER_ALLOW_HTTP_DIDS=true\n"
        "CONFER_LOG_FORMAT=json\n"
        "UNRELATED=ignored\n"
    )
    env = {**_without_confer(dict(os.environ)), "CONFER_PUBLIC_URL": f"http://localhost:{port}"}
    async with confer_serve(env, cwd=tmp_path, port=port) as served:
        async with httpx.AsyncClient(base_url=served.base_url) as client:
            document = (await client.get("/.well-known/did.json")).json()
        # port and database from .env, public URL from the environment
        assert document["id"] == f"did:web:localhost%3A{port}"
        await served.wait_for_output('"did": "did:web:localhost%3A')  # .env's JSON log format
    conn = await asyncpg.connect(database_url)
    try:
        recorded = await conn.fetchval("SELECT public_url FROM instance_identity")
    finally:
        await conn.close()
    assert recorded == f"http://localhost:{port}"


async def _register_from(base_url: str, username: str) -> tuple[str, str]:
    """Register ``username`` claiming to come through a proxy; return the client address
    Confer recorded in the audit log and the scheme it saw (its redirect's Location)."""
    forwarded = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}
    async with httpx.AsyncClient(base_url=base_url, headers=forwarded) as client:
        response = await client.post(
            "/v1/auth/register", json={"username": username, "password": "correct horse battery"}
        )
        assert response.status_code == 201, response.text
        redirect = await client.get("/healthz/", follow_redirects=False)
    assert redirect.status_code == 307, redirect.text
    return username, redirect.headers["location"].split("://")[0]


async def _recorded_ip(database_url: str, username: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        ip = await conn.fetchval(
            "SELECT a.ip_address FROM audit_log a JOIN users u ON u.id = a.user_id"
            " WHERE a.action = 'user.registered' AND u.username = $1",
            username,
        )
    finally:
        await conn.close()
    return str(ip)


@pytest.mark.parametrize(
    ("args", "ip", "scheme"),
    [
        (("--proxy-headers", "--forwarded-allow-ips", "127.0.0.1"), "203.0.113.7", "https"),
        (("--proxy-headers", "--forwarded-allow-ips", "192.0.2.1"), "127.0.0.1", "http"),
        ((), "127.0.0.1", "http"),  # the default: the client is the TCP peer
    ],
    ids=["trusted-proxy", "untrusted-peer", "default-off"],
)
async def test_forwarded_headers_count_only_from_an_allowed_proxy(
    database_url: str, args: tuple[str, ...], ip: str, scheme: str
) -> None:
    port = free_port()
    async with confer_serve(serve_env(port, database_url), *args) as served:
        username, seen_scheme = await _register_from(served.base_url, "alice")
    assert await _recorded_ip(database_url, username) == ip
    assert seen_scheme == scheme


async def test_a_second_process_on_the_database_without_a_bus_is_refused(
    database_url: str,
) -> None:
    first, second = free_port(), free_port()
    public = {"CONFER_PUBLIC_URL": f"http://localhost:{first}"}
    async with confer_serve(serve_env(first, database_url)):
        env = serve_env(second, database_url, **public)
        result = await asyncio.to_thread(_serve_until_exit, env)
    assert result.returncode == 3, result.stdout
    assert "refusing to start: another Confer process" in result.stdout
    assert "CONFER_NATS_URL" in result.stdout
    assert "Traceback" not in result.stdout


def _serve_until_exit(env: dict[str, str]) -> CompletedServe:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return CompletedServe(done.returncode, done.stdout + done.stderr)


class CompletedServe:
    """A ``confer serve`` that exited: its status and everything it printed."""

    def __init__(self, returncode: int, stdout: str) -> None:
        self.returncode = returncode
        self.stdout = stdout


@pytest.mark.skipif(
    not reachable(NATS_URL), reason="needs the local NATS on 4222 (.ci/run starts it)"
)
async def test_processes_sharing_a_bus_share_the_database_and_a_bus_less_one_is_refused(
    database_url: str,
) -> None:
    first, second, third = free_port(), free_port(), free_port()
    public = {"CONFER_PUBLIC_URL": f"http://localhost:{first}"}
    stream = {
        "CONFER_NATS_URL": NATS_URL,
        "CONFER_AGENT_QUEUE_STREAM": f"OPS_{first}",
        "CONFER_AGENT_QUEUE_SUBJECT_PREFIX": f"ops{first}.",
    }
    async with (
        confer_serve(serve_env(first, database_url, **stream)),
        confer_serve(serve_env(second, database_url, **public, **stream)) as b,
    ):
        async with httpx.AsyncClient(base_url=b.base_url) as client:
            assert (await client.get("/healthz")).status_code == 200
        alone = serve_env(third, database_url, **public)  # no bus: the others cannot reach it
        started = time.monotonic()
        result = await asyncio.to_thread(_serve_until_exit, alone)
    assert result.returncode == 3, result.stdout
    assert "refusing to start: another Confer process" in result.stdout
    assert time.monotonic() - started < 90


async def test_listening_beyond_loopback_with_a_localhost_public_url_is_loud(
    database_url: str,
) -> None:
    port = free_port()
    env = serve_env(port, database_url, CONFER_HOST="0.0.0.0")
    del env["CONFER_PUBLIC_URL"]  # the operator forgot it
    async with confer_serve(env) as served:
        text = await served.wait_for_output("CONFER_PUBLIC_URL is http://localhost:")
    assert f"peers cannot reach the instance DID did:web:localhost%3A{port}" in text
    async with confer_serve(serve_env(port, database_url)) as served:  # loopback: quiet
        await served.wait_for_output("Confer is up as")
        assert "CONFER_PUBLIC_URL is" not in served.output()
