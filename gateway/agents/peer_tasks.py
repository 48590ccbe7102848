"""Agent tasks started by peers, and the owner's ``privacy.allow_offline_response``
(docs/agents.md).

When a peer's message to a local agent is delivered (policy allow, or the owner's consent), the
agent answers it: :func:`enqueue_for_peer` queues a task for that conversation in the same
transaction. If the owner is offline — no device connected to any gateway process (the
presence set of the hub's ephemeral store: memory, or Redis ``presence:{user_id}`` shared by
the processes) — and has not allowed offline answers, the task is stored as ``waiting``
instead and the peer's A2A task stays interrupted (``TASK_STATE_AUTH_REQUIRED`` with
``metadata.confer.waitingFor = "owner"``, A2A 1.0 §4.5); :func:`release_waiting` queues the
agent task and completes those A2A tasks when the owner's next device connects, so the owner
is back before the agent answers. Both announce the tasks they queue on the task queue in
their unit of work (:meth:`gateway.agents.queue.TaskQueue.announce`). The runtime sends the
agent's answer to the conversation's peers through the outbox
(:func:`gateway.services.outbound.queue_for_peers`).
"""

from __future__ import annotations

import asyncpg

from a2a.protocol import agent_text_message
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.ids import new_id
from gateway.realtime.hub import EventHub
from gateway.services.tasks import TaskEvents, record_update
from gateway.store import agent_tasks as tasks_store
from gateway.store import tasks as a2a_store
from gateway.store import users as users_store
from gateway.store.tasks import TaskRow

WAITING = "waiting"


async def enqueue_for_peer(
    tx: Transaction,
    hub: EventHub,
    queue: TaskQueue,
    *,
    agent_id: str,
    owner_id: str,
    conversation_id: str,
    message_id: str,
    owner_present: bool = False,
) -> tuple[str, str]:
    """Queue the agent's answer to a delivered peer message (inside the delivering transaction).

    Returns ``(task id, status)``: ``queued`` when the owner is online (``owner_present``: the
    owner is acting right now, e.g. deciding consent) or allows offline answers, else
    ``waiting`` (one waiting task per conversation, re-pointed at the newest message). A
    queued task is announced on ``queue`` in ``tx``; a waiting one only when released.
    """
    conn = tx.conn
    online = (
        owner_present
        or hub.connections(owner_id) > 0
        or await hub.ephemeral.user_online(owner_id)  # a device on another process
    )
    if online or await users_store.get_allow_offline_response(conn, user_id=owner_id):
        task_id = await tasks_store.enqueue(
            conn, agent_id=agent_id, conversation_id=conversation_id, trigger_message_id=message_id
        )
        await queue.announce(tx, tasks_store.Dispatch(agent_id, task_id, conversation_id))
        return task_id, "queued"
    task_id = await tasks_store.insert_waiting(
        conn, agent_id=agent_id, conversation_id=conversation_id, trigger_message_id=message_id
    )
    return task_id, WAITING


async def release_waiting(
    pool: asyncpg.Pool,
    clock: Clock,
    queue: TaskQueue,
    owner_id: str,
    task_events: TaskEvents | None = None,
) -> int:
    """Queue the owner's waiting tasks (the owner is back); returns how many were queued.

    The peers' A2A tasks held for the owner move from ``TASK_STATE_AUTH_REQUIRED`` to
    ``TASK_STATE_COMPLETED`` ("delivered; the agent is answering") and are published on
    ``task_events`` after commit; the released tasks are announced on ``queue``. A waiting
    task whose conversation already has a queued one (started later, while the owner was
    online, so for a newer message) is marked ``failed`` as superseded, never lost silently.
    """
    async with transaction(pool) as tx:
        conn = tx.conn
        held = await a2a_store.list_held_for_owner(conn, user_id=owner_id)
        settled = [await _complete_held(conn, row, clock) for row in held]
        await tasks_store.fail_superseded_waiting(conn, owner_id=owner_id, now=clock.now())
        released = await tasks_store.release_waiting(conn, owner_id=owner_id)
        for dispatch in released:
            await queue.announce(tx, dispatch)
        for row in settled:
            await record_update(tx, row, task_events)
    return len(released)


async def release_present_owners(
    pool: asyncpg.Pool,
    clock: Clock,
    hub: EventHub,
    queue: TaskQueue,
    task_events: TaskEvents | None = None,
) -> int:
    """Release the waiting tasks of owners who are online now; returns how many were queued.

    Closes the race where a peer's request is held in the instant its owner connects (the
    owner looked offline to the request, and the connect-time release ran before the held
    task committed). Run periodically by the consent sweeper.
    """
    async with pool.acquire() as conn:
        owners = await tasks_store.list_owners_with_waiting(conn)
    released = 0
    for owner in owners:
        if hub.connections(owner) > 0 or await hub.ephemeral.user_online(owner):
            released += await release_waiting(pool, clock, queue, owner, task_events)
    return released


async def _complete_held(conn: asyncpg.Connection, row: TaskRow, clock: Clock) -> TaskRow:
    status = agent_text_message(
        "Delivered: the owner is back and the agent is answering.",
        message_id=new_id(),
        context_id=row.context_id,
        task_id=row.id,
        data={"status": "completed", "messageId": row.message_id},
    )
    done = await a2a_store.update_task_state(
        conn,
        id=row.id,
        # an API-key caller's result is the agent's answer, which completes the task
        state="TASK_STATE_WORKING" if row.caller.startswith("key:") else "TASK_STATE_COMPLETED",
        status_message=status,
        now=clock.now(),
        from_states=("TASK_STATE_AUTH_REQUIRED",),
    )
    assert done is not None, "the held task left AUTH_REQUIRED under our lock"
    return done
