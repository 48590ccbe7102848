"""The ``confer`` command line (Typer): serve, migrate, show the instance DID, create an admin,
make and rotate encryption keys."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, TypeVar

import asyncpg
import typer
import uvicorn

from gateway import cli_concepts, cli_federation, cli_memory, migrations
from gateway.access_log import queued_access_log
from gateway.app import create_app, database_url
from gateway.cli_pool import with_pool
from gateway.errors import ConferError, NotFoundError, PublicURLChangedError
from gateway.logs import configure_logging
from gateway.services import keys as keys_service
from gateway.services.admin_bootstrap import ensure_admin, set_password
from gateway.services.encryption import Keyring, generate_key_entry
from gateway.services.identity import (
    Identity,
    check_public_url,
    load_identity,
)
from gateway.services.llm_keys import reencrypt_all
from gateway.settings import Settings

T = TypeVar("T")

app = typer.Typer(help="Confer: a federated messaging gateway for people and their agents.")
app.add_typer(cli_memory.app, name="memory")
app.add_typer(cli_concepts.app, name="concepts")


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default CONFER_HOST)."),
    port: int | None = typer.Option(None, help="Port (default CONFER_PORT)."),
) -> None:
    """Run the gateway (embedded PostgreSQL unless CONFER_DATABASE_URL is set)."""
    overrides: dict[str, Any] = {"host": host, "port": port}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    run_server(settings)


def run_server(settings: Settings, **uvicorn_options: Any) -> None:
    """Serve ``settings``' gateway with uvicorn until interrupted (what ``confer serve`` runs).

    Logs go to stderr as ``settings.log_format`` at ``settings.log_level``
    (:mod:`gateway.logs`); the access log follows ``settings.access_log``
    (:mod:`gateway.access_log`); any other
    ``uvicorn.Config`` option may be passed (benches raise ``backlog``, lower ``log_level``).
    """
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": settings.access_log != "off",
        "ws_max_size": settings.max_body_bytes,
        **uvicorn_options,
    }
    config = uvicorn.Config(_RefusalAsSentence(create_app(settings)), **options)
    configure_logging(settings.log_format, settings.log_level)  # after Config, which sets its own
    server = uvicorn.Server(config)
    with queued_access_log(settings.access_log, settings.access_log_sample_every):
        server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILED)


STARTUP_FAILED = 3
"""Exit status when the gateway did not start (uvicorn's own ``STARTUP_FAILURE``)."""


class _RefusalAsSentence:
    """ASGI wrapper: when start-up fails with a ConferError (a changed ``CONFER_PUBLIC_URL``,
    stored keys the keyring cannot open), uvicorn is told its one sentence instead of the
    traceback Starlette formats (ASGI lifespan ``lifespan.startup.failed``, ``message``); any
    other failure keeps its traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_refusal(message: Any) -> None:
            # Starlette sends startup.failed inside its ``except`` block: the error is current
            failure = sys.exc_info()[1]
            if message["type"] == "lifespan.startup.failed" and isinstance(failure, ConferError):
                message = {**message, "message": f"refusing to start: {failure.detail}"}
            await send(message)

        await self.app(scope, receive, send_refusal)


@app.command()
def migrate() -> None:
    """Apply every database migration (Alembic) and print the revision."""
    url = database_url(Settings())
    migrations.upgrade(url)
    typer.echo(f"database at revision {migrations.current_revision(url)}")


@app.command()
def did() -> None:
    """Print the instance DID and its DID document URL (as the server records them)."""
    settings = Settings()

    async def show(pool: asyncpg.Pool) -> Identity:
        return await load_identity(pool, public_url=settings.public_url, recorded=True)

    identity = asyncio.run(with_pool(settings, show))
    typer.echo(identity.did)
    typer.echo(f"{identity.public_url}/.well-known/did.json")


async def _instance_identity(pool: asyncpg.Pool, settings: Settings) -> Identity:
    """The identity the server recorded in the database (its public URL, not this shell's
    ``CONFER_PUBLIC_URL``), checked against the stored users before anything is written."""
    identity = await load_identity(pool, public_url=settings.public_url, recorded=True)
    await check_public_url(pool, identity)
    return identity


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
        identity = await _instance_identity(pool, settings)
        return await ensure_admin(pool, identity, settings, username, password)

    try:
        typer.echo(asyncio.run(with_pool(settings, work)))
    except PublicURLChangedError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


admin_app = typer.Typer(help="Operator work on accounts.")
app.add_typer(admin_app, name="admin")
admin_app.add_typer(cli_federation.app, name="federation")


def _read_password() -> str:
    """The new password: the first line of stdin when it is not a terminal, else prompted
    twice without echo."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    value: str = typer.prompt("New password", hide_input=True, confirmation_prompt=True)
    return value


@admin_app.command("set-password")
def admin_set_password(
    username: str = typer.Argument(..., help="The user whose password is replaced."),
) -> None:
    """Set USERNAME's password (read from stdin, or prompted) and end all their sessions."""
    settings = Settings()
    password = _read_password()

    async def work(pool: asyncpg.Pool) -> int:
        return await set_password(pool, settings, username, password)

    try:
        revoked = asyncio.run(with_pool(settings, work))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"password of {username} set; {revoked} session(s) ended")


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
        changed, total = asyncio.run(with_pool(settings, work))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"re-encrypted {changed} of {total} stored keys under {keyring.current_kid!r}")


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


keys_app = typer.Typer(help="Instance federation keys (did:web, RFC 9421): list, rotate, remove.")
app.add_typer(keys_app, name="keys")


@keys_app.command("list")
def keys_list() -> None:
    """Show the listed federation keys: fragment, created, retired."""
    for row in asyncio.run(with_pool(Settings(), keys_service.list_keys)):
        state = f"retired {row.retired_at:%Y-%m-%d %H:%M}" if row.retired_at else "active"
        typer.echo(f"{row.fragment}\t{row.created_at:%Y-%m-%d %H:%M}\t{state}")


@keys_app.command("rotate")
def keys_rotate() -> None:
    """Add a new signing key; the old one keeps verifying until removed. Restart to sign."""
    fragment = asyncio.run(with_pool(Settings(), keys_service.rotate))
    typer.echo(f"new active key: #{fragment} (restart the gateway processes to sign with it)")


@keys_app.command("remove")
def keys_remove(fragment: str = typer.Argument(help="A retired key, e.g. key-1")) -> None:
    """Unlist a retired key from the DID documents: signatures made with it stop verifying."""
    try:
        asyncio.run(with_pool(Settings(), lambda pool: keys_service.remove(pool, fragment)))
    except NotFoundError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"removed #{fragment}")


def main() -> None:
    """Entry point for ``python -m gateway``."""
    app()
