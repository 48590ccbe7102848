"""``confer admin federation …``: the instance federation policy from the command line.

``allow PATTERN`` / ``deny PATTERN`` put a domain, ``*.domain`` or DID on a list, ``remove
PATTERN`` takes it off, ``mode open|allowlist|denylist`` sets the mode, ``list`` prints it all.
Changes are audited (``via: cli``) and reach running gateways through ``NOTIFY`` at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
import typer

from gateway.cli_pool import with_pool
from gateway.clock import Clock
from gateway.errors import ConferError
from gateway.services import federation_policy as service
from gateway.settings import Settings
from gateway.store import federation_policy as store

T = TypeVar("T")

app = typer.Typer(help="The instance federation policy: allow and deny lists, mode.")


def _run(work: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    try:
        return asyncio.run(with_pool(Settings(), work))
    except ConferError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from exc


def _put(pattern: str, list_name: service.ListName, note: str | None) -> None:
    row = _run(
        lambda pool: service.put_entry(
            pool, Clock(), pattern=pattern, list_name=list_name, note=note, actor_id=None
        )
    )
    typer.echo(f"{row.pattern} is on the {row.list} list")


@app.command("allow")
def allow(
    pattern: str = typer.Argument(help="example.org, *.example.org[:port] or a did:web DID"),
    note: str | None = typer.Option(None, help="Why (at most 500 characters)."),
) -> None:
    """Put PATTERN on the allow list (applied in allowlist mode)."""
    _put(pattern, "allow", note)


@app.command("deny")
def deny(
    pattern: str = typer.Argument(help="example.org, *.example.org[:port] or a did:web DID"),
    note: str | None = typer.Option(None, help="Why (at most 500 characters)."),
) -> None:
    """Put PATTERN on the deny list (applied in denylist and allowlist modes)."""
    _put(pattern, "deny", note)


@app.command("remove")
def remove(pattern: str = typer.Argument(help="An entry of either list.")) -> None:
    """Take PATTERN off its list."""
    row = _run(lambda pool: service.remove_entry(pool, pattern=pattern, actor_id=None))
    typer.echo(f"{row.pattern} removed from the {row.list} list")


@app.command("mode")
def mode(value: str = typer.Argument(help="open, allowlist or denylist")) -> None:
    """Set the mode."""
    if value not in service.MODES:
        typer.echo(f"error: the mode is one of {', '.join(service.MODES)}", err=True)
        raise typer.Exit(2)
    previous = _run(lambda pool: service.set_mode(pool, Clock(), mode=value, actor_id=None))
    typer.echo(f"federation mode {value} (was {previous})")


@app.command("list")
def list_policy() -> None:
    """Print the mode and every entry, one a line: ``<list> <pattern>  <note>``."""

    async def read(pool: asyncpg.Pool) -> tuple[str, list[store.PolicyEntryRow]]:
        async with pool.acquire() as conn:
            return await store.get_mode(conn), await store.list_entries(conn)

    current, entries = _run(read)
    typer.echo(f"mode {current}")
    for entry in entries:
        typer.echo(f"{entry.list} {entry.pattern}" + (f"  {entry.note}" if entry.note else ""))
