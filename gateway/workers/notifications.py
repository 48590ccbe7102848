"""The notification worker: one push or e-mail per burst for users with no device connected.

Rows of ``notification_outbox`` are written with each message, in its transaction (the event
hub). This supervised worker (``notifications`` in ``gateway.app``) wakes on ``NOTIFY
confer_notifications`` or when the next burst is due, and for each user whose burst is over
(``notify_quiet_seconds`` without a new message, or ``notify_max_delay_seconds`` after the
first; ``store.notifications.claim_due`` leases the rows so several processes can share it):

1. drops the rows when the user is online now (a device is connected: they see the messages),
   deleted, or when nothing in the burst notifies (``services.notifications.compose``:
   conversation settings, muted contacts, mentions);
2. sends the digest to every push subscription of the user's live sessions when
   ``preferences.notification.push`` is on (and Web Push is), and by e-mail when
   ``preferences.notification.email`` is on, the account has an address and SMTP is set;
3. deletes the rows once one channel took the notification (or none could ever: no
   subscription, no address); when every channel failed for a reason worth retrying (a push
   service's 429/5xx, a network error, an SMTP failure) the rows are retried after
   ``notify_retry_seconds`` doubling (at most an hour), and dropped after
   ``notify_max_attempts``. A subscription the push service calls gone (404/410) is deleted.

A push service's behaviour is always an outcome, never an exception; an unexpected error for
one user is logged and retried like a failed send, so it never stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from datetime import timedelta
from typing import Any

import asyncpg

from gateway.clock import Clock
from gateway.realtime.ephemeral import EphemeralStore
from gateway.services.mail import Mailer, MailError
from gateway.services.notifications import Digest, compose, mail_text
from gateway.services.push import PushOutcome, PushTarget, WebPushSender
from gateway.settings import Settings
from gateway.store import notifications as store
from gateway.store import push as push_store
from gateway.store import users as users_store
from models import User

log = logging.getLogger(__name__)

IDLE_WAIT = 30.0
RETRY_CAP = 3600.0
USERS_PER_CLAIM = 16


class NotificationWorker:
    """Sends due notifications until cancelled (:meth:`run`, supervised)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        settings: Settings,
        presence: EphemeralStore,
        push: WebPushSender | None,
        mailer: Mailer,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._settings = settings
        self._presence = presence
        self._push = push
        self._mailer = mailer
        self._wake = asyncio.Event()
        self._quiet = timedelta(seconds=settings.notify_quiet_seconds)
        self._max_delay = timedelta(seconds=settings.notify_max_delay_seconds)
        self._lease = timedelta(
            seconds=4 * settings.outbound_timeout_seconds + settings.smtp_timeout_seconds + 30
        )

    def wake(self, *_: Any) -> None:
        """Ask the worker to look at the outbox now."""
        self._wake.set()

    async def run(self) -> None:
        """Notify until cancelled, woken by ``NOTIFY confer_notifications``."""
        # Its own connection, outside the pool: a LISTEN for the life of the worker must not
        # hold a slot that requests wait for.
        async with self._pool.listening(store.NOTIFY_CHANNEL, self.wake):
            while True:
                if not await self.run_once():
                    await self._sleep()

    async def run_once(self) -> bool:
        """Claim the due users' rows and notify each user once; True when there were any."""
        self._wake.clear()
        async with self._pool.acquire() as conn:
            rows = await store.claim_due(
                conn,
                now=self._clock.now(),
                quiet=self._quiet,
                max_delay=self._max_delay,
                lease=self._lease,
                users=USERS_PER_CLAIM,
            )
        by_user: dict[str, list[store.ClaimedRow]] = defaultdict(list)
        for row in rows:
            by_user[row.user_id].append(row)
        await asyncio.gather(*(self._attempt(uid, batch) for uid, batch in by_user.items()))
        return bool(rows)

    async def _sleep(self) -> None:
        async with self._pool.acquire() as conn:
            due = await store.next_due_at(conn, quiet=self._quiet, max_delay=self._max_delay)
        wait = IDLE_WAIT
        if due is not None:
            wait = min(IDLE_WAIT, max(0.2, (due - self._clock.now()).total_seconds()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def _attempt(self, user_id: str, batch: list[store.ClaimedRow]) -> None:
        ids = [row.id for row in batch]
        try:
            retry = await self._notify(user_id, ids)
        except Exception:  # a bug of ours: keep the rows for a retry, keep the worker
            log.exception("notifying user %s failed", user_id)
            retry = True
        async with self._pool.acquire() as conn:
            attempts = max(row.attempts for row in batch) + 1
            if retry and attempts < self._settings.notify_max_attempts:
                delay = min(RETRY_CAP, self._settings.notify_retry_seconds * 2.0 ** (attempts - 1))
                next_at = self._clock.now() + timedelta(seconds=delay)
                await store.retry_rows(conn, row_ids=ids, next_at=next_at)
            else:
                if retry:
                    log.warning("notification of user %s given up after %d", user_id, attempts)
                await store.delete_rows(conn, row_ids=ids)

    async def _notify(self, user_id: str, ids: list[int]) -> bool:
        """Send the user's digest; True when it should be retried (module docstring)."""
        async with self._pool.acquire() as conn:
            user = await users_store.get_user(conn, id=user_id)
            if user is None or user.deleted_at is not None:
                return False
            if await self._presence.user_online(user_id):
                return False  # a device is connected: the user sees the messages there
            pending = await store.list_pending(conn, user_id=user_id, row_ids=ids)
        digest = compose(user, pending, public_url=self._settings.public_url)
        if digest is None:
            return False
        outcomes = [*await self._push_all(user, digest), *await self._mail(user, digest)]
        return "retry" in outcomes and "sent" not in outcomes

    async def _push_all(self, user: User, digest: Digest) -> list[PushOutcome]:
        if self._push is None or not user.preferences.notification.push:
            return []
        now = self._clock.now()
        async with self._pool.acquire() as conn:
            subscriptions = await push_store.list_user_subscriptions(conn, user_id=user.id, now=now)
        outcomes: list[PushOutcome] = []
        for sub in subscriptions:
            target = PushTarget(sub.endpoint, sub.p256dh, sub.auth)
            outcome = await self._push.send(
                target, digest.push_payload(), now=int(self._clock.time())
            )
            async with self._pool.acquire() as conn:
                if outcome == "gone":
                    await push_store.delete_subscription(conn, id=sub.id)
                    log.info("push subscription %s is gone; removed", sub.id)
                elif outcome == "sent":
                    await push_store.mark_sent(conn, id=sub.id, now=now)
            outcomes.append(outcome)
        return outcomes

    async def _mail(self, user: User, digest: Digest) -> list[PushOutcome]:
        if not (self._mailer.configured and user.preferences.notification.email and user.email):
            return []
        subject, text = mail_text(digest, username=user.username)
        try:
            await self._mailer.send(user.email, subject, text)
        except MailError:
            log.warning("notification mail to user %s failed", user.id, exc_info=True)
            return ["retry"]
        return ["sent"]
