"""The hub: each user's ordered event stream, and fan-out to this process's devices.

Durable events (message created/edited/deleted, receipts, conversation and participant
changes, permission requests and decisions) are appended to the user's stream in PostgreSQL
with ``append``, inside the transaction of the change they announce, and published on the event
bus once it has committed (``Transaction.call_after``). Every process watching the user on the
bus offers the frame to its local subscribers. A crash between the commit and the publish loses
nothing: the event is stored, and a device resuming by offset replays it. Ephemeral events
(typing, presence, message.delta) go over the bus only, with ``emit_ephemeral``.

A ``message.created`` event also queues the message for notification (push, e-mail) of its
recipients other than the sender, in the same transaction (``store.notifications``): the
notification worker later tells those who had no device connected.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from gateway.db import Transaction
from gateway.errors import TooManyConnectionsError
from gateway.metrics import EVENTS_FANNED_OUT
from gateway.realtime.bus import EventBus, InProcessBus
from gateway.realtime.ephemeral import EphemeralStore, MemoryEphemeralStore
from gateway.realtime.subscriber import (
    EventEncoding,
    Frame,
    Subscriber,
    ephemeral_frame,
    event_frame,
)
from gateway.store import events as events_store
from gateway.store import message_changes as change_store

__all__ = ["EPHEMERAL_TYPES", "EventHub", "Subscriber"]

log = logging.getLogger(__name__)

EPHEMERAL_TYPES = frozenset({"typing", "presence", "message.delta"})
DELIVERED_FLUSH_SECONDS = 0.1


def _delivery_of(event_type: str, data: Any) -> tuple[str | None, str | None]:
    """(sender id, message id) of a ``message.created`` event, else (None, None)."""
    if event_type != "message.created" or not isinstance(data, dict):
        return None, None
    return data.get("sender_id"), data.get("id")


def _json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


_AT_COMMIT = "stream events to write at commit"
"""The key under which a transaction remembers its open group of events to be written at its
commit (:attr:`gateway.db.Transaction.events_at_commit`): the key of the group, under which
it remembers the group's events, in order. Events appended one after the other join the open
group; other work registered for the commit (a series) closes it, so everything is written
in the order it was appended. A savepoint that rolls back forgets what was appended in it,
the group it opened included (:meth:`Transaction.remember`, :meth:`Transaction.savepoint`)."""


@dataclass(frozen=True)
class _Event:
    """A durable event to append: its users (sorted, unique), type, data and JSON text, and
    the conversation it is also announced to."""

    users: list[str]
    type: str
    data: Any
    text: str
    conversation_id: str | None

    def to_append(self) -> events_store.EventToAppend:
        """The rows to write: a ``message.created`` event also queues its recipients'
        notification (all but the sender), in the same statement."""
        sender, message_id = _delivery_of(self.type, self.data)
        recipients = [uid for uid in self.users if uid != sender]
        notice = None
        if message_id is not None and recipients:
            notice = events_store.MessageNotice(
                recipients, message_id, str(self.data["conversation_id"])
            )
        return events_store.EventToAppend(self.users, self.type, self.text, notice)


class EventHub:
    """Registry of this process's subscribers, the writer of user streams, the bus front.

    ``pool`` is required for durable events; ``bus`` defaults to the in-process bus and
    ``ephemeral`` (rate-limit slots, presence) to the in-memory store.
    """

    def __init__(
        self,
        queue_size: int = 256,
        *,
        pool: asyncpg.Pool | None = None,
        bus: EventBus | None = None,
        ephemeral: EphemeralStore | None = None,
    ) -> None:
        self._queue_size = queue_size
        self._pool = pool
        self.bus = bus or InProcessBus()
        self.ephemeral = ephemeral or MemoryEphemeralStore()
        self._subscribers: dict[str, set[Subscriber]] = {}
        self._watching: dict[str, asyncio.Task[None]] = {}
        self._delivered: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect the bus; frames for watched users then reach local subscribers."""
        await self.bus.start(self.deliver)

    async def close(self) -> None:
        """Finish the pending delivery flush, then disconnect the bus."""
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self.bus.close()
        await self.ephemeral.close()

    # -- local registry ----------------------------------------------------------------

    def subscribe(self, user_id: str) -> Subscriber:
        """Register a device of ``user_id`` in this process (without watching the bus)."""
        subscriber = Subscriber(user_id, self._queue_size)
        self._subscribers.setdefault(user_id, set()).add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Forget a device; safe to call more than once."""
        group = self._subscribers.get(subscriber.user_id)
        if group is not None:
            group.discard(subscriber)
            if not group:
                del self._subscribers[subscriber.user_id]

    async def connect(self, user_id: str, *, max_connections: int | None = None) -> Subscriber:
        """Register a device and make sure this process watches ``user_id`` on the bus.

        Returns once the bus subscription is active, so no event committed afterwards is
        missed by this device. Raises :class:`TooManyConnectionsError` when ``user_id``
        already has ``max_connections`` devices here (checked and registered in one step of
        the event loop, so simultaneous handshakes cannot overshoot).
        """
        if max_connections is not None and self.connections(user_id) >= max_connections:
            raise TooManyConnectionsError(
                f"at most {max_connections} WebSocket connections per user on this server;"
                " close another one first",
                retry_after=5,
            )
        subscriber = self.subscribe(user_id)
        watch = self._watching.get(user_id)
        if watch is None or (watch.done() and watch.exception() is not None):
            watch = asyncio.create_task(self.bus.watch(user_id))
            self._watching[user_id] = watch
        try:
            await asyncio.shield(watch)
        except BaseException:
            self.unsubscribe(subscriber)
            raise
        return subscriber

    async def disconnect(self, subscriber: Subscriber) -> None:
        """Unregister a device; stop watching its user when it was the last one here."""
        self.unsubscribe(subscriber)
        user_id = subscriber.user_id
        if user_id not in self._subscribers and self._watching.pop(user_id, None) is not None:
            try:
                await self.bus.unwatch(user_id)
            except Exception:  # the bus may be gone at shutdown; nothing to clean up then
                log.warning("could not unwatch %s", user_id, exc_info=True)

    def recheck(self, user_id: str) -> None:
        """A login session of ``user_id`` ended or the user changed (a logout, a password
        reset, a disabled account, wherever it was made): each of the user's devices here
        holds its events and re-checks its own session at once, closing with 4001 when it
        ended (:class:`gateway.realtime.session.EventSession`)."""
        for subscriber in tuple(self._subscribers.get(user_id, ())):
            if subscriber.recheck is not None:
                subscriber.recheck()

    def connections(self, user_id: str) -> int:
        """How many devices of ``user_id`` are connected to this process."""
        return len(self._subscribers.get(user_id, ()))

    @property
    def device_count(self) -> int:
        """How many devices (of every user) are connected to this process."""
        return sum(len(group) for group in self._subscribers.values())

    def deliver(self, frames: Sequence[tuple[str, Frame]]) -> None:
        """Offer each (user_id, frame) from the bus to every local device of that user, in
        order (never blocks). A caught-up device's socket gets the frame's bytes in this call
        (:attr:`Subscriber.sink`)."""
        local = self._subscribers
        offered = 0
        for user_id, frame in frames:
            group = local.get(user_id)
            if group:
                offered += len(group)
                for subscriber in tuple(group):
                    subscriber.offer(frame)
        if offered:
            EVENTS_FANNED_OUT.inc(offered)

    # -- writing -----------------------------------------------------------------------

    async def append(
        self,
        tx: Transaction,
        user_ids: Iterable[str],
        event_type: str,
        data: Any,
        *,
        conversation_id: str | None = None,
        text: str | None = None,
    ) -> None:
        """Append one durable event to each user's stream in ``tx``; publish it after commit.

        ``data`` must be JSON-serialisable; ``text`` is its JSON text when the caller has it
        (a model's own encoding: pydantic's, which spells a float below 1e-4 without an
        exponent, as PostgreSQL's ``jsonb`` does; the same text otherwise). The rows are
        written in ``tx.conn``, so the event commits (or rolls back) with the change it
        announces; the frames go on the bus once ``tx`` has committed
        (:meth:`gateway.db.Transaction.call_after`). A lost publish is recovered by the
        device's replay from the stored offset. With ``conversation_id`` the event is also
        announced on the conversation's subject (``{"type", "data"}``). Raises ValueError
        for an ephemeral type (those go through :meth:`emit_ephemeral`).

        In a transaction with :attr:`~gateway.db.Transaction.events_at_commit` (a shared run
        of a JSON-RPC batch, a group commit's batch of posts) the rows are written just before
        its ``COMMIT``, in the order the events were appended: the users' stream rows stay
        locked for the commit only, not while the run's other units are written. Those
        appended one after the other are written in one statement
        (:func:`gateway.store.events.append_event_batch`): a batch of posts costs one round
        trip for its events, not one a post.
        """
        if event_type in EPHEMERAL_TYPES:
            raise ValueError(f"{event_type} is ephemeral: use emit_ephemeral")
        event = _Event(
            sorted(set(user_ids)), event_type, data, text or _json(data), conversation_id
        )
        if not tx.events_at_commit:
            await self._write(tx, (event,))
            return
        group = tx.recall(_AT_COMMIT)
        if group is None:  # the first event since the last write registered: a new group
            group = object()
            tx.remember(_AT_COMMIT, group)
            tx.call_before_commit(functools.partial(self._write_group, tx, group))
        tx.remember(group, (*(tx.recall(group) or ()), event))

    async def _write_group(self, tx: Transaction, group: object) -> None:
        """Write a group of events appended at commit, one after the other, in one statement."""
        if tx.recall(_AT_COMMIT) is group:
            tx.remember(_AT_COMMIT, None)  # events appended from here on are written after
        await self._write(tx, tx.recall(group))

    async def _write(self, tx: Transaction, events: Sequence[_Event]) -> None:
        """Write ``events`` to their users' streams in one statement, in order, and register
        their publishing after commit (each event's frames, then its conversation's)."""
        stored = [event for event in events if event.users]
        appends = [event.to_append() for event in stored]
        if len(appends) == 1:
            [one] = appends
            written = [
                await events_store.append_events(
                    tx.conn, user_ids=one.user_ids, type=one.type, data=one.data, notice=one.notice
                )
            ]
        else:
            written = await events_store.append_event_batch(tx.conn, appends) if appends else []
        rows = iter(written)
        for event in events:
            if event.users:
                sender, message_id = _delivery_of(event.type, event.data)
                # one encoding of the event for all its users; each user's frame differs only
                # in its offset, and is shared by that user's devices
                encoding = EventEncoding(event.type, event.text)
                frames = [
                    (uid, encoding.frame(seq, message_id if uid != sender else None))
                    for uid, seq in next(rows)
                ]
                tx.call_after(functools.partial(self.bus.publish, frames))
            if event.conversation_id is not None:
                body = f'{{"type":{json.dumps(event.type)},"data":{event.text}}}'
                tx.call_after(
                    functools.partial(self.bus.publish_conversation, event.conversation_id, body)
                )

    async def append_series(
        self, tx: Transaction, user_id: str, event_type: str, items: list[Any]
    ) -> None:
        """Append several durable events of one type to one user's stream in ``tx``, in one
        statement, in order (what as many :meth:`append` calls for that user alone would
        write); publish them after commit. For events that queue no notification (not
        ``message.created``). Raises ValueError for an ephemeral type or
        ``message.created``."""
        if event_type in EPHEMERAL_TYPES or event_type == "message.created":
            raise ValueError(f"{event_type} cannot be appended as a series")
        if not items:
            return
        texts = [_json(data) for data in items]

        async def write() -> None:
            offsets = await events_store.append_series(
                tx.conn, user_id=user_id, type=event_type, data=texts
            )
            frames = [
                (user_id, event_frame(event_type, seq, text))
                for seq, text in zip(offsets, texts, strict=True)
            ]
            tx.call_after(functools.partial(self.bus.publish, frames))

        if tx.events_at_commit:
            tx.remember(_AT_COMMIT, None)  # written after the single events appended before
            tx.call_before_commit(write)
        else:
            await write()

    async def emit_ephemeral(self, user_ids: Iterable[str], event_type: str, data: Any) -> None:
        """Publish an event that is not stored (typing, presence, message.delta): no offset,
        droppable, so it needs no transaction."""
        frame = ephemeral_frame(event_type, data)
        await self.bus.publish([(uid, frame) for uid in set(user_ids)])

    def note_delivered(self, message_id: str) -> None:
        """A device received ``message_id``: set its ``delivered_at`` soon (batched)."""
        self._delivered.add(message_id)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_delivered())

    async def _flush_delivered(self) -> None:
        await asyncio.sleep(DELIVERED_FLUSH_SECONDS)
        ids, self._delivered = sorted(self._delivered), set()
        if not ids or self._pool is None:
            return
        try:
            async with self._pool.acquire() as conn:
                await change_store.mark_delivered(conn, message_ids=ids)
        except (asyncpg.PostgresError, OSError):
            log.warning("could not record delivery of %d messages", len(ids), exc_info=True)

    # -- reading -----------------------------------------------------------------------

    async def head(self, user_id: str) -> events_store.StreamHead:
        """The user's stream epoch and last offset (creating the stream if needed)."""
        assert self._pool is not None, "the hub needs a pool for durable streams"
        async with self._pool.acquire() as conn:
            return await events_store.get_stream_head(conn, user_id=user_id)

    async def replay(self, user_id: str, *, after: int, upto: int, limit: int) -> list[Frame]:
        """Stored frames with ``after < offset <= upto``, oldest first (at most ``limit``)."""
        assert self._pool is not None, "the hub needs a pool for durable streams"
        async with self._pool.acquire() as conn:
            rows = await events_store.list_events(
                conn, user_id=user_id, after=after, upto=upto, limit=limit
            )
        return [event_frame(r.type, r.seq, r.data) for r in rows]
