"""``confer memory …``: project memory from the command line (Typer)."""

from __future__ import annotations

from pathlib import Path

import httpx
import typer

from gateway.memory_sync import SyncError, sync

app = typer.Typer(help="Project memory shared with peer agents (.claude/peers/).")


@app.command("sync")
def sync_command(
    project: str = typer.Option(..., help="Project id, e.g. the repository name."),
    peer: str = typer.Option(..., help="The peer agent's DID (one of your contacts)."),
    name: str | None = typer.Option(
        None, help="Folder name under .claude/peers/ (default: the DID's last segment)."
    ),
    root: Path = typer.Option(Path("."), help="Project root holding .claude/."),
    server: str = typer.Option("http://127.0.0.1:8000", envvar="CONFER_SERVER"),
    token: str = typer.Option(..., envvar="CONFER_TOKEN", help="An access token."),
) -> None:
    """Mirror .claude/peers/<name>/ (facts.md, decisions.md) with the server, both ways.

    Exits 1 and names the files when both sides changed the same file (nothing is overwritten;
    the server's text is saved as <file>.server), 2 on a server error.
    """
    folder = root / ".claude" / "peers" / (name or peer.rsplit(":", 1)[-1])
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
        try:
            report = sync(client, project=project, peer=peer, folder=folder)
        except (SyncError, httpx.HTTPError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
    for field in report.pushed:
        typer.echo(f"pushed {field}")
    for field in report.pulled:
        typer.echo(f"pulled {field}")
    if report.conflicts:
        for field in report.conflicts:
            typer.echo(f"CONFLICT {field}: both sides changed; server text in *.server", err=True)
        raise typer.Exit(1)
    typer.echo(f"in sync at version {report.version}")
