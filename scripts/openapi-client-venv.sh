#!/usr/bin/env bash
# Create .openapi-venv: a SEPARATE virtual environment holding openapi-python-client, used only
# by the generated-client test (tests/gateway/test_openapi_client.py), which generates a Python
# client from a running Confer's /openapi.json and imports it. The generator pins its own
# versions of pydantic, httpx and friends; kept apart, they never move Confer's.
# Idempotent: does nothing when the venv already has a working generator.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${CONFER_OPENAPI_VENV:-.openapi-venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ -x "$VENV/bin/openapi-python-client" ] && "$VENV/bin/python" -c "import openapi_python_client, httpx, attrs" 2>/dev/null; then
  echo "openapi venv: $VENV ready"
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "openapi-python-client>=0.21,<1" httpx attrs python-dateutil
"$VENV/bin/python" -c "import importlib.metadata as m; print('openapi venv: openapi-python-client', m.version('openapi-python-client'))"
