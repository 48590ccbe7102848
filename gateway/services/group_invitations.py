"""Deciding an invitation into a group homed on another instance (docs/federation.md,
"Consent to a group's home").

A group's home that lists a local user who does not know it gets them held apart as a
message request in the group's replica (:mod:`gateway.services.message_requests`,
:func:`gateway.services.groups.apply_home_state`): no participant row, nothing of the group
reaches them. The user decides it where they decide any request (``POST
/v1/message-requests/{id}/accept`` and ``…/decline``):

- **Accept**: the request is accepted, whoever invited them (or, when that was not one of
  the home's own, the home instance itself) becomes a contact, so the user knows the home
  from now on, and the replica takes the home's latest state it holds (member list and
  roles, :class:`gateway.store.groups.ReplicaRow`) once more: the user joins it with the
  role the home gave them, and reads the messages kept for them meanwhile (the group's
  messages and the history its home sent, :mod:`gateway.services.group_history`), which are
  not unread for them: what came before they joined is history, as at the home.
- **Decline** (``block``: and block the home instance): first the home is told, as any
  member's leave of a replica is (:meth:`gateway.services.group_home.HomeLink.forward`,
  signed by the user), so its member list is truthful; its answer is taken, and with the
  user no longer listed their request is forgotten. A home that cannot be reached makes a
  plain decline a 502 ``group_home_unreachable`` with nothing changed (try again); a decline
  that blocks is made anyway (the blocked home adds them to nothing). A home that refuses
  the leave (it no longer lists them, say) has answered: the decline stands.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal

from a2a.confer import ConferConversation, ConferMembership
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import ConferError, ConversationNotFoundError, GroupHomeUnreachableError
from gateway.services import groups, message_requests, participants
from gateway.services.participants import GroupDeps
from gateway.store import conversations as conv_store
from gateway.store import group_history as history_store
from gateway.store import groups as groups_store
from gateway.store import message_requests as requests_store
from gateway.store import peers as peers_store
from gateway.store.groups import ReplicaRow
from gateway.store.message_requests import MessageRequestRow, RequestListing
from models import User

log = logging.getLogger(__name__)


async def decide(
    deps: GroupDeps,
    clock: Clock,
    user: User,
    conversation_id: str,
    decision: Literal["accepted", "declined"],
    block: bool = False,
) -> RequestListing:
    """Decide the user's request in ``conversation_id``: an invitation into a group's replica
    as the module docstring says, any other request as
    :func:`gateway.services.message_requests.decide` does. Returns the request decided, with
    its kind (and the group's name).

    Raises ConversationNotFoundError (404) when the user has no request there, and
    GroupHomeUnreachableError (502) when a plain decline cannot reach the group's home."""
    async with deps.pool.acquire() as conn:
        replica = await groups_store.get_replica(conn, conversation_id=conversation_id)
    if replica is None:
        row = await message_requests.decide(
            deps.pool,
            deps.hub,
            clock,
            user_id=user.id,
            conversation_id=conversation_id,
            decision=decision,
            block=block,
        )
        return RequestListing(row, "direct")
    if decision == "accepted":
        row = await _accept(deps, clock, user, replica)
    else:
        row = await _decline(deps, clock, user, replica, block)
    async with deps.pool.acquire() as conn:
        kind = await groups_store.get_conversation_kind(conn, conversation_id=conversation_id)
    return RequestListing(row, "group", kind[1] if kind else None, replica.home)


async def _accept(
    deps: GroupDeps, clock: Clock, user: User, replica: ReplicaRow
) -> MessageRequestRow:
    async with transaction(deps.pool) as tx:
        conn = tx.conn
        # serialised with the home's events, so the state taken is the latest one held
        await conv_store.lock_direct_pair(conn, f"replica:{replica.home}:{replica.remote_id}")
        held = await groups_store.get_replica(conn, conversation_id=replica.conversation_id)
        row = await requests_store.decide(
            conn,
            conversation_id=replica.conversation_id,
            user_id=user.id,
            state="accepted",
            now=clock.now(),
        )
        if row is None or held is None:
            raise ConversationNotFoundError("no message request in that conversation")
        inviter = row.sender_did
        known = inviter if inviter.startswith(held.home + ":") else held.home
        await requests_store.mark_contact(conn, user_id=user.id, did=known)
        home = await peers_store.get_peer_by_did(conn, did=held.home)
        state = ConferConversation(
            id=held.remote_id, home=held.home, members=held.members, roles=held.roles
        )
        applied = await groups.apply_home_state(
            conn,
            deps.identity.did,
            state,
            home.id if home is not None else None,
            requests_default=deps.requests_default,
        )
        joined = await conv_store.get_membership(
            conn, conversation_id=held.conversation_id, user_id=user.id
        )
        if joined is not None:  # what came before they joined is history, as at the home
            await history_store.start_read(
                conn, participant_id=joined.id, conversation_id=held.conversation_id
            )
        await participants.announce_applied(tx, deps.hub, applied, held.home)
        await _decided(tx, deps, row, blocked=False)
    return row


async def _decline(
    deps: GroupDeps, clock: Clock, user: User, replica: ReplicaRow, block: bool
) -> MessageRequestRow:
    async with deps.pool.acquire() as conn:
        existing, _ = await requests_store.get_request_and_preference(
            conn, conversation_id=replica.conversation_id, user_id=user.id, default=True
        )
    if existing is None:
        raise ConversationNotFoundError("no message request in that conversation")
    state: ConferConversation | None = None
    try:
        if deps.home is None:
            raise GroupHomeUnreachableError("this process cannot reach other instances' groups")
        state = await deps.home.forward(user.did, replica, ConferMembership(event="leave"))
    except GroupHomeUnreachableError:
        if not block:
            raise
        log.warning(
            "group %s: %s declined and blocked its home, which was unreachable",
            replica.remote_id,
            user.did,
        )
    except ConferError as exc:  # the home answered: a refusal is its word on its list
        log.info(
            "group %s: the home refused %s's leave: %s", replica.remote_id, user.did, exc.wire_code
        )
    now = clock.now()
    async with transaction(deps.pool) as tx:
        row = await requests_store.decide(
            tx.conn,
            conversation_id=replica.conversation_id,
            user_id=user.id,
            state="declined",
            now=now,
        )
        # None: the home's event for the leave came first, and the request is forgotten
        row = row or dataclasses.replace(existing, state="declined", decided_at=now)
        if block:
            await requests_store.block_sender(tx.conn, user_id=user.id, did=replica.home)
        await _decided(tx, deps, row, blocked=block)
    if state is not None:
        await participants.take_home_state(deps, state)
    return row


async def _decided(
    tx: Transaction, deps: GroupDeps, row: MessageRequestRow, *, blocked: bool
) -> None:
    """``message_request.decided`` to the user's devices, as for any request."""
    data = {"conversation_id": row.conversation_id, "state": row.state, "blocked": blocked}
    await deps.hub.append(
        tx,
        [row.user_id],
        message_requests.REQUEST_DECIDED,
        data,
        conversation_id=row.conversation_id,
    )
