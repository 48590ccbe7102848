"""``confer concepts …``: the concept memory from the command line (Typer)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import typer

from gateway import migrations
from gateway.agents.embeddings import Embedder
from gateway.app import direct_database_url
from gateway.clock import Clock
from gateway.db import Transaction, create_pool
from gateway.errors import ConferError, UserNotFoundError
from gateway.mcp.audit import audited_write
from gateway.services import concept_import
from gateway.services.concepts import ConceptDeps
from gateway.settings import Settings
from gateway.store import users as users_store

app = typer.Typer(help="Concept memory: import session files.")

TOOL_NAME = "confer concepts import"


@app.command("import")
def import_command(
    file: Path = typer.Argument(..., help="A session YAML file (docs/agents.md).", exists=True),
    user: str = typer.Option(..., "--user", help="Whose main agent's concept memory."),
    session: str | None = typer.Option(
        None,
        help="Session the concepts were seen in, when the file names none (default: the"
        " file name).",
    ),
) -> None:
    """Import FILE's concepts and relations into USER's main agent's concept memory.

    Valid entries are stored in one transaction; skipped ones are printed (ERROR or WARNING)
    and each leaves an audit row (tool name 'confer concepts import'). Exit status: 0 when
    everything was stored; 1 when entries were skipped; 2 when the file or user was refused
    (nothing written).
    """
    settings = Settings()
    size = file.stat().st_size
    if size > concept_import.MAX_BYTES:
        typer.echo(f"error: {file} has {size} bytes; at most {concept_import.MAX_BYTES}", err=True)
        raise typer.Exit(2)
    text = file.read_text(encoding="utf-8", errors="replace")
    try:
        result = asyncio.run(_import(settings, text, user, session or file.name))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from exc
    if not result["ok"]:
        typer.echo(f"error: {result['error']}", err=True)
        raise typer.Exit(2)
    for level, found in (("ERROR", result["errors"]), ("WARNING", result["warnings"])):
        for item in found:
            typer.echo(f"{level} {item['entry']}: {item['message']}", err=True)
    typer.echo(
        f"session {result['session']}: {result['concepts_stored']} concepts, "
        f"{result['relations_stored']} relations, {result['frame_references_stored']} frame "
        f"references stored; {result['skipped']} skipped "
        f"({len(result['errors'])} errors, {len(result['warnings'])} warnings)"
    )
    if result["skipped"]:
        raise typer.Exit(1)


async def _import(settings: Settings, text: str, username: str, session: str) -> dict[str, Any]:
    url = direct_database_url(settings)
    await asyncio.to_thread(migrations.upgrade, url)
    pool: asyncpg.Pool = await create_pool(url, min_size=1, max_size=2)
    try:
        async with httpx.AsyncClient(timeout=settings.llm_timeout_seconds) as http:
            embedder = Embedder(
                http,
                settings.embedding_base_url,
                settings.embedding_model,
                settings.embedding_api_key,
            )
            deps = ConceptDeps(pool, embedder, Clock())
            async with pool.acquire() as conn:
                user = await users_store.get_user_by_username(conn, username=username)
            if user is None:
                raise UserNotFoundError(f"no user {username!r}")
            audit = concept_import.Audit(user_id=user.id, agent="cli", tool_name=TOOL_NAME)

            async def action(tx: Transaction) -> tuple[dict[str, Any], str | None]:
                document = concept_import.parse(text)  # refused: an audited failure
                return await concept_import.import_session_in(
                    tx, deps, user, document, audit=audit, default_session=session
                )

            return await audited_write(
                pool,
                user_id=user.id,
                agent="cli",
                tool_name=TOOL_NAME,
                payload={"session": session, "bytes": len(text)},
                target_table="concepts",
                action=action,
            )
    finally:
        await pool.close()
