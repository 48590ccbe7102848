"""The import-linter contracts in pyproject.toml hold (the same check ``make lint`` runs)."""

from __future__ import annotations

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


def test_serving_imports_neither_mcp_nor_alembic() -> None:
    """Start-up cost: the MCP SDK loads on the first /mcp request, Alembic and SQLAlchemy
    only when there is something to migrate (gateway.mcp.lazy, gateway.migrations),
    OpenTelemetry's SDK and redis-py only when configured (gateway.tracing, gateway.app)."""
    code = (
        "import sys, gateway.app\n"
        "loaded = {name.split('.')[0] for name in sys.modules}\n"
        "loaded |= {name for name in sys.modules if name.startswith('opentelemetry.sdk')}\n"
        "heavy = sorted(loaded & {'mcp', 'alembic', 'sqlalchemy', 'redis', 'opentelemetry.sdk'})\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
