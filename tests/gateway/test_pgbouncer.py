"""Confer behind pgbouncer in transaction pooling mode (docs/operations.md#pgbouncer): a real
pgbouncer from Debian's packages on a free port in front of the test PostgreSQL, and a real
``confer serve`` whose pool goes through it (statement cache off) while its LISTEN
connections, migrations and process claim go direct."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx
import pytest
import websockets

from tests.gateway.harness import free_port, next_event
from tests.gateway.serving import confer_serve, serve_env

PASSWORD = "correct horse battery"


def _pgbouncer_binary() -> str | None:
    """pgbouncer's path, installing Debian's package first when it is missing and apt-get
    can run (``.ci/run`` installs it too)."""
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None
    )
    if found or not shutil.which("apt-get") or os.geteuid() != 0:
        return found
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "pgbouncer"],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        capture_output=True,
        timeout=300,
        check=False,
    )
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None
    )


@contextlib.contextmanager
def run_pgbouncer(upstream_url: str, binary: str) -> Iterator[int]:
    """pgbouncer on a free loopback port in transaction mode, in front of ``upstream_url``'s
    server (trust authentication, like the test server); yields its port."""
    upstream = urlsplit(upstream_url)
    user = upstream.username or "postgres"
    query = dict(parse_qsl(upstream.query))
    host = upstream.hostname or query.get("host", "127.0.0.1")
    upstream_port = upstream.port or int(query.get("port", "5432"))
    # pgbouncer refuses to run as root: as postgres, or, for a server on a Unix socket (the
    # embedded PostgreSQL, whose socket is in its private data folder), as that folder's owner
    runas = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "postgres"
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="confer-pgbouncer-"))
    home.chmod(0o755)
    (home / "userlist.txt").write_text(f'"{user}" ""\n')
    (home / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={upstream_port}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {home / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        # fewer server connections than Confer's pool: transactions of one client connection
        # really do land on different server connections
        "default_pool_size = 4\n"
        "max_client_conn = 500\n"
        f"admin_users = {user}\n"
        f"logfile = {home / 'pgbouncer.log'}\n"
    )
    command = [binary, str(home / "pgbouncer.ini")]
    if os.geteuid() == 0:
        shutil.chown(home, runas)
        for path in home.iterdir():
            shutil.chown(path, runas)
        command[1:1] = ["-u", runas]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while _pgbouncer_show(port, user, "VERSION") is None:
            if process.poll() is not None or time.monotonic() > deadline:
                log = (
                    (home / "pgbouncer.log").read_text()
                    if (home / "pgbouncer.log").exists()
                    else ""
                )
                raise AssertionError(f"pgbouncer did not start: {log[-2000:]}")
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(20)
        shutil.rmtree(home, ignore_errors=True)


def _pgbouncer_show(port: int, user: str, what: str) -> str | None:
    """``SHOW <what>`` on pgbouncer's admin console (psql: it speaks only the simple
    protocol), as unaligned text; None when it does not answer."""
    done = subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-U",
            user,
            "-d",
            "pgbouncer",
            "-At",
            "-F",
            "|",
            "-c",
            f"SHOW {what}",
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def _via(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


@pytest.fixture(scope="module")
def pgbouncer_binary() -> str:
    binary = _pgbouncer_binary()
    if binary is None:
        pytest.skip("pgbouncer is not installed and could not be installed (apt-get pgbouncer)")
    if shutil.which("psql") is None:
        pytest.skip("psql (PostgreSQL's client) is needed to read pgbouncer's statistics")
    return binary


@contextlib.asynccontextmanager
async def _served_through(database_url: str, bouncer_port: int) -> AsyncIterator[str]:
    port = free_port()
    env = serve_env(
        port,
        _via(database_url, bouncer_port),
        CONFER_DATABASE_DIRECT_URL=database_url,
        CONFER_DB_STATEMENT_CACHE_SIZE="0",
        # pgbouncer refuses startup parameters it does not know (statement_timeout among
        # them): behind it the timeout is set on the role or database (docs/operations.md)
        CONFER_DB_STATEMENT_TIMEOUT_SECONDS="0",
        # no sweep: only the NOTIFY (sent through pgbouncer at COMMIT) and the worker's
        # LISTEN (direct) can wake the agent worker
        CONFER_AGENT_QUEUE_SWEEP_SECONDS="600",
    )
    async with confer_serve(env) as served:
        yield served.base_url


async def _register(client: httpx.AsyncClient, username: str) -> dict[str, str]:
    response = await client.post(
        "/v1/auth/register", json={"username": username, "password": PASSWORD}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    user = body["user"]
    return {"token": body["access_token"], "did": user["did"], "agent_did": user["agent_did"]}


async def _own_agent_answers(
    client: httpx.AsyncClient, auth: dict[str, str], agent_did: str
) -> None:
    """A message to the own agent (offline provider) is answered: the task is announced by
    NOTIFY in the posting transaction and picked up by the worker's direct LISTEN."""
    opened = await client.post(
        "/v1/conversations",
        json={"type": "direct_user_agent", "participant_did": agent_did},
        headers=auth,
    )
    assert opened.status_code in (200, 201), opened.text
    conversation = opened.json()["id"]
    sent = await client.post(
        f"/v1/conversations/{conversation}/messages", json={"content": "hi"}, headers=auth
    )
    assert sent.status_code == 201, sent.text
    senders: list[str] = []
    for _ in range(300):
        page = await client.get(f"/v1/conversations/{conversation}/messages", headers=auth)
        senders = [m["sender_type"] for m in page.json()["items"]]
        if "own_agent" in senders:
            break
        await asyncio.sleep(0.1)
    assert senders == ["own_agent", "user"]


async def test_confer_serves_through_pgbouncer_in_transaction_mode(
    database_url: str, pgbouncer_binary: str
) -> None:
    user = urlsplit(database_url).username or "postgres"
    database = urlsplit(database_url).path.lstrip("/")
    with run_pgbouncer(database_url, pgbouncer_binary) as bouncer:
        async with (
            _served_through(database_url, bouncer) as base_url,
            httpx.AsyncClient(base_url=base_url, timeout=30) as client,
        ):
            alice = await _register(client, "alice")
            bob = await _register(client, "bob")
            auth = {"Authorization": f"Bearer {alice['token']}"}
            opened = await client.post(
                "/v1/conversations", json={"participant_did": bob["did"]}, headers=auth
            )
            assert opened.status_code in (200, 201), opened.text
            conversation = opened.json()["id"]
            ws_url = base_url.replace("http://", "ws://") + "/v1/ws"
            async with websockets.connect(
                ws_url,
                subprotocols=["confer.v1", f"bearer.{bob['token']}"],  # type: ignore[list-item]
            ) as ws:
                assert '"ready"' in await asyncio.wait_for(ws.recv(), 10)
                # many transactions at once over 4 server connections: a cached prepared
                # statement would meet the wrong server connection here
                sends = [
                    client.post(
                        f"/v1/conversations/{conversation}/messages",
                        json={"content": f"hello {n}"},
                        headers=auth,
                    )
                    for n in range(20)
                ]
                answers = await asyncio.gather(*sends)
                assert [a.status_code for a in answers] == [201] * 20, answers[0].text
                seen = set()
                while len(seen) < 20:
                    event = await next_event(ws, "message.created", within=20)
                    seen.add(event["data"]["content"])
                assert seen == {f"hello {n}" for n in range(20)}
            listed = await client.get(f"/v1/conversations/{conversation}/messages", headers=auth)
            assert listed.status_code == 200
            assert (await client.get("/readyz")).status_code == 200
            await _own_agent_answers(client, auth, alice["agent_did"])
        stats = _pgbouncer_show(bouncer, user, "STATS")
    assert stats is not None
    rows = {line.split("|")[0]: line.split("|") for line in stats.splitlines()}
    assert database in rows, stats  # the pool's traffic went through pgbouncer
    assert int(rows[database][1]) > 50  # total_xact_count
