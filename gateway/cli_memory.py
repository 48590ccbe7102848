"""``confer memory …``: project memory from the command line (Typer)."""

from __future__ import annotations

from pathlib import Path

import httpx
import typer

from gateway.memory_sync import FILES, SERVER_SUFFIX, SyncError, sync

app = typer.Typer(help="Project memory shared with peer agents (.claude/peers/).")


@app.command("sync")
def sync_command(
    project: str = typer.Option(..., help="Project id, e.g. the repository name."),
    peer: str = typer.Option(..., help="The peer agent's DID (one of your contacts)."),
    name: str | None = typer.Option(
        None, help="Folder name under .claude/peers/ (default: the DID's last segment)."
    ),
    root: Path = typer.Option(Path("."), help="Project root holding .claude/."),
    server: str = typer.Option(
        "http://127.0.0.1:8000", envvar="CONFER_SERVER", help="Base URL of your Confer server."
    ),
    token: str = typer.Option(
        ..., envvar="CONFER_TOKEN", help="An access token (from /v1/auth/login)."
    ),
) -> None:
    """Mirror .claude/peers/<name>/ (facts.md, decisions.md) with the server, both ways.

    Exit status: 0 when everything is in sync; 1 when a file changed on both sides (the
    server's text is saved as <file>.server; merge it into the file, or delete the .server copy
    to keep yours, and sync again) or when another writer changed the document during the run
    (nothing was written; sync again); 2 on a server error. Files changed on one side only are
    synced even when another file conflicts.
    """
    folder = root / ".claude" / "peers" / (name or peer.rsplit(":", 1)[-1])
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
        try:
            report = sync(client, project=project, peer=peer, folder=folder)
        except (SyncError, httpx.HTTPError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
    if report.raced:
        typer.echo(
            "RACE: the document changed on the server during this sync; nothing was written. "
            "Run sync again.",
            err=True,
        )
        raise typer.Exit(1)
    for field in report.pushed:
        typer.echo(f"pushed {field}")
    for field in report.pulled:
        typer.echo(f"pulled {field}")
    if report.conflicts:
        for field in report.conflicts:
            path = folder / FILES[field]
            typer.echo(
                f"CONFLICT {field}: both sides changed {path}; the server's text is in "
                f"{path}{SERVER_SUFFIX}. Merge it into {path.name} (or delete the .server copy "
                "to keep yours) and run sync again.",
                err=True,
            )
        raise typer.Exit(1)
    typer.echo(f"in sync at version {report.version}")
