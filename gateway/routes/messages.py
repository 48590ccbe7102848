"""One message: read, edit, delete; threads; read receipts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from gateway.deps import Current, State
from gateway.routes.conversations import _ERRORS
from gateway.routes.params import Id, id_query
from gateway.services import deliveries
from gateway.services import messages as service
from models.api import MembershipPublic, MessageDetail, MessageUpdate, ReadCreate, ThreadPage
from models.base import DIGITS_ONLY
from models.federation_api import DeliveryList

router = APIRouter(tags=["conversations"])

_MESSAGE = "/v1/conversations/{conversation_id}/messages/{message_id}"


@router.get(_MESSAGE, summary="One message with its versions", responses=_ERRORS)
async def get_message(
    conversation_id: Id, message_id: Id, current: Current, state: State
) -> MessageDetail:
    """A visible message, its current ``version``, receipts and previous versions."""
    return await service.get_message(state.pool, current.user, conversation_id, message_id)


@router.get(_MESSAGE + "/deliveries", summary="Delivery status per peer", responses=_ERRORS)
async def list_deliveries(
    conversation_id: Id, message_id: Id, current: Current, state: State
) -> DeliveryList:
    """Where the message stands with each peer instance it is sent to: ``queued``,
    ``retrying`` (with ``next_attempt_at`` and the last ``reason``), ``delivered`` or
    ``failed`` (for good, with the ``reason``). Changes arrive as ``message.delivery_updated``
    events on the sender's stream."""
    return await deliveries.list_deliveries(state.pool, current.user, conversation_id, message_id)


@router.patch(_MESSAGE, summary="Edit your message", responses=_ERRORS)
async def edit_message(
    conversation_id: Id, message_id: Id, data: MessageUpdate, current: Current, state: State
) -> MessageDetail:
    """Replace the content; 409 ``edit_conflict`` when ``version`` is not the current one."""
    return await service.edit_message(
        state.pool,
        state.hub,
        current.user,
        conversation_id,
        message_id,
        data,
    )


@router.delete(_MESSAGE, status_code=204, summary="Delete your message", responses=_ERRORS)
async def delete_message(
    conversation_id: Id, message_id: Id, current: Current, state: State
) -> Response:
    """Soft-delete: the content disappears from every read path; a tombstone event is sent."""
    await service.delete_message(
        state.pool,
        state.hub,
        state.storage,
        current.user,
        conversation_id,
        message_id,
    )
    return Response(status_code=204)


@router.get(_MESSAGE + "/thread", summary="The thread of a message", responses=_ERRORS)
async def list_thread(
    conversation_id: Id,
    message_id: Id,
    current: Current,
    state: State,
    after: Annotated[str | None, id_query("Return replies after this message id")] = None,
    limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50,
) -> ThreadPage:
    """The root and its replies oldest first; follow ``next_after`` for more."""
    items, next_after = await service.list_thread(
        state.pool,
        current.user,
        conversation_id,
        message_id,
        after=after,
        limit=limit,
    )
    return ThreadPage(items=items, next_after=next_after)


@router.post(
    "/v1/conversations/{conversation_id}/read", summary="Mark messages read", responses=_ERRORS
)
async def mark_read(
    conversation_id: Id, data: ReadCreate, current: Current, state: State
) -> MembershipPublic:
    """Everything up to ``message_id`` is read; returns your membership with ``unread``."""
    return await service.mark_read(state.pool, state.hub, current.user, conversation_id, data)
