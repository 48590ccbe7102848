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


def ensure_runtime_dir() -> None:
    """Give pgserver the private runtime directory it wants (``XDG_RUNTIME_DIR``, via
    platformdirs) when the environment has none, as root shells often do; call it before
    importing ``pgserver``."""
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime = Path(tempfile.gettempdir()) / f"confer-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def embedded_postgres_url(data_dir: Path, *, stop_at_exit: bool = False) -> str:
    """Start (or reuse) the embedded PostgreSQL under ``data_dir``; return its URL.

    The server keeps running after this process exits, so a later start reuses it at once; the
    URL addresses it over a Unix socket in ``data_dir``. With ``stop_at_exit`` (``confer demo``)
    a server this call starts is stopped when the process exits (one that was already running
    is left alone). Raises ``RuntimeError`` from pgserver when the server cannot start (for
    instance a data folder made by another PostgreSQL version).
    """
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    ensure_runtime_dir()
    # lazily: only the embedded mode needs pgserver
    from pgserver.postgres_server import get_server
    from pgserver.utils import PostmasterInfo

    server = _servers.get(data_dir)
    if server is None:
        running = PostmasterInfo.read_from_pgdata(data_dir)
        already = running is not None and running.is_running()
        # "stop": pgserver stops the server at exit once no other process holds a handle
        server = get_server(data_dir, cleanup_mode="stop" if stop_at_exit and not already else None)
        _servers[data_dir] = server
    return str(server.get_uri())  # type: ignore[attr-defined]


def running_embedded_url(data_dir: Path) -> str | None:
    """The URL of the embedded PostgreSQL under ``data_dir`` when it is running, else None
    (never starts it)."""
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir.resolve())
    if info is None or not info.is_running():
        return None
    return str(info.get_uri())


def stop_embedded_postgres(data_dir: Path) -> bool:
    """Stop the embedded PostgreSQL under ``data_dir`` (``pg_ctl stop -m fast``: sessions are
    ended, the data is checkpointed); False when it was not running. The caller checks first
    that no other process uses it. Raises ``subprocess.CalledProcessError`` from pg_ctl."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]
    from pgserver.utils import PostmasterInfo

    data_dir = data_dir.resolve()
    _servers.pop(data_dir, None)
    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is None or not info.is_running():
        return False
    # pgserver runs the server as its own system user when started by root; that user must
    # still reach the data directory (something may have tightened a parent since the start)
    user = None
    if os.geteuid() == 0:
        from pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(data_dir)
        user = "pgserver"
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user)
    return True


def with_database(url: str, database: str) -> str:
    """Return ``url`` pointing at another database on the same server (query kept)."""
    parts = urlsplit(url)
    query = urlencode(parse_qsl(parts.query))
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, query, ""))
