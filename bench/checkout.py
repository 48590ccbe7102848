"""Which checkout's code a bench measures: this one, or the one ``CONFER_BENCH_CHECKOUT`` names.

``bench/table.py`` runs these benches against an older checkout by starting them with
``CONFER_BENCH_CHECKOUT=DIR``: the servers, the migrations of the scratch databases and the
in-process set-up (registering users) then all come from ``DIR``, so an older tree is measured
on its own schema, while the bench scripts themselves (this directory, first on ``sys.path``
as the running script's own) stay the current ones.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKOUT = Path(os.environ.get("CONFER_BENCH_CHECKOUT") or ROOT).resolve()
"""The checkout under test; importing this module puts it first on ``sys.path``."""

if str(CHECKOUT) not in sys.path[:1]:
    sys.path.insert(0, str(CHECKOUT))


def write_json(path: str | None, results: dict[str, object]) -> None:
    """Write a bench's ``results`` (JSON-serialisable) to ``path``, when one was given."""
    if path:
        import json

        Path(path).write_text(json.dumps(results, indent=2, default=str) + "\n")
