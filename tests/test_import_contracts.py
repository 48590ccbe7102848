"""The import-linter contracts in pyproject.toml hold (the same check ``make lint`` runs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint_imports is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    result = subprocess.run(
        [lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# Optional or rarely used parts that serving must not load at import (start-up time): each is
# imported where it is first used, or only when its setting is on.
HEAVY_MODULES = (
    "mcp",  # the MCP SDK: on the first /mcp request (gateway.mcp.lazy)
    "alembic",  # only when the schema is behind (gateway.migrations.is_at_head)
    "sqlalchemy",
    "redis",  # only with CONFER_REDIS_URL (gateway.app)
    "nats",  # only with CONFER_NATS_URL (gateway.realtime.backends, gateway.agents.queue)
    "opentelemetry.sdk",  # only with CONFER_OTLP_ENDPOINT (gateway.tracing)
    "opentelemetry.exporter",
    "boto3",  # only with S3 attachment storage (gateway.storage_s3)
    "botocore",
    "pgvector",
    "pgserver",  # only for the embedded PostgreSQL (gateway.embedded)
    "openai",
    "anthropic",
    "phonenumbers",  # on the first phone number set (gateway.services.profiles)
    "aiosmtplib",  # on the first mail sent (gateway.services.mail)
    "yaml",  # on the first concept import (gateway.services.concept_import)
    "tarfile",  # backups and restores (gateway.services.backups, for their commands only)
    "jwt",  # on the first access token issued or verified (gateway.services.tokens)
    "cryptography.x509",  # PyJWT's; federation keys need only cryptography's Ed25519
)


@pytest.mark.parametrize("module", ["gateway.app", "gateway.cli"])
def test_serving_imports_no_heavy_module(module: str) -> None:
    """``import gateway.app`` (and ``gateway.cli``, what ``confer serve`` runs) loads none of
    :data:`HEAVY_MODULES` or their submodules; checked in a fresh interpreter."""
    code = f"import json, sys\nimport {module}\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stdout)
    heavy = sorted(
        name for name in loaded if any(name == h or name.startswith(h + ".") for h in HEAVY_MODULES)
    )
    assert heavy == []
