"""The ``confer`` command line (Typer): serve, migrate, show the instance DID."""

from __future__ import annotations

import asyncio

import typer
import uvicorn

from gateway import cli_memory, migrations
from gateway.app import create_app, database_url
from gateway.db import create_pool
from gateway.services.identity import load_identity
from gateway.settings import Settings

app = typer.Typer(help="Confer: a federated messaging gateway for people and their agents.")
app.add_typer(cli_memory.app, name="memory")


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default CONFER_HOST)."),
    port: int | None = typer.Option(None, help="Port (default CONFER_PORT)."),
) -> None:
    """Run the gateway (embedded PostgreSQL unless CONFER_DATABASE_URL is set)."""
    overrides = {"host": host, "port": port}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="info",
        ws_max_size=settings.max_body_bytes,
    )


@app.command()
def migrate() -> None:
    """Apply every database migration (Alembic) and print the revision."""
    url = database_url(Settings())
    migrations.upgrade(url)
    typer.echo(f"database at revision {migrations.current_revision(url)}")


@app.command()
def did() -> None:
    """Print the instance DID and its DID document URL."""
    settings = Settings()

    async def show() -> None:
        url = database_url(settings)
        migrations.upgrade(url)
        pool = await create_pool(url, min_size=1, max_size=1)
        try:
            identity = await load_identity(pool, public_url=settings.public_url)
        finally:
            await pool.close()
        typer.echo(identity.did)
        typer.echo(f"{settings.public_url}/.well-known/did.json")

    asyncio.run(show())


@app.command()
def demo(
    port_a: int = typer.Option(8001, help="Port of instance A."),
    port_b: int = typer.Option(8002, help="Port of instance B."),
) -> None:
    """Run two instances on loopback and exchange signed messages between them."""
    from gateway.demo import default_databases, run_demo

    settings = Settings()

    async def go() -> None:
        urls = await default_databases(settings.database_url, settings.data_dir)
        result = await run_demo(ports=(port_a, port_b), database_urls=urls, say=typer.echo)
        typer.echo(f"done in {result.seconds:.2f} s: A → B and B → A, signed and verified")

    try:
        asyncio.run(go())
    except RuntimeError as exc:
        typer.echo(f"demo failed: {exc}", err=True)
        raise typer.Exit(1) from exc


def main() -> None:
    """Entry point for ``python -m gateway``."""
    app()
