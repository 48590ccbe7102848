"""A client generated from the live OpenAPI document reads Confer's errors.

``openapi-python-client`` (its own venv, ``scripts/openapi-client-venv.sh``: it pins its own
pydantic and httpx) generates a Python client from ``GET /openapi.json`` of a running Confer;
the generator must not warn about the document; the generated package is imported and called
against the same server, and each 4xx must come back parsed into the generated
``ProblemDetails`` (RFC 9457) with its stable ``code``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import run_instance

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("CONFER_OPENAPI_VENV", ROOT / ".openapi-venv"))
PROBE = Path(__file__).with_name("openapi_client_probe.py")

pytestmark = pytest.mark.skipif(
    not (VENV / "bin/openapi-python-client").exists(),
    reason=f"no openapi-python-client venv at {VENV}: run scripts/openapi-client-venv.sh",
)


async def run(*argv: str, cwd: Path) -> tuple[str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode == 0, (stdout + stderr).decode()[-4000:]
    return stdout.decode(), stderr.decode()


async def test_a_generated_client_parses_errors_into_the_problem_type(
    database_url: str, tmp_path: Path
) -> None:
    async with run_instance(database_url) as b:
        document = await b.client.get("/openapi.json")
        assert document.status_code == 200
        (tmp_path / "openapi.json").write_bytes(document.content)
        (tmp_path / "config.yaml").write_text("post_hooks: []\n")
        stdout, stderr = await run(
            str(VENV / "bin/openapi-python-client"),
            "generate",
            "--path",
            "openapi.json",
            "--meta",
            "none",
            "--output-path",
            "confer_client",
            "--config",
            "config.yaml",
            cwd=tmp_path,
        )
        assert "Warning" not in stdout + stderr, stdout + stderr  # the generator took it all
        out, _ = await run(
            str(VENV / "bin/python"), "-I", str(PROBE), str(tmp_path), b.base_url, cwd=tmp_path
        )
    result: dict[str, Any] = json.loads(out)
    bad = result["bad"]
    assert (bad["status"], bad["type"], bad["code"]) == (422, "ProblemDetails", "validation_failed")
    assert bad["problem_status"] == 422
    assert ("body", "password") in {tuple(e["loc"]) for e in bad["error_fields"]}
    taken = result["taken"]
    assert (taken["status"], taken["type"]) == (409, "ProblemDetails")
    assert taken["code"] == "username_taken"
    anonymous = result["anonymous"]
    assert (anonymous["status"], anonymous["type"]) == (401, "ProblemDetails")
    assert anonymous["code"]
    assert result["registered"]["access_token"]
