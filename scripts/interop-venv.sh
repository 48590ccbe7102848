#!/usr/bin/env bash
# Create .interop-venv: a SEPARATE virtual environment holding the a2a-sdk client, used only by
# the interoperability test (tests/interop/). a2a-sdk installs a top-level package named `a2a`,
# which clashes with Confer's own `a2a`, so it must never be installed into the project venv.
# Run its python with -I so the checkout's own `a2a` (on the current directory) is not imported.
# Idempotent: does nothing when the venv already has a working a2a-sdk client.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${CONFER_INTEROP_VENV:-.interop-venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -I -c "import a2a.client, httpx" 2>/dev/null; then
  echo "interop venv: $VENV ready"
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "a2a-sdk>=1.0,<2" httpx
"$VENV/bin/python" -I -c "import a2a.client; print('interop venv: a2a-sdk', __import__('importlib.metadata').metadata.version('a2a-sdk'))"
