"""The commands a newcomer runs first, run for real as subprocesses against a served database."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.harness import Instance, free_port, run_instance

PASSWORD = "correct horse battery"


async def confer(
    *args: str, database_url: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m gateway ARGS`` with only the database set: no CONFER_PORT, no public URL,
    as an operator types it in a fresh shell beside the running server."""
    env = {"CONFER_DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"}
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_did_prints_the_served_identity(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        served = instance.did
        base_url = instance.base_url
    result = await confer("did", database_url=database_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [served, f"{base_url}/.well-known/did.json"]


async def test_did_on_a_fresh_database(database_url: str) -> None:
    result = await confer("did", database_url=database_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "did:web:localhost%3A8000"


async def test_create_admin_without_the_servers_port_uses_the_servers_did(
    database_url: str,
) -> None:
    async with run_instance(database_url) as instance:
        served = instance.did
    result = await confer("create-admin", "ops", database_url=database_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ops is now an admin (created with password: ")
    async with run_instance(database_url) as instance:  # the next start is not refused
        assert instance.did == served
        async with instance.state.pool.acquire() as conn:
            did = await conn.fetchval("SELECT did FROM users WHERE username = 'ops'")
        assert did == f"{served}:users:ops"


async def _login(instance: Instance, password: str) -> int:
    response = await instance.client.post(
        "/v1/auth/login", json={"username": "alice", "password": password, "device_id": "d2"}
    )
    return response.status_code


async def test_admin_set_password_from_stdin_ends_every_session(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice", PASSWORD)
        assert (await alice.request("GET", "/v1/me/sessions")).status_code == 200
        result = await confer(
            "admin", "set-password", "alice", database_url=database_url, stdin="a new secret 42\n"
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "password of alice set; 1 session(s) ended"
        async with instance.state.pool.acquire() as conn:
            sessions = await conn.fetchval(
                "SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id"
                " WHERE u.username = 'alice'"
            )
            audited = await conn.fetchval(
                "SELECT count(*) FROM audit_log WHERE action = 'admin.password_set'"
            )
        assert sessions == 0 and audited == 1
        assert await _login(instance, PASSWORD) == 401
        assert await _login(instance, "a new secret 42") == 200


async def test_admin_set_password_refusals(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        await instance.register("alice", PASSWORD)
    unknown = await confer(
        "admin", "set-password", "nobody", database_url=database_url, stdin="long enough 1\n"
    )
    assert unknown.returncode == 1 and "no user 'nobody'" in unknown.stderr
    short = await confer("admin", "set-password", "alice", database_url=database_url, stdin="x\n")
    assert short.returncode == 1 and "8 to 1024" in short.stderr


async def test_serve_refuses_a_changed_public_url_in_one_sentence(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        await instance.register("alice")
    env = {
        "CONFER_DATABASE_URL": database_url,
        "CONFER_PUBLIC_URL": "https://moved.example",
        "CONFER_PORT": str(free_port()),
        "PATH": "/usr/bin:/bin",
    }
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gateway", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0, result.stderr
    assert "users under another DID" in result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) < 10, result.stderr


async def test_a_setting_that_does_not_validate_is_one_line_not_a_traceback(
    database_url: str,
) -> None:
    env = {
        "CONFER_DATABASE_URL": database_url,
        "CONFER_PORT": "not-a-port",
        "CONFER_PUBLIC_URL": "ftp://example.invalid",
        "PATH": "/usr/bin:/bin",
    }
    for command in (["serve"], ["did"]):
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "gateway", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.splitlines()
        assert "Traceback" not in result.stderr and "╭" not in result.stderr, result.stderr
        assert any(
            line.startswith("confer: invalid setting CONFER_PORT='not-a-port': ") for line in lines
        ), lines
        assert any(
            line.startswith("confer: invalid setting CONFER_PUBLIC_URL=") for line in lines
        ), lines


def test_the_command_line_loads_with_the_collector_paused_then_runs_with_it() -> None:
    """``gateway.__main__`` loads the command line with the cyclic garbage collector paused,
    moves what it loaded to the permanent generation, and runs the command with the collector
    on (start-up time: ``bench/startup.py``)."""
    code = (
        "import gc, sys\n"
        "from gateway.__main__ import main\n"
        "sys.argv = ['confer', 'new-encryption-key', 'k9']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(gc.isenabled(), gc.get_freeze_count() > 50_000, 'gateway.cli' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    key, flags = result.stdout.splitlines()
    assert key.startswith("k9:")
    assert flags == "True True True"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("CONFER_ENCRYPTION_KEYS", "garbage", "='garbage': Value error, CONFER_ENCRYPTION_KEYS"),
        ("CONFER_LLM_PROVIDERS", "{bad", ": not valid JSON"),
        ("CONFER_CORS_ORIGINS", "*", ": not valid JSON"),
        ("CONFER_PUBLIC_URL", "http://127.0.0.1:8103", "must not be an IP address"),
        ("CONFER_PEER_RATE_LIMIT_DOMAIN", "lots", "couldn't parse rate limit string 'lots'"),
        ("CONFER_ATTACHMENT_MAX_BYTES", "0", "='0': Input should be greater than 0"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line_before_anything_starts(
    tmp_path: Path, name: str, value: str, says: str
) -> None:
    """Checked with the other settings: the embedded PostgreSQL of CONFER_DATA_DIR is never
    created or started for a setting that would be refused later."""
    env = {
        "CONFER_DATA_DIR": str(tmp_path),
        "CONFER_PORT": str(free_port()),
        "PATH": "/usr/bin:/bin",
        name: value,
    }
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        line for line in result.stderr.splitlines() if line.startswith("confer: ")
    ], result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"confer: invalid setting {name}"), result.stderr
    assert says in result.stderr
    assert not (tmp_path / "pg").exists()


@pytest.mark.parametrize("command", [["did"], ["serve"], ["keys", "list"]])
def test_an_unreachable_database_is_one_line(command: list[str]) -> None:
    env = {
        "CONFER_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/confer",
        "CONFER_PORT": str(free_port()),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-m", "gateway", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "╭" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "confer: cannot reach the database (CONFER_DATABASE_URL"
    ), result.stderr
    assert "ConnectionRefusedError" in result.stderr


@pytest.mark.parametrize(
    ("username", "says"),
    [
        ("Bad Name!", "not allowed: U+0020 SPACE"),
        ("", "username"),
        ("x" * 100, "username"),
    ],
    ids=["characters", "empty", "too-long"],
)
async def test_create_admin_with_an_unusable_name_is_one_line(
    database_url: str, username: str, says: str
) -> None:
    result = await confer("create-admin", username, database_url=database_url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "╭" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("confer: error: "), lines
    assert says in lines[0]
