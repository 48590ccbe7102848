"""Two-way sync of a local ``.claude/peers/<peer>/`` folder with the server's project memory.

The folder holds ``facts.md`` and ``decisions.md`` (the ``facts_md`` and ``decisions_md`` of
the document) and ``.confer-sync.json``, the state of the last sync: the server version and the
SHA-256 of each file as synced. Each field is merged on its own, three-way against that state:

- changed on one side only → that side wins (pushed with ``If-Match``, or written locally);
- changed on both sides to different text → a conflict: nothing is overwritten on either side,
  the server's text is saved beside the file as ``<file>.server`` and the report names it.

A push that loses a race (412) is reported as a conflict too; run sync again after resolving.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

FILES = {"facts_md": "facts.md", "decisions_md": "decisions.md"}
STATE_FILE = ".confer-sync.json"


class SyncError(Exception):
    """The server refused or failed a request (other than the conflicts sync reports)."""


@dataclass
class SyncReport:
    """What one sync did: ``pushed``/``pulled`` fields, ``conflicts``, the version now synced."""

    version: int | None = None
    pushed: list[str] = field(default_factory=list)
    pulled: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there was no conflict."""
        return not self.conflicts


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_local(folder: Path) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for name, filename in FILES.items():
        path = folder / filename
        values[name] = path.read_text(encoding="utf-8") if path.exists() else None
    return values


def _read_state(folder: Path) -> dict[str, Any] | None:
    path = folder / STATE_FILE
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def _fetch(client: httpx.Client, project: str, peer: str) -> dict[str, Any] | None:
    response = client.get(f"/v1/project-memory/{project}", params={"peer": peer})
    if response.status_code == 404 and response.json().get("code") == "project_memory_not_found":
        return None
    if response.status_code != 200:
        raise SyncError(f"reading project memory failed: {response.status_code} {response.text}")
    return dict(response.json())


def merge_fields(
    local: dict[str, str | None], server: dict[str, str | None], base: dict[str, str | None]
) -> tuple[dict[str, str | None], list[str]]:
    """Three-way merge per field against ``base`` hashes (None = never synced).

    Returns ``(merged, conflicting field names)``.
    """
    merged: dict[str, str | None] = {}
    conflicts: list[str] = []
    for name in FILES:
        mine, theirs, synced = local[name], server[name], base.get(name)
        if mine == theirs:
            merged[name] = mine
        elif synced is not None and _sha(mine) == synced:
            merged[name] = theirs
        elif synced is not None and _sha(theirs) == synced:
            merged[name] = mine
        elif synced is None and (mine is None or theirs is None):
            merged[name] = theirs if mine is None else mine
        else:
            conflicts.append(name)
            merged[name] = mine
    return merged, conflicts


def sync(client: httpx.Client, *, project: str, peer: str, folder: Path) -> SyncReport:
    """Sync ``folder`` with the document (project, peer). Raises SyncError on server errors."""
    folder.mkdir(parents=True, exist_ok=True)
    document = _fetch(client, project, peer)
    local = _read_local(folder)
    server = {name: (document or {}).get(name) for name in FILES}
    state = _read_state(folder) or {}
    merged, conflicts = merge_fields(local, server, state.get("hashes", {}))
    report = SyncReport(version=document["version"] if document else None)
    if conflicts:
        for name in conflicts:
            (folder / f"{FILES[name]}.server").write_text(server[name] or "", encoding="utf-8")
        report.conflicts = conflicts
        return report
    if document is None or merged != server:
        pushed = _push(client, project, peer, merged, document)
        if pushed is None:
            report.conflicts = [n for n in FILES if merged[n] != server[n]]
            return report
        report.version = pushed["version"]
        report.pushed = [n for n in FILES if merged[n] != server[n]]
    for name, filename in FILES.items():
        if merged[name] != local[name] and merged[name] is not None:
            (folder / filename).write_text(merged[name] or "", encoding="utf-8")
            report.pulled.append(name)
    hashes = {name: _sha(merged[name]) for name in FILES}
    (folder / STATE_FILE).write_text(
        json.dumps({"project": project, "peer": peer, "version": report.version, "hashes": hashes}),
        encoding="utf-8",
    )
    return report


def _push(
    client: httpx.Client,
    project: str,
    peer: str,
    merged: dict[str, str | None],
    document: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """PUT the merged document; None when the server moved on meanwhile (412/409)."""
    if document is None and all(v is None for v in merged.values()):
        return {"version": None}
    headers = {"If-Match": f'"{document["version"]}"'} if document else {}
    body = {**merged, "meta": (document or {}).get("meta")}
    response = client.put(
        f"/v1/project-memory/{project}", params={"peer": peer}, json=body, headers=headers
    )
    if response.status_code in (409, 412):
        return None
    if response.status_code not in (200, 201):
        raise SyncError(f"writing project memory failed: {response.status_code} {response.text}")
    return dict(response.json())
