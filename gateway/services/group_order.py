"""One order for a group on every instance: a replica shows the group in its home's order.

A group's home orders its messages: at the home a message's id is its place (ids follow commit
order within a conversation). A replica stores every message under an id of its own, in the
order messages reach it, which is the home's order for what the home sends it but not for its
own members' posts: a post written on the replica is stored at once, while the home may order
it after a concurrent post from elsewhere that reaches the replica later. So a replica keeps
each message's place in the home's order, its ``position`` (``message_positions``, a ULID):

- a message the home sends (its own members' posts and the posts it relays) carries the home's
  id as its A2A ``messageId``: that is its position (:func:`place_received`);
- a post of the replica's own member gets its position from the home's answer, the ``Task``'s
  ``metadata.confer.position`` (:func:`a2a.confer.answered_position`), when the delivery
  worker records the delivery (:func:`place_answered`); until then it stands at its local id,
  where it was written. Its local members' devices get ``message.ordered`` (``{"conversation_id",
  "id", "position"}``) and re-sort it.

A replica lists the group by position (:func:`gateway.store.messages.list_messages`); the
message API shows ``position`` on every message (its id where it has no other). Read positions
and unread counts follow the same order (:func:`gateway.store.messages.after_read`), so a
member's unread count is the same on every instance that holds the same messages.
"""

from __future__ import annotations

import functools
import logging

import asyncpg

from a2a.confer import ConferConversation
from did.errors import InvalidDIDError
from gateway.db import Transaction
from gateway.ids import is_ulid
from gateway.realtime.hub import EventHub
from gateway.services import groups, unread
from gateway.services.did_budget import host_of
from gateway.services.participants import local_user_ids
from gateway.store import groups as groups_store
from gateway.store import message_changes as change_store
from gateway.store import messages as messages_store
from models import Message
from models.base import wire_timestamp

log = logging.getLogger(__name__)

MESSAGE_ORDERED = "message.ordered"
MESSAGE_DELETED = "message.deleted"
"""Stream event: the home placed a local member's post in the group's order (``{"conversation_id",
"id", "position"}``); a client moves the message to ``position``."""


async def place_received(
    conn: asyncpg.Connection,
    recipient_did: str,
    claim: ConferConversation | None,
    remote_id: str,
    message: Message,
) -> Message:
    """At a replica, record the position of a group message just stored from its home: the
    home's id of it (``remote_id``, the A2A ``messageId``, a ULID); returns ``message`` with
    that position. ``claim`` is the group the message claims (``metadata.confer.conversation``)
    and ``recipient_did`` the local user or agent it was delivered to.

    ``message`` unchanged when it claims no group, the group is homed here (the home's id is
    the position), or ``remote_id`` is no ULID (it stays where it arrived)."""
    if claim is None or claim.home == groups.instance_did(recipient_did) or not is_ulid(remote_id):
        return message
    await messages_store.place_message(
        conn, message_id=message.id, conversation_id=message.conversation_id, position=remote_id
    )
    return message.model_copy(update={"position": remote_id})


def position_for_answer(
    recipient_did: str, claim: ConferConversation | None, message: Message
) -> str | None:
    """The position a group's home tells the post's author instance in its answer: the stored
    ``message``'s id when the group it claims (``claim``) is homed here, else None."""
    if claim is None or claim.home != groups.instance_did(recipient_did):
        return None
    return message.id


async def place_answered(
    tx: Transaction, hub: EventHub | None, *, message_id: str, destination: str, position: str
) -> bool:
    """Record the home's ``position`` of our post ``message_id``, from the home's answer to it,
    and tell the replica's local members (``message.ordered``, committed with it; not
    without a ``hub``).

    Nothing changes (False) unless the message is in a replica of a group whose home is
    ``destination`` (the answering peer's ``host[:port]``), ``position`` is a ULID, and the
    message has no position yet. Never raises for a peer's strange answer."""
    if not is_ulid(position):
        log.warning("the group home at %s answered with a position that is no ULID", destination)
        return False
    conn = tx.conn
    message = await _post_to_home(conn, message_id, destination)
    if message is None:
        return False
    placed = await messages_store.place_message(
        conn, message_id=message_id, conversation_id=message.conversation_id, position=position
    )
    if placed and hub is not None:
        users = await local_user_ids(conn, message.conversation_id)
        data = {"conversation_id": message.conversation_id, "id": message_id, "position": position}
        await hub.append(tx, users, MESSAGE_ORDERED, data)
        # a read position may now stand on the other side of it: cached counts are stale
        tx.call_after(functools.partial(unread.invalidate, hub.ephemeral, message.conversation_id))
    return placed


async def retract_refused(
    tx: Transaction, hub: EventHub | None, *, message_id: str, destination: str, reason: str
) -> bool:
    """Our member's post ``message_id`` will never be in the group: its delivery to the
    group's home (``destination``, ``host[:port]``) failed for good — the home refused it (the
    author was removed meanwhile, say) or is gone. It is taken out of the replica, so that no
    instance shows a message the home's order does not have: soft-deleted, its stream events
    scrubbed, and ``message.deleted`` with ``reason`` ``refused_by_home`` and the delivery's
    ``detail`` sent to the replica's local members (the author's devices also get the failed
    ``message.delivery_updated``). False, and nothing changed, unless the message is a
    visible post in a replica whose home is ``destination``."""
    conn = tx.conn
    message = await _post_to_home(conn, message_id, destination)
    if message is None:
        return False
    deleted_at = await change_store.soft_delete(conn, message_id=message_id)
    tombstone = {
        "id": message_id,
        "conversation_id": message.conversation_id,
        "deleted_at": wire_timestamp(deleted_at),
        "reason": "refused_by_home",
        "detail": reason[:500],
    }
    users = await local_user_ids(conn, message.conversation_id)
    if message.sender_type == "user" and message.sender_id not in users:
        # the home refused the post because it had removed its author, whose removal reached
        # this replica first: the author is told too (besides the failed delivery)
        users = [*users, message.sender_id]
    await change_store.scrub_events(
        conn, user_ids=users, message_id=message_id, tombstone=tombstone
    )
    if hub is not None:
        tx.call_after(functools.partial(unread.invalidate, hub.ephemeral, message.conversation_id))
        await hub.append(tx, users, MESSAGE_DELETED, tombstone)
    log.info("post %s refused by the home at %s: taken out of the replica", message_id, destination)
    return True


async def _post_to_home(
    conn: asyncpg.Connection, message_id: str, destination: str
) -> Message | None:
    """The visible message ``message_id`` when it is in a replica whose group's home is
    ``destination`` (an outbox row's ``host[:port]``): our member's post to that home; else
    None."""
    message = await messages_store.get_message(conn, id=message_id)
    if message is None:
        return None
    replica = await groups_store.get_replica(conn, conversation_id=message.conversation_id)
    if replica is None or not _is_host_of(destination, replica.home):
        return None
    return message


def _is_host_of(destination: str, instance_did: str) -> bool:
    """True when ``destination`` (an outbox row's ``host[:port]``) is ``instance_did``'s."""
    try:
        return destination == host_of(instance_did)
    except InvalidDIDError:
        return False
