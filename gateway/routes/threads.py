"""The threads archive of a conversation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from gateway.deps import Current, State
from gateway.routes.conversations import _ERRORS
from gateway.routes.params import Id
from gateway.services import threads as service
from models import ThreadRow
from models.api import ThreadCreate, ThreadUpdate
from models.base import DIGITS_ONLY, TRUE_OR_FALSE

router = APIRouter(tags=["conversations"])

_THREADS = "/v1/conversations/{conversation_id}/threads"


@router.post(_THREADS, status_code=201, summary="Archive a thread", responses=_ERRORS)
async def create_thread(
    conversation_id: Id, data: ThreadCreate, current: Current, state: State
) -> ThreadRow:
    """Keep a thread on record with a title, summary and tags (409 if already archived)."""
    return await service.create_thread(state.pool, current.user, conversation_id, data)


@router.get(_THREADS, summary="List archived threads", responses=_ERRORS)
async def list_threads(
    conversation_id: Id,
    current: Current,
    state: State,
    open_only: Annotated[bool, Query(description="Only threads not closed"), TRUE_OR_FALSE] = False,
    limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50,
) -> list[ThreadRow]:
    """Newest first."""
    return await service.list_threads(
        state.pool, current.user, conversation_id, open_only=open_only, limit=limit
    )


@router.patch(_THREADS + "/{thread_id}", summary="Update or close a thread", responses=_ERRORS)
async def update_thread(
    conversation_id: Id, thread_id: Id, data: ThreadUpdate, current: Current, state: State
) -> ThreadRow:
    """Change title, summary or tags; ``{"closed": true}`` closes it."""
    return await service.update_thread(state.pool, current.user, conversation_id, thread_id, data)
