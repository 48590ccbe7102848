"""``docker-compose.yml`` and ``deploy/Caddyfile``. Docker does not run here, so the compose
file is checked structurally (services, images, required settings, healthchecks, start order,
volumes); the Caddyfile is adapted by a real Caddy, which is then run in front of a served
Confer to carry HTTP and the WebSocket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
import yaml

from gateway.settings import Settings
from tests.gateway.harness import free_port, run_instance

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
CADDYFILE = ROOT / "deploy" / "Caddyfile"


def test_the_stack_is_caddy_gateway_postgres_with_pgvector_and_nats() -> None:
    assert set(SERVICES) == {"caddy", "gateway", "postgres", "nats"}
    assert SERVICES["caddy"]["image"].startswith("caddy:2")
    assert SERVICES["postgres"]["image"] == "pgvector/pgvector:pg16"
    assert SERVICES["nats"]["image"].startswith("nats:")
    assert "-js" in SERVICES["nats"]["command"]  # JetStream: the agent task queue needs it
    assert SERVICES["gateway"]["build"] == "."


def test_only_caddy_is_published_and_it_serves_tls() -> None:
    published = {name for name, service in SERVICES.items() if service.get("ports")}
    assert published == {"caddy"}
    assert {"80:80", "443:443"} <= set(SERVICES["caddy"]["ports"])
    assert "8000" in [str(port) for port in SERVICES["gateway"]["expose"]]


def _environment(service: str) -> dict[str, str]:
    env = SERVICES[service]["environment"]
    assert isinstance(env, dict)
    return {str(k): str(v) for k, v in env.items()}


def test_the_public_url_is_required_loudly_wherever_it_is_used() -> None:
    for service in ("gateway", "caddy"):
        value = _environment(service)["CONFER_PUBLIC_URL"]
        # ${VAR:?message}: compose refuses to start without it and prints the message
        match = re.fullmatch(r"\$\{CONFER_PUBLIC_URL:\?(.+)\}", value)
        assert match, value
        assert "https://" in match.group(1)
    first = next(iter(SERVICES["gateway"]["environment"]))
    assert first == "CONFER_PUBLIC_URL"  # the first setting an operator reads


def test_the_gateway_settings_are_real_settings_pointing_at_the_services() -> None:
    env = _environment("gateway")
    fields = set(Settings.model_fields)
    for name in env:
        assert name.startswith("CONFER_") and name[7:].lower() in fields, name
    assert env["CONFER_DATABASE_URL"].startswith("postgresql://confer:confer@postgres:5432/")
    assert env["CONFER_NATS_URL"] == "nats://nats:4222"
    assert env["CONFER_PROXY_HEADERS"] == "true"  # the client address comes from Caddy
    postgres = SERVICES["postgres"]["environment"]
    assert (postgres["POSTGRES_USER"], postgres["POSTGRES_DB"]) == ("confer", "confer")


def test_every_service_has_a_healthcheck_and_waits_for_what_it_needs() -> None:
    for name, service in SERVICES.items():
        check = service["healthcheck"]["test"]
        assert check[0] in ("CMD", "CMD-SHELL") and len(check) > 1, name
    assert "/readyz" in " ".join(SERVICES["gateway"]["healthcheck"]["test"])
    needs = {
        "caddy": {"gateway"},
        "gateway": {"postgres", "nats"},
    }
    for name, wanted in needs.items():
        depends = SERVICES[name]["depends_on"]
        assert set(depends) == wanted, name
        assert all(d["condition"] == "service_healthy" for d in depends.values())
    for name in ("postgres", "nats"):
        assert "depends_on" not in SERVICES[name]


def test_named_volumes_are_declared_and_the_caddyfile_is_mounted() -> None:
    declared = set(COMPOSE["volumes"])
    mounts = []
    for service in SERVICES.values():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            mounts.append((source, target))
            if not source.startswith("."):
                assert source in declared, source
    assert ("./deploy/Caddyfile", "/etc/caddy/Caddyfile") in mounts
    assert CADDYFILE.exists()


def test_the_caddyfile_serves_the_public_url_and_proxies_to_the_gateway() -> None:
    text = CADDYFILE.read_text()
    assert re.search(r"^\{\$CONFER_PUBLIC_URL\} \{", text, re.M)
    assert re.search(r"^\s*reverse_proxy gateway:8000\b", text, re.M)
    assert "flush_interval -1" in text  # streamed answers are not buffered
    # nothing that would break the WebSocket upgrade
    assert "header_up -Upgrade" not in text and "header_up -Connection" not in text


def _caddy() -> str:
    found = shutil.which("caddy")
    if found is None:
        pytest.skip("needs Debian's caddy (.ci/run installs it) to adapt and run the Caddyfile")
    return found


def _adapt(caddy: str, public_url: str) -> dict[str, Any]:
    done = subprocess.run(
        [caddy, "adapt", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
        env={**os.environ, "CONFER_PUBLIC_URL": public_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _proxies(config: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("handler") == "reverse_proxy":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config)
    return found


def test_caddy_adapts_the_caddyfile_to_https_for_the_public_host() -> None:
    config = _adapt(_caddy(), "https://confer.example.org")
    server = next(iter(config["apps"]["http"]["servers"].values()))
    assert server["listen"] == [":443"]  # https, with an ACME certificate for the host
    assert server["routes"][0]["match"] == [{"host": ["confer.example.org"]}]
    [proxy] = _proxies(config)
    assert proxy["upstreams"] == [{"dial": "gateway:8000"}]


async def _proxy_up(caddy: str, instance_url: str) -> tuple[asyncio.subprocess.Process, str]:
    """Caddy from the repository's Caddyfile on a free loopback port, proxying to
    ``instance_url``, once it answers ``/healthz`` through the proxy: ``(process, url)``.
    A Caddy that exits (its port taken between the choice and the bind, on a busy machine)
    is started again on another port; each start may take up to two minutes."""
    failures = []
    for _ in range(3):
        listen = free_port()
        # Plain http on loopback (no certificate here); the upstream is the served instance
        config = _adapt(caddy, f"http://localhost:{listen}")
        for proxy in _proxies(config):
            proxy["upstreams"] = [{"dial": instance_url.removeprefix("http://")}]
        config["admin"] = {"disabled": True}
        workdir = Path(tempfile.mkdtemp(prefix="confer-caddy-"))
        (workdir / "caddy.json").write_text(json.dumps(config))
        process = await asyncio.create_subprocess_exec(
            caddy,
            "run",
            "--config",
            str(workdir / "caddy.json"),
            env={**os.environ, "HOME": str(workdir), "XDG_DATA_HOME": str(workdir)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        proxied = f"http://localhost:{listen}"
        async with httpx.AsyncClient(base_url=proxied, timeout=5) as client:
            deadline = time.monotonic() + 120
            while process.returncode is None and time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/healthz")).status_code == 200:
                        shutil.rmtree(workdir, ignore_errors=True)
                        return process, proxied
                await asyncio.sleep(0.2)
        if process.returncode is None:
            process.terminate()
        _, err = await asyncio.wait_for(process.communicate(), 20)
        failures.append(err.decode(errors="replace")[-500:])
        shutil.rmtree(workdir, ignore_errors=True)
    raise AssertionError(f"Caddy never proxied to the instance: {failures}")


async def test_caddy_carries_http_and_the_websocket_to_a_served_confer(
    database_url: str,
) -> None:
    caddy = _caddy()
    async with run_instance(database_url) as instance:
        process, proxied = await _proxy_up(caddy, instance.base_url)
        try:
            async with httpx.AsyncClient(base_url=proxied, timeout=30) as client:
                registered = await client.post(
                    "/v1/auth/register",
                    json={"username": "alice", "password": "correct horse battery"},
                )
                assert registered.status_code == 201, registered.text
                token = registered.json()["access_token"]
            async with websockets.connect(
                proxied.replace("http://", "ws://") + "/v1/ws",
                subprotocols=["confer.v1", f"bearer.{token}"],  # type: ignore[list-item]
            ) as ws:
                ready = json.loads(await asyncio.wait_for(ws.recv(), 30))
                assert ready["type"] == "ready"
                assert ready["data"]["did"] == registered.json()["user"]["did"]
        finally:
            if process.returncode is None:
                process.terminate()
            await asyncio.wait_for(process.communicate(), 20)
