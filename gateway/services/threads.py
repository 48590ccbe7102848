"""The threads archive: mark a thread (title, summary, tags), update it, close it, list.

Any participant who may post can archive or update a thread of the conversation; observers
and outsiders cannot (403 / 404). One archive entry per root message (409 otherwise).
"""

from __future__ import annotations

import asyncpg

from gateway.errors import MessageNotFoundError, ThreadExistsError, ThreadNotFoundError
from gateway.services.content import check_text
from gateway.services.conversations import check_can_post
from gateway.services.participants import require_membership
from gateway.store import conversations as conv_store
from gateway.store import messages as messages_store
from gateway.store import threads as threads_store
from models import ThreadRow, User
from models.api import ThreadCreate, ThreadUpdate


def _check_texts(data: ThreadCreate | ThreadUpdate) -> None:
    for name in ("title", "summary"):
        value = getattr(data, name)
        if value is not None:
            check_text(value, name)
    for tag in data.tags or ():
        check_text(tag, "tags")


async def create_thread(
    pool: asyncpg.Pool, user: User, conversation_id: str, data: ThreadCreate
) -> ThreadRow:
    """Archive the thread ``data.root_message_id`` belongs to (its root, if it is a reply)."""
    _check_texts(data)
    async with pool.acquire() as conn, conn.transaction():
        conversation, _ = await require_membership(conn, conversation_id=conversation_id, user=user)
        await check_can_post(conn, conversation, user)
        anchor = await messages_store.get_message(conn, id=data.root_message_id)
        if anchor is None or anchor.conversation_id != conversation_id:
            raise MessageNotFoundError(f"no message {data.root_message_id}")
        root = anchor.thread_root or anchor.id
        await conv_store.lock_direct_pair(conn, f"thread:{root}")
        if await threads_store.get_thread_by_root(conn, root_message_id=root) is not None:
            raise ThreadExistsError(f"message {root} already roots an archived thread")
        return await threads_store.insert_thread(
            conn,
            conversation_id=conversation_id,
            root_message_id=root,
            title=data.title,
            summary=data.summary,
            tags=data.tags,
        )


async def update_thread(
    pool: asyncpg.Pool, user: User, conversation_id: str, thread_id: str, data: ThreadUpdate
) -> ThreadRow:
    """Change title, summary or tags, and/or close the thread."""
    _check_texts(data)
    async with pool.acquire() as conn, conn.transaction():
        conversation, _ = await require_membership(conn, conversation_id=conversation_id, user=user)
        await check_can_post(conn, conversation, user)
        row = await threads_store.update_thread(
            conn,
            conversation_id=conversation_id,
            thread_id=thread_id,
            title=data.title,
            summary=data.summary,
            tags=data.tags,
            close=data.closed is True,
        )
    if row is None:
        raise ThreadNotFoundError(f"no thread {thread_id}")
    return row


async def list_threads(
    pool: asyncpg.Pool, user: User, conversation_id: str, *, open_only: bool, limit: int
) -> list[ThreadRow]:
    """The conversation's archived threads, newest first."""
    async with pool.acquire() as conn:
        await require_membership(conn, conversation_id=conversation_id, user=user)
        return await threads_store.list_threads(
            conn, conversation_id=conversation_id, open_only=open_only, limit=limit
        )
