"""Embedded PostgreSQL for a pleasant single-process default.

When no ``CONFER_DATABASE_URL`` is configured, Confer starts a private PostgreSQL server (the
``pgserver`` package ships PostgreSQL 16 with pgvector) whose data lives under the data folder.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_servers: dict[Path, object] = {}


def embedded_postgres_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL under ``data_dir``; return its URL.

    The server keeps running after this process exits, so a later start reuses it at once; the
    URL addresses it over a Unix socket in ``data_dir``. Raises ``RuntimeError`` from pgserver
    when the server cannot start (for instance a data folder made by another PostgreSQL version).
    """
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if "XDG_RUNTIME_DIR" not in os.environ:
        # pgserver (via platformdirs) wants a private runtime dir; root shells often have none.
        runtime = Path(tempfile.gettempdir()) / f"confer-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    from pgserver.postgres_server import get_server  # lazily: only the embedded mode needs it

    server = _servers.get(data_dir)
    if server is None:
        server = get_server(data_dir, cleanup_mode=None)
        _servers[data_dir] = server
    return str(server.get_uri())  # type: ignore[attr-defined]


def with_database(url: str, database: str) -> str:
    """Return ``url`` pointing at another database on the same server (query kept)."""
    parts = urlsplit(url)
    query = urlencode(parse_qsl(parts.query))
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, query, ""))
