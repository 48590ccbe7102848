"""Message requests: a stranger's first message is held apart until the user accepts it.

A direct conversation that someone else opened, from a sender who is not the user's contact
by the user's own doing (``peer_contacts.added_via`` other than ``inbound``: see
``store.message_requests.knows``), whom the user never wrote to there, and — for a local sender
— who shares no group with the user, becomes a **request** (``message_requests``, ``pending``)
at its first message, when the user's ``preferences.privacy.message_requests`` is on (the
default). While pending (or once declined) the conversation is left out of the user's list and
unread counts and its messages raise no ``message.created`` for the user; the request itself
raises one ``message_request.created`` event. Accepting moves it into the inbox and makes the
sender a contact (``added_via = 'message_request'``); declining keeps it apart. Writing in
the conversation accepts it too (:func:`accept_by_writing`): the sender is no stranger then.

**Group invitations.** A group's home (another instance) that lists a local user in its group
puts them in its replica only when the user knows the home — a contact by their own doing on
that instance (the instance itself, one of its users or agents: :func:`store.knows` with
``instance``), or the user does not want requests. Otherwise the user is held apart
(:func:`hold_invited`): a ``pending`` request in the replica's conversation, whose sender is
who added them (the event's ``by``), and no participant row, so nothing of the group reaches
them; the group's messages for them are kept in the replica, held like a stranger's first
messages, and shown once they accept. Accepting and declining are
:mod:`gateway.services.group_invitations`'.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import asyncpg

from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import ConversationNotFoundError
from gateway.realtime.hub import EventHub
from gateway.store import conversations as conv_store
from gateway.store import message_requests as store
from models import ConversationRow

REQUEST_CREATED = "message_request.created"
REQUEST_DECIDED = "message_request.decided"


async def held_for(
    tx: Transaction,
    hub: EventHub,
    *,
    conversation_id: str,
    user_id: str,
    sender_did: str,
    local_sender: bool,
    message: dict[str, Any],
    default: bool = True,
    conversation: ConversationRow | None = None,
    known: tuple[store.MessageRequestRow | None, bool] | None = None,
) -> bool:
    """Whether this message to ``user_id`` is held as (part of) a request (module docstring);
    opens the request and appends its ``message_request.created`` event at the first one.
    ``default`` applies when the user never set ``privacy.message_requests``
    (``CONFER_MESSAGE_REQUESTS_DEFAULT``); ``conversation``, when the caller holds its row
    and knows ``user_id`` takes part in it, spares reading it again, as ``known`` (the
    user's request and preference, :func:`gateway.store.message_requests.of_participant`,
    read in ``tx``) spares reading those."""
    conn = tx.conn
    existing, wanted = known or await store.get_request_and_preference(
        conn, conversation_id=conversation_id, user_id=user_id, default=default
    )
    if existing is not None:
        return existing.state != "accepted"
    if conversation is None:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user_id
        )
    if not wanted or not await _is_stranger(conn, conversation, user_id, sender_did, local_sender):
        return False
    if await store.insert_request(
        conn, conversation_id=conversation_id, user_id=user_id, sender_did=sender_did
    ):
        data = {"conversation_id": conversation_id, "sender_did": sender_did, "message": message}
        await hub.append(tx, [user_id], REQUEST_CREATED, data, conversation_id=conversation_id)
    return True


async def _is_stranger(
    conn: asyncpg.Connection,
    conversation: ConversationRow | None,
    user_id: str,
    sender_did: str,
    local: bool,
) -> bool:
    """Whether ``sender_did`` is a stranger to ``user_id`` here (the user wants requests)."""
    if conversation is None or conversation.type == "group":
        return False
    # A peer's direct conversation is created by its local member (created_by must be a local
    # user), so only a local conversation's creator tells who started it; a remote one the
    # user started made the peer a contact (added_via 'conversation') and holds their message.
    if local and conversation.created_by == user_id:
        return False
    if await store.knows(conn, user_id=user_id, did=sender_did):
        return False
    if local and await store.shares_group(conn, user_id=user_id, other_did=sender_did):
        return False
    return not await store.has_written(conn, conversation_id=conversation.id, user_id=user_id)


async def hold_invited(
    conn: asyncpg.Connection,
    *,
    conversation_id: str | None,
    newcomers: dict[str, bool],
    home: str,
    default: bool,
) -> tuple[set[str], set[str]]:
    """Of the local users a group's home would add to its replica ``conversation_id`` (None:
    no replica yet) — ``newcomers``, user id → whether the home's state lists them anew —
    those held apart (module docstring) and, among them, those whose invitation opens now.

    An accepted invitation lets the user in; a pending one keeps them out; a declined one
    keeps them out until the home lists them anew (it invites them again: the request opens
    again). Without one, a user who wants requests (``default`` when they never said) and
    does not know ``home`` (the home's instance DID) is invited."""
    existing = (
        await store.list_group_requests(conn, conversation_id=conversation_id)
        if conversation_id is not None
        else {}
    )
    held: set[str] = set()
    opened: set[str] = set()
    for user_id, anew in newcomers.items():
        state = existing.get(user_id)
        if state == "accepted":
            continue
        if state is None:
            wanted = await store.wants_requests(conn, user_id=user_id, default=default)
            if not wanted or await store.knows(conn, user_id=user_id, did=home, instance=True):
                continue
        held.add(user_id)
        if state is None or (state == "declined" and anew):
            opened.add(user_id)
    return held, opened


async def admission_by_message(
    conn: asyncpg.Connection, *, conversation_id: str, user_id: str, home: str
) -> Literal["joins", "held", "refused"]:
    """Whether a group message for ``user_id`` that reaches the replica ``conversation_id``
    of a group homed at ``home`` may make them a member there (:func:`gateway.services.groups
    .group_conversation`): ``joins`` when they take part already, accepted the invitation or
    know the home; ``held`` while their invitation is pending or declined (the message is
    kept in the replica, shown if they accept); ``refused`` otherwise — a home announces its
    members with a membership event, which asks them first; a message is no way in."""
    if await conv_store.get_membership(conn, conversation_id=conversation_id, user_id=user_id):
        return "joins"
    existing, _ = await store.get_request_and_preference(
        conn, conversation_id=conversation_id, user_id=user_id, default=True
    )
    if existing is not None:
        return "joins" if existing.state == "accepted" else "held"
    known = await store.knows(conn, user_id=user_id, did=home, instance=True)
    return "joins" if known else "refused"


async def open_invitations(
    tx: Transaction,
    hub: EventHub,
    *,
    conversation_id: str,
    user_ids: set[str],
    sender_did: str,
    group_name: str | None,
    group_home: str,
) -> None:
    """Record the group invitations of ``user_ids`` (:func:`hold_invited`) and raise their
    ``message_request.created`` event: ``{conversation_id, sender_did, kind: "group",
    group_name, group_home, message: null}`` (an invitation has no first message)."""
    for user_id in sorted(user_ids):
        await store.open_group_request(
            tx.conn, conversation_id=conversation_id, user_id=user_id, sender_did=sender_did
        )
    data = {
        "conversation_id": conversation_id,
        "sender_did": sender_did,
        "kind": "group",
        "group_name": group_name,
        "group_home": group_home,
        "message": None,
    }
    await hub.append(tx, sorted(user_ids), REQUEST_CREATED, data, conversation_id=conversation_id)


async def withdraw_invitations(
    tx: Transaction, hub: EventHub, *, conversation_id: str, listed: set[str]
) -> None:
    """Forget the requests in the group replica ``conversation_id`` of local users its home
    no longer lists (``listed``: those it does): a pending invitation is withdrawn
    (``message_request.decided`` with state ``withdrawn``), a decided one is done with."""
    existing = await store.list_group_requests(tx.conn, conversation_id=conversation_id)
    gone = [u for u in existing if u not in listed]
    if not gone:
        return
    await store.delete_requests(tx.conn, conversation_id=conversation_id, user_ids=gone)
    pending = [u for u in gone if existing[u] == "pending"]
    if pending:
        data = {"conversation_id": conversation_id, "state": "withdrawn", "blocked": False}
        await hub.append(tx, pending, REQUEST_DECIDED, data, conversation_id=conversation_id)


async def list_pending(pool: asyncpg.Pool, *, user_id: str, limit: int) -> list[dict[str, Any]]:
    """The user's pending requests, newest first: conversation, sender (and the name its
    instance gives it) and when; a group invitation (``kind`` ``group``) also names the
    group and its home, a stranger's first message is ``direct``."""
    async with pool.acquire() as conn:
        listings = await store.list_requests(conn, user_id=user_id, state="pending", limit=limit)
    return [
        {
            "conversation_id": r.row.conversation_id,
            "sender_did": r.row.sender_did,
            "sender_name": r.sender_name,
            "state": r.row.state,
            "created_at": r.row.created_at,
            "kind": r.kind,
            "group_name": r.group_name,
            "group_home": r.group_home,
        }
        for r in listings
    ]


async def decide(
    pool: asyncpg.Pool,
    hub: EventHub,
    clock: Clock,
    *,
    user_id: str,
    conversation_id: str,
    decision: Literal["accepted", "declined"],
    block: bool = False,
) -> store.MessageRequestRow:
    """Accept (the conversation joins the inbox, the sender becomes a contact) or decline the
    request — with ``block``, the sender is also marked blocked in the user's contacts, so
    the federation door refuses it; ``message_request.decided`` reaches the user's devices.
    Raises ConversationNotFoundError when the user has no request there."""
    async with transaction(pool) as tx:
        row = await store.decide(
            tx.conn,
            conversation_id=conversation_id,
            user_id=user_id,
            state=decision,
            now=clock.now(),
        )
        if row is None:
            raise ConversationNotFoundError("no message request in that conversation")
        if decision == "accepted":
            await store.mark_contact(tx.conn, user_id=user_id, did=row.sender_did)
        elif block:
            await store.block_sender(tx.conn, user_id=user_id, did=row.sender_did)
        data = {"conversation_id": conversation_id, "state": decision, "blocked": block}
        await hub.append(tx, [user_id], REQUEST_DECIDED, data, conversation_id=conversation_id)
    return row


async def accept_by_writing(
    tx: Transaction,
    hub: EventHub,
    *,
    user_id: str,
    conversation_id: str,
    state: str | None,
    now: datetime,
) -> None:
    """The user wrote in a direct conversation where they have a request (``state``, the
    request's, None when there is none): the sender is no stranger any more — one is someone
    "to whom the user never wrote there" (module docstring) — so a ``pending`` or ``declined``
    request is accepted as :func:`decide` accepts it: the conversation joins the inbox, the
    sender becomes a contact and ``message_request.decided`` reaches the user's devices. In
    the poster's unit of work ``tx``; ``now`` is when they wrote."""
    if state not in ("pending", "declined"):
        return
    row = await store.decide(
        tx.conn, conversation_id=conversation_id, user_id=user_id, state="accepted", now=now
    )
    if row is None:
        return
    await store.mark_contact(tx.conn, user_id=user_id, did=row.sender_did)
    data = {"conversation_id": conversation_id, "state": "accepted", "blocked": False}
    await hub.append(tx, [user_id], REQUEST_DECIDED, data, conversation_id=conversation_id)


async def held_conversations(conn: asyncpg.Connection, *, user_id: str) -> dict[str, str]:
    """``{conversation_id: "pending" | "declined"}`` of the user's held conversations."""
    return await store.held_conversations(conn, user_id=user_id)
