"""Two-way sync of a local ``.claude/peers/<peer>/`` folder with the server's project memory.

The folder holds ``facts.md`` and ``decisions.md`` (the ``facts_md`` and ``decisions_md`` of
the document) and ``.confer-sync.json``, the state of the last sync::

    {"project", "peer", "version": <server version last seen>,
     "hashes": {"facts_md": <SHA-256 of the text last in sync, null = absent>, …},
     "conflicts": {"facts_md": {"version", "server": <SHA-256>, "local": <SHA-256>}, …}}

Each field is merged on its own, three-way against ``hashes`` (a field missing there was never
synced), and every field is settled in the same run:

- the same text on both sides → in sync;
- changed on one side only → that side wins: written locally (a field emptied on the server
  removes the local file), or pushed;
- changed on both sides to different text → a conflict: nothing is overwritten on either side,
  the server's text is saved beside the file as ``<file>.server``, and the server text and the
  local text seen are recorded under ``conflicts``.

A recorded conflict is resolved by the user: once the local file differs from the text it had
when the conflict was reported (the user merged into it), or ``<file>.server`` was deleted (the
user keeps the local text), the next sync pushes the local text — provided the server text of
that field is still the one recorded; if the server moved on, it is a new conflict with a fresh
``<file>.server``. ``<file>.server`` is removed once its field is in sync.

All pushes of a run go in one ``PUT`` with ``If-Match`` of the version read (fields not pushed
carry the server's own text). If another writer got in between (412, or 409 when both create),
the run is reported as ``raced``: nothing is written on either side and the state is kept; run
sync again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

FILES = {"facts_md": "facts.md", "decisions_md": "decisions.md"}
STATE_FILE = ".confer-sync.json"
SERVER_SUFFIX = ".server"

Action = Literal["same", "pull", "push", "conflict"]


class SyncError(Exception):
    """The server refused or failed a request (other than the conflicts sync reports)."""


@dataclass
class SyncReport:
    """What one sync did: ``pushed``/``pulled`` field names, ``conflicts`` (field names whose
    server text was saved as ``<file>.server``), ``raced`` (another writer changed the document
    during the run; nothing was written) and ``version``, the server version now synced."""

    version: int | None = None
    pushed: list[str] = field(default_factory=list)
    pulled: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    raced: bool = False

    @property
    def ok(self) -> bool:
        """True when every field is in sync (no conflict, no race)."""
        return not self.conflicts and not self.raced


def _sha(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _read_local(folder: Path) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for name, filename in FILES.items():
        path = folder / filename
        values[name] = path.read_text(encoding="utf-8") if path.exists() else None
    return values


def _read_state(folder: Path, project: str, peer: str) -> dict[str, Any]:
    """The last sync's state, or ``{}`` when there is none or it belongs to another document."""
    path = folder / STATE_FILE
    if not path.exists():
        return {}
    state = dict(json.loads(path.read_text(encoding="utf-8")))
    if state.get("project", project) != project or state.get("peer", peer) != peer:
        return {}
    return state


def _fetch(client: httpx.Client, project: str, peer: str) -> dict[str, Any] | None:
    response = client.get(f"/v1/project-memory/{project}", params={"peer": peer})
    if response.status_code == 404 and response.json().get("code") == "project_memory_not_found":
        return None
    if response.status_code != 200:
        raise SyncError(f"reading project memory failed: {response.status_code} {response.text}")
    return dict(response.json())


def plan_field(
    local: str | None,
    server: str | None,
    *,
    synced: bool,
    base: str | None,
    conflict: dict[str, Any] | None,
    server_copy_exists: bool,
) -> Action:
    """What to do with one field.

    ``local``/``server``: the texts now (None = absent); ``synced``: whether the field was ever
    in sync; ``base``: the SHA-256 of its text then (None = absent); ``conflict``: the recorded
    open conflict (``{"server", "local"}`` SHA-256s) if any; ``server_copy_exists``: whether
    ``<file>.server`` is still there. Returns ``same``, ``pull``, ``push`` or ``conflict``.
    """
    if local == server:
        return "same"
    if conflict is not None and _sha(server) == conflict.get("server"):
        resolved = _sha(local) != conflict.get("local") or not server_copy_exists
        return "push" if resolved else "conflict"
    if not synced:
        if local is None:
            return "pull"
        return "push" if server is None else "conflict"
    if _sha(local) == base:
        return "pull"
    if _sha(server) == base:
        return "push"
    return "conflict"


def sync(client: httpx.Client, *, project: str, peer: str, folder: Path) -> SyncReport:
    """Sync ``folder`` with the document (project, peer); see the module docstring.

    Raises SyncError when the server refuses a request for another reason than a race.
    """
    folder.mkdir(parents=True, exist_ok=True)
    document = _fetch(client, project, peer)
    local = _read_local(folder)
    server = {name: (document or {}).get(name) for name in FILES}
    state = _read_state(folder, project, peer)
    hashes: dict[str, str | None] = dict(state.get("hashes") or {})
    open_conflicts: dict[str, Any] = dict(state.get("conflicts") or {})
    version = document["version"] if document else None

    actions = {
        name: plan_field(
            local[name],
            server[name],
            synced=name in hashes,
            base=hashes.get(name),
            conflict=open_conflicts.get(name),
            server_copy_exists=(folder / f"{filename}{SERVER_SUFFIX}").exists(),
        )
        for name, filename in FILES.items()
    }
    final = {n: local[n] if actions[n] == "push" else server[n] for n in FILES}
    report = SyncReport(version=version)
    pushes = [n for n in FILES if actions[n] == "push"]
    if pushes:
        written = _push(client, project, peer, final, version)
        if written is None:
            report.raced = True
            return report
        report.version = written["version"]
        report.pushed = pushes

    conflicts: dict[str, Any] = {}
    for name, filename in FILES.items():
        copy = folder / f"{filename}{SERVER_SUFFIX}"
        if actions[name] == "conflict":
            _write_atomic(copy, server[name] or "")
            conflicts[name] = {
                "version": version,
                "server": _sha(server[name]),
                "local": _sha(local[name]),
            }
            report.conflicts.append(name)
            continue
        if actions[name] == "pull":
            text = server[name]
            if text is None:
                (folder / filename).unlink(missing_ok=True)
            else:
                _write_atomic(folder / filename, text)
            report.pulled.append(name)
        hashes[name] = _sha(final[name])
        copy.unlink(missing_ok=True)
    _write_atomic(
        folder / STATE_FILE,
        json.dumps(
            {
                "project": project,
                "peer": peer,
                "version": report.version,
                "hashes": hashes,
                "conflicts": conflicts,
            },
            indent=2,
        ),
    )
    return report


def _push(
    client: httpx.Client,
    project: str,
    peer: str,
    document: dict[str, str | None],
    version: int | None,
) -> dict[str, Any] | None:
    """PUT ``document`` (facts_md, decisions_md; the stored meta is kept) with ``If-Match:
    "<version>"`` (none when creating). None when another writer got in first (412/409)."""
    headers = {"If-Match": f'"{version}"'} if version is not None else {}
    response = client.put(
        f"/v1/project-memory/{project}", params={"peer": peer}, json=document, headers=headers
    )
    if response.status_code in (409, 412):
        return None
    if response.status_code not in (200, 201):
        raise SyncError(f"writing project memory failed: {response.status_code} {response.text}")
    return dict(response.json())
