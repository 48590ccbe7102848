"""The instance federation policy: which peers this instance talks to at all.

Three modes (``federation_policy.mode``):

- ``open`` — every peer (the lists are kept but not applied);
- ``denylist`` — every peer but those on the deny list;
- ``allowlist`` — only peers on the allow list, and never one on the deny list (a denied
  ``bad.example.org`` inside an allowed ``*.example.org``).

A list entry is a domain (``example.org``), a wildcard over its subdomains at any depth
(``*.example.org``; not the domain itself — list both for both), either with an optional
``:port`` (without one it matches every port), or one exact did:web DID. A peer's domain is the
host (and port) of its did:web DID (did:web §3.1); the DID of a non-did:web peer has none and
matches only exact DID entries.

The policy is read from PostgreSQL once per process and cached in :class:`FederationPolicy`;
every change ``NOTIFY``s ``confer_federation_policy`` in its transaction, and
:func:`run_policy_listener` (a supervised worker on a connection outside the pool) reloads the
cache in every process when it commits — and every ``reload_seconds`` in case a notification
was missed while the listener reconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from did.errors import InvalidDIDError
from did.web import MAX_DID_LENGTH, did_host
from gateway.clock import Clock
from gateway.db import Pool, transaction
from gateway.errors import FederationRefusedError, NotFoundError, ValidationFailedError
from gateway.store import audit as audit_store
from gateway.store import federation_policy as store

log = logging.getLogger(__name__)

Mode = Literal["open", "allowlist", "denylist"]
ListName = Literal["allow", "deny"]
MODES: tuple[Mode, ...] = ("open", "allowlist", "denylist")

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_PATTERN = re.compile(
    rf"^(?P<wild>\*\.)?(?P<host>{_LABEL}(?:\.{_LABEL})*)(?::(?P<port>\d{{1,5}}))?$"
)


@dataclass(frozen=True)
class Rule:
    """A parsed entry: an exact ``did``, or a ``host`` (``wildcard``: its subdomains only) with
    an optional ``port``."""

    pattern: str
    list: str
    did: str | None = None
    host: str | None = None
    wildcard: bool = False
    port: int | None = None

    def matches(self, did: str, host: str | None, port: int | None) -> bool:
        """True when this entry names the peer ``did`` (whose did:web host and port are given)."""
        if self.did is not None:
            return did == self.did
        if host is None or self.host is None:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host


def normalise_pattern(text: str) -> str:
    """The stored form of an entry (lower-cased domain pattern, or the DID as given).

    Raises ValidationFailedError for anything else (an IP range, a ``*`` not leading, a port
    over 65535, more than 255 characters).
    """
    text = text.strip()
    if text.startswith("did:"):
        if len(text) > MAX_DID_LENGTH:
            raise ValidationFailedError(f"a DID entry is at most {MAX_DID_LENGTH} characters")
        try:
            did_host(text)
        except InvalidDIDError as exc:
            raise ValidationFailedError(f"not a did:web DID: {exc}") from exc
        return text
    lowered = text.lower().rstrip(".")
    match = _PATTERN.match(lowered)
    if len(lowered) > 255 or match is None:
        raise ValidationFailedError(
            "an entry is a domain (example.org), a wildcard (*.example.org), either with an "
            "optional :port, or a did:web DID"
        )
    if match["port"] is not None and not 0 < int(match["port"]) <= 65535:
        raise ValidationFailedError("a port is 1–65535")
    return lowered


def parse_rule(pattern: str, list_name: str) -> Rule:
    """The :class:`Rule` of a stored entry (already normalised)."""
    if pattern.startswith("did:"):
        return Rule(pattern, list_name, did=pattern)
    match = _PATTERN.match(pattern)
    if match is None:  # stored before a stricter check: never matches
        return Rule(pattern, list_name)
    port = int(match["port"]) if match["port"] else None
    return Rule(pattern, list_name, host=match["host"], wildcard=bool(match["wild"]), port=port)


@dataclass(frozen=True)
class Verdict:
    """Whether the peer may federate, and why not (``reason``) when it may not."""

    allowed: bool
    reason: str = ""


class FederationPolicy:
    """The cached policy of this process (module docstring). Open until first loaded.

    ``local_did`` is this instance's DID: it and the DIDs under it are never refused.
    """

    def __init__(
        self, mode: Mode = "open", rules: tuple[Rule, ...] = (), *, local_did: str | None = None
    ) -> None:
        self.mode: Mode = mode
        self.rules = rules
        self._local = local_did

    async def load(self, conn: asyncpg.Connection) -> None:
        """Replace the cache with what the database holds now."""
        mode = await store.get_mode(conn)
        entries = await store.list_entries(conn)
        self.rules = tuple(parse_rule(e.pattern, e.list) for e in entries)
        self.mode = mode if mode in MODES else "open"

    async def reload(self, pool: asyncpg.Pool) -> None:
        """:meth:`load` on a pool connection."""
        async with pool.acquire() as conn:
            await self.load(conn)

    def verdict(self, did: str) -> Verdict:
        """May this instance exchange messages with the peer ``did``?"""
        if self.mode == "open" or self._is_local(did):
            return Verdict(True)
        try:
            host, port = did_host(did)
        except InvalidDIDError:
            host, port = None, None
        for rule in self.rules:
            if rule.list == "deny" and rule.matches(did, host, port):
                return Verdict(False, f"{rule.pattern} is on this instance's deny list")
        if self.mode == "denylist":
            return Verdict(True)
        if any(r.list == "allow" and r.matches(did, host, port) for r in self.rules):
            return Verdict(True)
        where = host if host is not None else did
        return Verdict(False, f"{where} is not on this instance's allow list")

    def _is_local(self, did: str) -> bool:
        local = self._local
        return local is not None and (did == local or did.startswith(local + ":"))

    def check(self, did: str) -> None:
        """Raise FederationRefusedError when the policy refuses ``did``."""
        verdict = self.verdict(did)
        if not verdict.allowed:
            raise FederationRefusedError(f"federation with {did} is refused: {verdict.reason}")

    def describe(self) -> dict[str, Any]:
        """``{"mode", "allow": [...], "deny": [...]}`` as cached."""
        return {
            "mode": self.mode,
            "allow": [r.pattern for r in self.rules if r.list == "allow"],
            "deny": [r.pattern for r in self.rules if r.list == "deny"],
        }


async def _audited(
    pool: asyncpg.Pool,
    policy: FederationPolicy | None,
    action: str,
    actor_id: str | None,
    details: dict[str, Any],
    ip: str | None,
    change: Any,
) -> Any:
    """Run ``change(conn)`` and its audit row in one transaction; reload ``policy`` after."""
    async with transaction(pool) as tx:
        result = await change(tx.conn)
        await audit_store.insert_audit(
            tx.conn, action=action, user_id=actor_id, details=details, ip_address=ip
        )
        if policy is not None:
            tx.call_after(lambda: policy.reload(pool))
    return result


async def set_mode(
    pool: asyncpg.Pool,
    clock: Clock,
    *,
    mode: Mode,
    actor_id: str | None,
    ip: str | None = None,
    policy: FederationPolicy | None = None,
) -> str:
    """Set the instance's mode (audited ``admin.federation.mode``); returns the previous one."""
    if mode not in MODES:
        raise ValidationFailedError(f"mode is one of {', '.join(MODES)}")

    async def change(conn: asyncpg.Connection) -> str:
        return await store.set_mode(conn, mode=mode, now=clock.now())

    details = {"mode": mode, "via": "api" if ip else "cli"}
    previous: str = await _audited(
        pool, policy, "admin.federation.mode", actor_id, details, ip, change
    )
    return previous


async def put_entry(
    pool: asyncpg.Pool,
    clock: Clock,
    *,
    pattern: str,
    list_name: ListName,
    note: str | None,
    actor_id: str | None,
    ip: str | None = None,
    policy: FederationPolicy | None = None,
    conn: asyncpg.Connection | None = None,
) -> store.PolicyEntryRow:
    """Put ``pattern`` on the allow or deny list (audited ``admin.federation.allow|deny``).

    Raises ValidationFailedError for a malformed pattern or a note over 500 characters. With
    ``conn`` the change joins the caller's transaction (the caller audits and reloads).
    """
    normalised = normalise_pattern(pattern)
    if note is not None and len(note) > 500:
        raise ValidationFailedError("a note is at most 500 characters")

    async def change(c: asyncpg.Connection) -> store.PolicyEntryRow:
        return await store.upsert_entry(
            c,
            pattern=normalised,
            list_name=list_name,
            note=note,
            created_by=actor_id,
            now=clock.now(),
        )

    if conn is not None:
        return await change(conn)
    details = {"pattern": normalised, "note": note, "via": "api" if ip else "cli"}
    row: store.PolicyEntryRow = await _audited(
        pool, policy, f"admin.federation.{list_name}", actor_id, details, ip, change
    )
    return row


async def remove_entry(
    pool: asyncpg.Pool,
    *,
    pattern: str,
    actor_id: str | None,
    ip: str | None = None,
    policy: FederationPolicy | None = None,
) -> store.PolicyEntryRow:
    """Take ``pattern`` off its list (audited ``admin.federation.remove``).

    Raises NotFoundError when no list holds it, ValidationFailedError when malformed.
    """
    normalised = normalise_pattern(pattern)

    async def change(conn: asyncpg.Connection) -> store.PolicyEntryRow:
        row = await store.delete_entry(conn, pattern=normalised)
        if row is None:
            raise NotFoundError(f"{normalised} is on neither list")
        return row

    details = {"pattern": normalised, "via": "api" if ip else "cli"}
    row: store.PolicyEntryRow = await _audited(
        pool, policy, "admin.federation.remove", actor_id, details, ip, change
    )
    return row


async def run_policy_listener(
    pool: Pool, policy: FederationPolicy, *, reload_seconds: float = 30.0
) -> None:
    """Keep ``policy`` current in this process until cancelled (module docstring)."""
    changed = asyncio.Event()
    listener = await pool.connect_direct()
    try:
        await listener.add_listener(store.POLICY_CHANNEL, lambda *_: changed.set())
        while True:
            await policy.reload(pool)  # after LISTEN: no change between the two is missed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=reload_seconds)
            changed.clear()
    finally:
        with contextlib.suppress(Exception):
            await listener.close()
