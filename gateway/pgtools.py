"""PostgreSQL's own client programs (``pg_dump``, ``pg_restore``) of a version that fits.

``pg_dump`` must be at least as new as the server it dumps, and ``pg_restore`` at least as new
as the ``pg_dump`` that wrote the archive (PostgreSQL docs, pg_dump "Notes"). Candidates are
the folder ``CONFER_PG_BIN_DIR`` names when it is set, else the programs pgserver ships (the
embedded server's own version), every folder on ``PATH`` and Debian's
``/usr/lib/postgresql/<major>/bin``; the oldest one new enough wins, so a PostgreSQL 15 server
is dumped by a PostgreSQL 15 ``pg_dump`` where there is one.

A URL's password never goes on a command line (where ``ps`` shows it): it is passed in
``PGPASSWORD``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from gateway.errors import BackupError


@functools.cache
def tool_major(path: Path) -> int | None:
    """The major version ``path --version`` reports (``pg_dump (PostgreSQL) 16.2`` → 16)."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\(PostgreSQL\) (\d+)", out)
    return int(found.group(1)) if found else None


def _candidate_dirs(bin_dir: Path | None) -> list[Path]:
    if bin_dir is not None:
        return [bin_dir]
    dirs: list[Path] = []
    spec = importlib.util.find_spec("pgserver")  # located, not imported (it starts nothing)
    for location in (spec.submodule_search_locations or []) if spec else []:
        dirs.append(Path(location) / "pginstall" / "bin")
    dirs += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    dirs += sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    return dirs


def find_tool(name: str, *, at_least: int, bin_dir: Path | None = None) -> tuple[Path, int]:
    """The oldest ``name`` (``pg_dump``, ``pg_restore``) of major version ``at_least`` or
    newer, with its major. Raises BackupError naming what was found when none fits."""
    seen: dict[Path, int] = {}
    for folder in _candidate_dirs(bin_dir):
        path = folder / name
        if path in seen or not (path.is_file() and os.access(path, os.X_OK)):
            continue
        major = tool_major(path)
        if major is not None:
            seen[path] = major
    fitting = sorted(
        ((major, path) for path, major in seen.items() if major >= at_least),
        key=lambda pair: (pair[0], str(pair[1])),
    )
    if not fitting:
        found = ", ".join(f"{path} ({major})" for path, major in seen.items()) or "none"
        raise BackupError(
            f"no {name} of PostgreSQL {at_least} or newer (found: {found}); install that "
            f"client or set CONFER_PG_BIN_DIR"
        )
    major, path = fitting[0]
    return path, major


def libpq_target(database_url: str) -> tuple[str, dict[str, str]]:
    """``database_url`` without its password, and the environment that carries it."""
    parts = urlsplit(database_url)
    env = dict(os.environ)
    if parts.password is not None:
        env["PGPASSWORD"] = unquote(parts.password)
        host = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        parts = parts._replace(netloc=f"{user}@{host}" if user else host)
    return urlunsplit(parts), env


async def run_tool(path: Path, *args: str, database_url: str) -> None:
    """Run ``path ARGS --dbname=<url>`` to the end; BackupError with its stderr when it fails."""
    url, env = libpq_target(database_url)
    process = await asyncio.create_subprocess_exec(
        str(path),
        *args,
        f"--dbname={url}",
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await process.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        message = stderr.decode(errors="replace").strip()[-2000:]
        raise BackupError(f"{path.name} failed: {message}")
