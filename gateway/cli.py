"""The ``confer`` command line (Typer): serve, migrate, show the instance DID, create an admin,
make and rotate encryption keys."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
import typer
import uvicorn

from gateway import migrations
from gateway.app import create_app, database_url
from gateway.db import create_pool
from gateway.errors import ConferError
from gateway.services.admin_bootstrap import ensure_admin
from gateway.services.encryption import Keyring, generate_key_entry
from gateway.services.identity import load_identity
from gateway.services.llm_keys import reencrypt_all
from gateway.settings import Settings

T = TypeVar("T")

app = typer.Typer(help="Confer: a federated messaging gateway for people and their agents.")


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default CONFER_HOST)."),
    port: int | None = typer.Option(None, help="Port (default CONFER_PORT)."),
) -> None:
    """Run the gateway (embedded PostgreSQL unless CONFER_DATABASE_URL is set)."""
    settings = Settings()
    uvicorn.run(
        create_app(settings),
        host=host or settings.host,
        port=port or settings.port,
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


async def _with_pool(settings: Settings, work: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    url = database_url(settings)
    await asyncio.to_thread(migrations.upgrade, url)
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        return await work(pool)
    finally:
        await pool.close()


@app.command("create-admin")
def create_admin(
    username: str = typer.Argument(..., help="Existing user to promote, or new user to create."),
    password: str | None = typer.Option(
        None, help="Create the user with this password if it does not exist (else prompted)."
    ),
) -> None:
    """Make USERNAME an admin, creating the account first when it does not exist."""
    settings = Settings()

    async def work(pool: asyncpg.Pool) -> str:
        identity = await load_identity(pool, public_url=settings.public_url)
        return await ensure_admin(pool, identity, settings, username, password)

    typer.echo(asyncio.run(_with_pool(settings, work)))


@app.command("new-encryption-key")
def new_encryption_key(
    kid: str = typer.Argument(..., help="Key id, e.g. k2 (1-32 of A-Z a-z 0-9 _ -)."),
) -> None:
    """Print a fresh 'kid:base64' AES-256 key to put FIRST in CONFER_ENCRYPTION_KEYS."""
    typer.echo(generate_key_entry(kid))


@app.command("rotate-encryption-key")
def rotate_encryption_key() -> None:
    """Re-encrypt every stored LLM key under the first key of CONFER_ENCRYPTION_KEYS, in one
    transaction (all or nothing). Afterwards the older keys can be removed from the setting."""
    settings = Settings()
    keyring = Keyring.from_setting(settings.encryption_keys)

    async def work(pool: asyncpg.Pool) -> tuple[int, int]:
        return await reencrypt_all(pool, keyring)

    try:
        changed, total = asyncio.run(_with_pool(settings, work))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"re-encrypted {changed} of {total} stored keys under {keyring.current_kid!r}")


def main() -> None:
    """Entry point for ``python -m gateway``."""
    app()
