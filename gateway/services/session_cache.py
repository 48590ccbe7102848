"""Sessions this process checked lately, so a signed access token authenticates without a
database round trip, while revocation stays exact.

An access token is signed (:func:`gateway.services.tokens.verify_access_token`), so only
"is its session still live, and who is its user now" needs the database. :class:`SessionCache`
keeps that answer for ``seconds`` (``CONFER_AUTH_CACHE_SECONDS``, default 2; 0 turns it off),
and only while this process listens on ``confer_sessions``: PostgreSQL triggers (migration
0025) send a user's id there whenever one of their sessions is deleted or its expiry moves, the
user row changes, or the account is disabled or enabled — from any process or console — and
:func:`run_session_listener` drops that user's entries when it arrives.

The window: a session revoked anywhere is refused by every process once the notification
reached it (delivered at commit, milliseconds on one host). In the process that made the
change there is no window: the same triggers raise a notice on the connection that ran the
statement (migration 0028), which :meth:`gateway.db.Pool.on_notice` hands to
:meth:`SessionCache.forget_user` before the statement's result and again once the transaction
is over — so whichever code path ends a session or changes a user (logout, a password reset
by an admin, a disabled account), the user's next request, answered by this process, reads
the database anew. Should the listening connection fail, the cache empties and stays off until
it listens again, so the window never exceeds ``seconds`` even then. A session's own expiry
is honoured up to ``seconds`` late; ``last_active_at`` is still recorded on a miss, which
comes at least every ``seconds``, so its once-a-minute resolution holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from gateway.db import Pool
from models import User

log = logging.getLogger(__name__)

CHANNEL = "confer_sessions"
"""The ``NOTIFY`` channel the triggers of migration 0025 send user ids on."""


class SessionCache:
    """Session id → (its user, valid until), for at most ``size`` sessions; off until
    :meth:`listening` says the invalidations are heard. ``clock`` gives seconds."""

    def __init__(
        self, seconds: float, *, size: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._seconds = seconds
        self._size = size
        self._clock = clock
        self._live = False
        self._changes = 0
        self._entries: dict[str, tuple[User, float]] = {}
        self._watchers: list[Callable[[str], None]] = []

    @property
    def enabled(self) -> bool:
        """True while entries are kept and answered (a listener is live and ``seconds`` > 0)."""
        return self._live and self._seconds > 0

    def get(self, session_id: str, user_id: str) -> User | None:
        """The user of a live session seen less than ``seconds`` ago, else None."""
        entry = self._entries.get(session_id) if self.enabled else None
        if entry is None or entry[0].id != user_id:
            return None
        if entry[1] <= self._clock():
            del self._entries[session_id]
            return None
        return entry[0]

    def mark(self) -> int:
        """A token for :meth:`put`: take it before reading the session from the database."""
        return self._changes

    def put(self, session_id: str, user: User, *, mark: int) -> None:
        """Remember that ``session_id`` is live for ``user``, as read after :meth:`mark`
        returned ``mark``; ignored while disabled, and when anything was invalidated since
        (the read may predate a revocation that has been heard already)."""
        if not self.enabled or mark != self._changes:
            return
        if len(self._entries) >= self._size:
            del self._entries[next(iter(self._entries))]
        self._entries[session_id] = (user, self._clock() + self._seconds)

    def watch(self, callback: Callable[[str], None]) -> None:
        """Also call ``callback(user_id)`` whenever :meth:`forget_user` is (the open
        WebSockets of that user re-check their sessions: :meth:`EventHub.recheck
        <gateway.realtime.hub.EventHub.recheck>`). A callback that raises is logged."""
        self._watchers.append(callback)

    def forget_user(self, user_id: str) -> None:
        """Drop every entry of ``user_id`` (a session of theirs ended or they changed) and
        tell the watchers."""
        self._changes += 1
        for session_id in [s for s, (u, _) in self._entries.items() if u.id == user_id]:
            self._entries.pop(session_id, None)
        for callback in self._watchers:
            try:
                callback(user_id)
            except Exception:
                log.exception("a session-change watcher failed for %s", user_id)

    def listening(self, live: bool) -> None:
        """Entries are kept only while invalidations are heard; each change empties it."""
        self._live = live
        self._changes += 1
        self._entries.clear()


async def run_session_listener(pool: Pool, cache: SessionCache, *, check_seconds: float) -> None:
    """Listen on :data:`CHANNEL` and keep ``cache`` on while it hears, until cancelled.

    The connection is checked every ``check_seconds``; when it fails (or closes) the cache
    turns off and the error propagates, so the supervisor restarts the listener.
    """
    lost = asyncio.Event()

    def changed(_conn: Any, _pid: int, _channel: str, user_id: str) -> None:
        cache.forget_user(user_id)

    def closed(_conn: Any) -> None:
        cache.listening(False)
        lost.set()

    listener = await pool.connect_direct()
    pool.on_notice(CHANNEL, cache.forget_user)
    try:
        listener.add_termination_listener(closed)
        await listener.add_listener(CHANNEL, changed)
        cache.listening(True)
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), timeout=check_seconds)
            if not lost.is_set():
                await listener.execute("SELECT 1")
        raise ConnectionError("the session listener's connection closed")
    finally:
        cache.listening(False)
        pool.on_notice(CHANNEL, None)
        with contextlib.suppress(Exception):
            await listener.close()
