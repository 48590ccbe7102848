"""Federated edits and deletes: a changed message follows the original to every peer.

Outbound (in the edit/delete transaction, :func:`gateway.services.outbound.queue_for_peers` with
a :class:`~gateway.services.outbound.Change`): one outbox row per peer the original was sent to,
an A2A ``SendMessage`` whose message has a fresh ``messageId`` and carries
``metadata.confer.edit = {"messageId": <original>, "version": <new version>}`` (the new text in
its parts) or ``metadata.confer.delete = {"messageId": <original>}``. The durable outbox keeps
order per destination and conversation, so a change never overtakes the original.

Inbound: the stored copy is found through the inbox row of (signing DID, original
``messageId``), so only the original sender can change it. Applying is idempotent: an edit whose
version is not above the stored one, or any change to a deleted message, changes nothing. An
edit keeps the previous version and emits ``message.edited``; a delete erases the content
everywhere (row, versions, stream events, the file fetched for it) and emits the
``message.deleted`` tombstone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from pydantic import ValidationError

from a2a.confer import ConferChange, ConferConversation, ConferMetadata
from a2a.protocol import InvalidParamsError, SendMessageParams, agent_text_message
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import ValidationFailedError
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services import groups, unread
from gateway.services.attachments import discard_message_files
from gateway.services.callers import A2ACaller
from gateway.services.content import validate_message
from gateway.services.outbound import Change, queue_for_peers
from gateway.services.tasks import (
    Recipient,
    TaskEvents,
    held_for_owner,
    record_update,
    withdraw_agent_answer,
)
from gateway.storage import AttachmentStorage
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import federated_changes as store
from gateway.store import federation as federation_store
from gateway.store import groups as groups_store
from gateway.store import message_changes as change_store
from gateway.store import messages as messages_store
from gateway.store import permissions as permissions_store
from gateway.store import tasks as tasks_store
from gateway.store.tasks import TaskRow
from models import Message
from models.api import MessageCreate
from models.base import wire_timestamp

MESSAGE_EDITED = "message.edited"
MESSAGE_DELETED = "message.deleted"


@dataclass
class _Applied:
    """What one change did (its events are appended in the change's own transaction)."""

    changed: int = 0
    task: TaskRow | None = None
    message_id: str | None = None
    held_task_id: str | None = None

    @property
    def applied(self) -> bool:
        return bool(self.changed or self.task or self.held_task_id)


async def apply_change(
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    text: str,
    *,
    pool: asyncpg.Pool,
    hub: EventHub,
    clock: Clock,
    task_events: TaskEvents,
    storage: AttachmentStorage,
    content_json: Any = None,
) -> dict[str, Any]:
    """Apply a peer's edit or delete to the stored copy — or to its message still held for the
    owner's consent (an edit replaces the held text; a delete withdraws the request and erases
    the text). Returns the ``SendMessage`` result (``{"message": …}``).

    One unit of work: the change, its ``message.edited`` / ``message.deleted`` stream events
    (``hub``) and the audit row commit together; the canceled task reaches ``task_events``
    after commit, and a deleted copy's fetched file leaves ``storage``. An edit carries the
    new ``text`` and ``content_json`` (its data part; a text-less message's edit has only
    that), checked by the local rules for the message's content type. Raises
    InvalidParamsError for API-key callers (changes travel between instances only) and for
    an edit a local client could not make.
    """
    found = ConferMetadata.of(params.message.metadata).change()
    assert found is not None
    kind, change = found
    if caller.peer is None:
        raise InvalidParamsError("Invalid params: edits and deletes travel between instances")
    now = clock.now()
    async with transaction(pool) as tx:
        conn = tx.conn
        done = _Applied()
        message = await _own_copy(conn, caller, recipient, change.messageId)
        if message is not None:
            done.message_id = message.id
            if kind == "edit":
                done.changed += await _edit(tx, hub, message, text, change.version, content_json)
            else:
                done.changed += await _delete(tx, hub, message, storage)
                done.task = await _withdraw_held(conn, now, message.id) or done.task
        else:
            remote_id = change.messageId
            await _change_held(
                tx, hub, storage, now, caller, recipient, kind, remote_id, text, done
            )
        if done.changed and message is not None:
            edited = (text, content_json) if kind == "edit" else None
            await _relay(conn, recipient, message, edited, change)
        await _audit(conn, caller, kind, change.messageId, done)
        if done.task is not None:
            await record_update(tx, done.task, task_events)
    answer = f"{kind.capitalize()} applied." if done.applied else "Nothing to change."
    reply = agent_text_message(
        answer,
        message_id=new_id(),
        context_id=params.message.contextId or new_id(),
        task_id=new_id(),
        data={"applied": done.applied, "messageId": change.messageId},
    )
    return {"message": reply}


async def _relay(
    conn: asyncpg.Connection,
    recipient: Recipient,
    message: Message,
    edited: tuple[str, Any] | None,
    change: ConferChange,
) -> None:
    """A remote member changed its post in a group homed here: the home relays the change to
    the instances it relayed the post to (:mod:`gateway.services.outbound`, ``Change``)."""
    kind = await groups_store.get_conversation_kind(conn, conversation_id=message.conversation_id)
    if kind is None or kind[0] != "group" or message.sender_did is None:
        return
    if await groups_store.get_replica(conn, conversation_id=message.conversation_id):
        return
    home = groups.instance_did(recipient.did)
    group = ConferConversation(id=message.conversation_id, home=home)
    conversation_id = message.conversation_id
    if edited is None:
        relayed = Change(message.id, conversation_id, author=message.sender_did, group=group)
    else:
        text, data = edited
        relayed = Change(
            message.id, conversation_id, change.version, text, message.sender_did, group, data
        )
    await queue_for_peers(conn, relayed)


async def _audit(
    conn: asyncpg.Connection, caller: A2ACaller, kind: str, remote_id: str, done: _Applied
) -> None:
    await audit_store.insert_audit(
        conn,
        action="federation.inbound",
        details={
            "method": f"SendMessage/{kind}",
            "caller": caller.ref,
            "remote_message_id": remote_id,
            "message_id": done.message_id,
            "task_id": done.task.id if done.task else done.held_task_id,
            "applied": done.applied,
        },
    )


async def _change_held(
    tx: Transaction,
    hub: EventHub,
    storage: AttachmentStorage,
    now: datetime,
    caller: A2ACaller,
    recipient: Recipient,
    kind: str,
    remote_id: str,
    text: str,
    done: _Applied,
) -> None:
    """Edit or withdraw the caller's message ``remote_id`` while it waits for consent."""
    conn = tx.conn
    task = await tasks_store.get_task_by_remote(
        conn,
        caller=caller.ref,
        remote_message_id=remote_id,
        user_id=recipient.user_id,
        agent_id=recipient.agent_id,
    )
    if task is None or task.state != "TASK_STATE_AUTH_REQUIRED" or not task.permission_id:
        return
    if kind == "edit":
        await store.replace_held_text(
            conn,
            task_id=task.id,
            permission_id=task.permission_id,
            owner_id=task.user_id,
            text=text,
        )
        done.held_task_id = task.id
        return
    status = agent_text_message(
        "Withdrawn: the sender deleted the message.",
        message_id=new_id(),
        context_id=task.context_id,
        task_id=task.id,
    )
    done.task = await tasks_store.update_task_state(
        conn,
        id=task.id,
        state="TASK_STATE_CANCELED",
        status_message=status,
        now=now,
        from_states=("TASK_STATE_AUTH_REQUIRED",),
    )
    await permissions_store.decide_permission(
        conn,
        id=task.permission_id,
        decision="deny",
        decision_scope=None,
        decided_by=None,
        now=now,
    )
    notices = await store.erase_held_text(
        conn, task_id=task.id, permission_id=task.permission_id, owner_id=task.user_id
    )
    for notice in notices:
        withdrawn = await messages_store.get_message(conn, id=notice["id"])
        assert withdrawn is not None
        done.changed += await _delete(tx, hub, withdrawn, storage)


async def _withdraw_held(
    conn: asyncpg.Connection, now: datetime, message_id: str
) -> TaskRow | None:
    """The sender deleted a message whose answer waited for the offline owner: its task is
    canceled and the agent answers the other held requests, or none."""
    task = await tasks_store.get_task_by_message(conn, message_id=message_id)
    if task is None or not held_for_owner(task):
        return None
    status = agent_text_message(
        "Withdrawn: the sender deleted the message.",
        message_id=new_id(),
        context_id=task.context_id,
        task_id=task.id,
    )
    canceled = await tasks_store.update_task_state(
        conn,
        id=task.id,
        state="TASK_STATE_CANCELED",
        status_message=status,
        now=now,
        from_states=("TASK_STATE_AUTH_REQUIRED",),
    )
    await withdraw_agent_answer(conn, now, task)
    return canceled


async def _own_copy(
    conn: asyncpg.Connection, caller: A2ACaller, recipient: Recipient, remote_id: str
) -> Message | None:
    """Our copy, for ``recipient``, of the caller's message ``remote_id``, row-locked; None if
    we have none (each recipient of a group message has its own copy and gets the change)."""
    assert caller.peer is not None
    local_id = await federation_store.get_inbox(
        conn, origin_did=caller.origin, remote_message_id=remote_id, recipient_did=recipient.did
    )
    message = await messages_store.get_message(conn, id=local_id) if local_id else None
    if message is None or message.sender_did != caller.peer.peer.did:
        return None
    row = await change_store.lock_message(
        conn, conversation_id=message.conversation_id, message_id=message.id
    )
    return message if row is not None and row["deleted_at"] is None else None


async def _local_users(conn: asyncpg.Connection, conversation_id: str) -> list[str]:
    rows = await conv_store.list_participants(conn, conversation_id=conversation_id)
    return [r["user_id"] for r in rows if r["user_id"]]


async def _edit(
    tx: Transaction,
    hub: EventHub,
    message: Message,
    text: str,
    version: Any,
    content_json: Any = None,
) -> int:
    """Store the new version and announce it; 1 if it changed the copy, else 0. Raises
    InvalidParamsError when the new content does not fit the message's content type."""
    conn = tx.conn
    current = await change_store.current_version(conn, message_id=message.id)
    if not isinstance(version, int) or version <= current:
        return 0  # a retry, or a change we already hold
    try:
        candidate = MessageCreate(
            content=text or None, content_type=message.content_type, content_json=content_json
        )
        # the stored citations, as stored (an edit changes the content only)
        validate_message(candidate.model_copy(update={"citations": message.citations}))
    except (ValidationFailedError, ValidationError) as exc:
        raise InvalidParamsError(f"Invalid params: the edit does not fit: {exc}"[:500]) from exc
    row = await change_store.lock_message(
        conn, conversation_id=message.conversation_id, message_id=message.id
    )
    assert row is not None
    await change_store.insert_version(
        conn,
        message_id=message.id,
        version=current,
        content=row["content"],
        content_json=row["content_json"],
        created_at=row["updated_at"],
    )
    edited = await change_store.update_content(
        conn, message_id=message.id, content=text or None, content_json=content_json
    )
    body = {**edited.model_dump(mode="json"), "version": current + 1}
    users = await _local_users(conn, message.conversation_id)
    await hub.append(tx, users, MESSAGE_EDITED, body)
    return 1


async def _delete(
    tx: Transaction, hub: EventHub, message: Message, storage: AttachmentStorage
) -> int:
    """Erase the copy everywhere, its fetched file included, and announce the tombstone (after
    the cached unread counts of its conversation are dropped); returns 1."""
    conn = tx.conn
    deleted_at = await change_store.soft_delete(conn, message_id=message.id)
    await discard_message_files(tx, storage, message_id=message.id)
    tombstone = {
        "id": message.id,
        "conversation_id": message.conversation_id,
        "deleted_at": wire_timestamp(deleted_at),
    }
    users = await _local_users(conn, message.conversation_id)
    await change_store.scrub_events(
        conn, user_ids=users, message_id=message.id, tombstone=tombstone
    )
    tx.call_after(functools.partial(unread.invalidate, hub.ephemeral, message.conversation_id))
    await hub.append(tx, users, MESSAGE_DELETED, tombstone)
    return 1
