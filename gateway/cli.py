"""The ``confer`` command line (Typer): serve, migrate, show the instance DID, create an admin,
make and rotate encryption keys, back up and restore."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
import typer
import uvicorn
from pydantic import ValidationError
from pydantic_settings import SettingsError
from uvicorn.server import HANDLED_SIGNALS

from gateway import cli_concepts, cli_federation, cli_memory, heap, migrations
from gateway.access_log import queued_access_log
from gateway.app import create_app, direct_database_url
from gateway.cli_pool import with_pool
from gateway.embedded import running_embedded_url, stop_embedded_postgres
from gateway.errors import ConferError, NotFoundError, PublicURLChangedError
from gateway.logs import configure_logging
from gateway.process_claim import DatabaseInUseError, ProcessClaim, claim_database
from gateway.realtime.wire import uvicorn_options as websocket_options
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
from gateway.storage import AttachmentStorage, attachment_storage

T = TypeVar("T")
log = logging.getLogger(__name__)

app = typer.Typer(help="Confer: a federated messaging gateway for people and their agents.")
app.add_typer(cli_memory.app, name="memory")
app.add_typer(cli_concepts.app, name="concepts")


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default CONFER_HOST)."),
    port: int | None = typer.Option(None, help="Port (default CONFER_PORT)."),
    proxy_headers: bool | None = typer.Option(
        None,
        "--proxy-headers/--no-proxy-headers",
        help="Trust X-Forwarded-For/-Proto from --forwarded-allow-ips (default "
        "CONFER_PROXY_HEADERS, off).",
    ),
    forwarded_allow_ips: str | None = typer.Option(
        None,
        help="Comma-separated proxy addresses/networks trusted for X-Forwarded-* ('*' = any; "
        "default CONFER_FORWARDED_ALLOW_IPS, 127.0.0.1).",
    ),
) -> None:
    """Run the gateway (embedded PostgreSQL unless CONFER_DATABASE_URL is set)."""
    overrides: dict[str, Any] = {
        "host": host,
        "port": port,
        "proxy_headers": proxy_headers,
        "forwarded_allow_ips": forwarded_allow_ips,
    }
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    run_server(settings)


def run_server(settings: Settings, **uvicorn_options: Any) -> None:
    """Serve ``settings``' gateway with uvicorn until interrupted (what ``confer serve`` runs).

    Logs go to stderr as ``settings.log_format`` at ``settings.log_level``
    (:mod:`gateway.logs`); the access log follows ``settings.access_log``
    (:mod:`gateway.access_log`); any other
    ``uvicorn.Config`` option may be passed (benches raise ``backlog``, lower ``log_level``).

    Before serving, the process claims its database (:mod:`gateway.process_claim`): a second
    process on the same database without a shared bus is refused (exit status 3). A start-up
    that fails (a backend unreachable, a changed public URL) ends with exit status 3; one
    interrupted by SIGINT or SIGTERM with 0. After either, or after a signal and a graceful
    shutdown, the embedded PostgreSQL (no ``CONFER_DATABASE_URL``) is stopped unless another
    Confer process still uses it.
    """
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": settings.access_log != "off",
        "ws_max_size": settings.max_body_bytes,
        **websocket_options(compression=settings.ws_compression),
        "proxy_headers": settings.proxy_headers,
        "forwarded_allow_ips": settings.forwarded_allow_ips,
        **uvicorn_options,
    }
    app = _RefusalAsSentence(create_app(settings))
    config = uvicorn.Config(app, **options)
    configure_logging(settings.log_format, settings.log_level)  # after Config, which sets its own
    server = _Server(config, app)
    warning = public_url_warning(settings)
    if warning:
        log.warning(warning)
    claim_url = direct_database_url(settings)  # starts the embedded server when it is used
    with (
        queued_access_log(settings.access_log, settings.access_log_sample_every),
        asyncio.Runner(loop_factory=config.get_loop_factory()) as runner,
    ):
        try:
            runner.run(_serve_claimed(server, settings, claim_url))
        except DatabaseInUseError as exc:
            log.error("refusing to start: %s", exc)
            raise SystemExit(STARTUP_FAILED) from exc
    if not server.started and not server.interrupted:
        raise SystemExit(STARTUP_FAILED)


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def public_url_warning(settings: Settings) -> str | None:
    """The loud warning for a server that listens beyond loopback while its public URL is a
    loopback one (``CONFER_PUBLIC_URL`` unset or left at localhost): no peer can resolve the
    DID derived from it (did:web §3.1), and it cannot change once users exist. None when the
    two agree."""
    public_host = urlsplit(settings.public_url).hostname or ""
    if settings.host in _LOOPBACK_NAMES or public_host not in _LOOPBACK_NAMES:
        return None
    return (
        f"CONFER_PUBLIC_URL is {settings.public_url} but the server listens on "
        f"{settings.host}: peers cannot reach the instance DID {settings.instance_did}. Set "
        "CONFER_PUBLIC_URL to the https:// URL peers use BEFORE the first users register; "
        "it cannot change later"
    )


async def _serve_claimed(server: _Server, settings: Settings, claim_url: str) -> None:
    claim = await claim_database(claim_url, shared_bus=bool(settings.nats_url))
    others: list[int] | None = None
    failed: SystemExit | None = None
    try:
        try:
            await server.serve()
        except SystemExit as exc:
            # uvicorn's sys.exit after a failed start-up (or a port it cannot bind): the
            # claim is released and the embedded PostgreSQL stopped before the process ends
            failed = exc
        try:
            others = await claim.others(this_database=False)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            # the claim's connection is gone (the server restarted?): who else uses the
            # server is unknown, so it is left running
            log.warning("could not tell whether another process uses the database", exc_info=True)
    finally:
        await claim.release()
    if settings.database_url is None and others == []:
        pgdata = settings.data_dir / "pg"
        if await asyncio.to_thread(stop_embedded_postgres, pgdata):
            log.info("stopped the embedded PostgreSQL in %s", pgdata.resolve())
    elif settings.database_url is None:
        log.info("the embedded PostgreSQL keeps running: another Confer process uses it")
    if failed is not None and not server.interrupted:
        raise failed


class _Server(uvicorn.Server):
    """uvicorn's server without its re-raise of the stopping signal once it has shut down:
    that would end the process (SIGTERM's default action) before Confer releases its claim
    and stops the embedded PostgreSQL. A signal still stops the server gracefully; the
    process then exits with status 0.

    A signal during start-up (uvicorn only notes it, and would wait for the lifespan however
    long it takes) cancels the lifespan's start-up: its resources are closed, the claim
    released, the embedded PostgreSQL stopped, and the process exits with status 0
    (``interrupted``). Once the app has started, the garbage collector is set for serving
    (:func:`gateway.heap.settle`)."""

    def __init__(self, config: uvicorn.Config, app: _RefusalAsSentence) -> None:
        super().__init__(config)
        self.wrapped = app
        self.interrupted = False

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        task = self.wrapped.lifespan_task
        if not self.started and task is not None and not task.done():
            self.interrupted = True
            # a signal handler runs between two bytecodes of the main thread, perhaps in the
            # loop's select: call_soon_threadsafe wakes the loop
            task.get_loop().call_soon_threadsafe(task.cancel)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            heap.settle()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


STARTUP_FAILED = 3
"""Exit status when the gateway did not start (uvicorn's own ``STARTUP_FAILURE``)."""


class _RefusalAsSentence:
    """ASGI wrapper: when start-up fails with a ConferError (a changed ``CONFER_PUBLIC_URL``,
    stored keys the keyring cannot open), uvicorn is told its one sentence instead of the
    traceback Starlette formats (ASGI lifespan ``lifespan.startup.failed``, ``message``); any
    other failure keeps its traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lifespan_task: asyncio.Task[Any] | None = None
        """The task running the lifespan while it starts (a signal then cancels it); None
        before and once it has started."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        self.lifespan_task = asyncio.current_task()

        async def send_refusal(message: Any) -> None:
            # Starlette sends startup.failed inside its ``except`` block: the error is current
            failure = sys.exc_info()[1]
            if message["type"] == "lifespan.startup.failed" and isinstance(failure, ConferError):
                message = {**message, "message": f"refusing to start: {failure.detail}"}
            elif message["type"] == "lifespan.startup.failed" and isinstance(
                failure, asyncio.CancelledError
            ):
                message = {**message, "message": "stopped by a signal while starting"}
            if message["type"].startswith("lifespan.startup."):
                self.lifespan_task = None  # started (or not): a signal now is uvicorn's
            await send(message)

        await self.app(scope, receive, send_refusal)


@app.command()
def migrate() -> None:
    """Apply every database migration (Alembic) and print the revision."""
    url = direct_database_url(Settings())
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


@app.command()
def stop() -> None:
    """Stop the embedded PostgreSQL of CONFER_DATA_DIR unless a Confer process still uses it."""
    settings = Settings()
    pgdata = settings.data_dir / "pg"
    if settings.database_url:
        typer.echo("nothing to stop: CONFER_DATABASE_URL is set, the embedded PostgreSQL is unused")
        return
    url = running_embedded_url(pgdata)
    if url is None:
        typer.echo(f"the embedded PostgreSQL in {pgdata.resolve()} is not running")
        return

    async def users() -> list[int]:
        conn = await asyncpg.connect(url)
        try:
            return await ProcessClaim(conn).others(this_database=False)
        finally:
            await conn.close()

    holders = asyncio.run(users())
    if holders:
        typer.echo(
            f"error: {len(holders)} Confer process(es) still use the embedded PostgreSQL in "
            f"{pgdata.resolve()}; stop them first (it stops with the last one)",
            err=True,
        )
        raise typer.Exit(1)
    stop_embedded_postgres(pgdata)
    typer.echo(f"stopped the embedded PostgreSQL in {pgdata.resolve()}")


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


async def _with_storage(
    settings: Settings, work: Callable[[str, AttachmentStorage], Awaitable[T]]
) -> T:
    """``work(database URL, attachment storage)``, the embedded server started if it is the
    one configured; the storage closed after."""
    url = await asyncio.to_thread(direct_database_url, settings)
    storage = await asyncio.to_thread(attachment_storage, settings)
    try:
        return await work(url, storage)
    finally:
        await storage.close()


@app.command()
def backup(
    file: Path = typer.Argument(..., help="The archive to write (tar; replaced if it exists)."),
) -> None:
    """Back up the database and its attachments into FILE, consistently: one pg_dump of one
    snapshot, and the files exactly that snapshot references, with a manifest of checksums."""
    from gateway.services import backups  # pg_dump, tar: only for this command

    settings = Settings()

    async def work(url: str, storage: AttachmentStorage) -> backups.BackupSummary:
        return await backups.create_backup(url, storage, file, bin_dir=settings.pg_bin_dir)

    try:
        done = asyncio.run(_with_storage(settings, work))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    for url in done.missing:
        typer.echo(f"warning: {url} was deleted before it could be copied", err=True)
    typer.echo(
        f"backed up the database (revision {done.revision}) and {done.files} attachment(s),"
        f" {done.file_bytes} bytes, to {file}"
    )


@app.command()
def restore(
    file: Path = typer.Argument(..., help="An archive written by confer backup."),
    force: bool = typer.Option(
        False, "--force", help="Replace everything in a database that is not empty."
    ),
) -> None:
    """Restore FILE into the configured database (which must be empty, unless --force) and
    attachment storage. The whole archive is checked against its checksums first."""
    from gateway.services import backups  # pg_restore, tar: only for this command

    settings = Settings()

    async def work(url: str, storage: AttachmentStorage) -> backups.RestoreSummary:
        return await backups.restore_backup(
            url, storage, file, force=force, bin_dir=settings.pg_bin_dir
        )

    try:
        done = asyncio.run(_with_storage(settings, work))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(
        f"restored the database (revision {done.revision}) and {done.files} attachment(s)"
        f" from {file}; confer serve migrates it to this version on start"
    )


def settings_problems(exc: ValidationError) -> list[str]:
    """One line per setting that did not validate: its environment variable (``CONFER_`` and
    the field's name in capitals), the value given when pydantic kept it, and pydantic's reason.
    A check across fields (no field in its location) is reported by its reason alone."""
    lines = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"])
        reason = error["msg"]
        if not field:
            lines.append(f"invalid settings: {reason}")
            continue
        given = error.get("input")
        shown = f"={given!r}" if isinstance(given, str | int | float | bool) else ""
        lines.append(f"invalid setting CONFER_{field.upper()}{shown}: {reason}")
    return lines


_SETTINGS_ERROR = re.compile(r'error parsing value for field "(\w+)"')

DATABASE_UNREACHABLE = (
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    asyncpg.InvalidAuthorizationSpecificationError,
    asyncpg.InvalidCatalogNameError,
    asyncpg.CannotConnectNowError,
)
"""What connecting to an unreachable or misconfigured database raises: refused, timed out,
unknown host, authentication refused, no such database, the server starting or stopping."""


def error_line(exc: BaseException) -> str | None:
    """The one line on standard error that ends a command for a known error, without the
    ``confer:`` prefix; None for an unexpected error (which keeps its traceback).

    Known: a ConferError (its detail), a ``CONFER_*`` value pydantic-settings could not
    decode (``SettingsError``: a JSON setting that is not JSON), and a database that cannot be
    reached (:data:`DATABASE_UNREACHABLE`)."""
    if isinstance(exc, ConferError):
        return f"error: {exc.detail}"
    if isinstance(exc, SettingsError):
        field = _SETTINGS_ERROR.search(str(exc))
        name = f"CONFER_{field.group(1).upper()}" if field else "a setting"
        reason = exc.__cause__ or exc
        return f"invalid setting {name}: not valid JSON ({reason})"
    if isinstance(exc, DATABASE_UNREACHABLE):
        return (
            "cannot reach the database (CONFER_DATABASE_URL, or the embedded server in "
            f"CONFER_DATA_DIR): {type(exc).__name__}: {exc}"
        )
    return None


def main() -> None:
    """The ``confer`` command line (run by :mod:`gateway.__main__`: the ``confer`` command and
    ``python -m gateway``).

    A setting from the environment, ``.env`` or an option that does not validate ends the
    command with exit status 2 and one line per setting on standard error, not a traceback;
    another known error (:func:`error_line`) with its one line and exit status 1 (3 for
    ``serve``, :data:`STARTUP_FAILED`, when it failed while starting).
    """
    try:
        app()
    except ValidationError as exc:
        if exc.title != Settings.__name__:
            raise
        for line in settings_problems(exc):
            typer.echo(f"confer: {line}", err=True)
        raise SystemExit(2) from None
    except SettingsError as exc:
        typer.echo(f"confer: {error_line(exc)}", err=True)
        raise SystemExit(2) from None
    except Exception as exc:
        known = error_line(exc)
        if known is None:
            raise
        typer.echo(f"confer: {known}", err=True)
        raise SystemExit(1) from None
