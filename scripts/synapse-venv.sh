#!/usr/bin/env bash
# Create .bench/synapse-venv: a SEPARATE virtual environment holding Synapse (the Matrix reference
# homeserver) with its PostgreSQL driver, used only by bench/synapse_side_by_side.py. It is a
# large download and a different project, so it never goes into the project venv.
# The version is pinned exactly so that numbers from different days compare the same server.
# Idempotent: does nothing when the venv already has this Synapse and psycopg2.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${CONFER_SYNAPSE_VENV:-.bench/synapse-venv}"
VERSION="1.163.2"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
installed() {
  "$VENV/bin/python" -I -c "
import importlib.metadata as m, psycopg2, synapse.app.homeserver
assert m.version('matrix-synapse') == '$VERSION'" 2>/dev/null
}
if [ -x "$VENV/bin/python" ] && installed; then
  echo "synapse venv: $VENV ready (matrix-synapse $VERSION)"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "matrix-synapse[postgres]==$VERSION"
installed
echo "synapse venv: $VENV installed (matrix-synapse $VERSION)"
