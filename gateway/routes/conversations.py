"""Contacts, conversations and messages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response

from gateway.deps import Current, State, group_deps
from gateway.routes import problems
from gateway.routes.express import ExpressRoute
from gateway.routes.params import Id, id_query
from gateway.services import conversations as service
from gateway.services import participants
from gateway.services.unread import cache_of
from models.api import (
    ConversationCreate,
    ConversationPublic,
    MessageCreate,
    MessagePage,
    MessagePosted,
    ReadStateList,
)
from models.base import DIGITS_ONLY, TRUE_OR_FALSE

router = APIRouter(tags=["conversations"])

_ERRORS = problems(400, 401, 403, 404, 409, 413, 422)


@router.post(
    "/v1/conversations",
    status_code=201,
    summary="Start a direct conversation or a group",
    responses={**_ERRORS, 200: {"description": "The direct conversation already existed"}},
)
async def create_conversation(
    data: ConversationCreate, current: Current, state: State, response: Response
) -> ConversationPublic:
    """Find or create the direct conversation with a local or remote DID, or create a group."""
    if data.type == "group":
        return await participants.create_group(group_deps(state), current.user, data)
    conversation, created = await service.create_direct_conversation(
        state.pool, state.identity, state.peers, current.user, data
    )
    if not created:
        response.status_code = 200
    return conversation


@router.get("/v1/conversations", summary="List conversations", responses=_ERRORS)
async def list_conversations(
    current: Current,
    state: State,
    limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50,
    requests: Annotated[
        bool,
        Query(description="Also list message requests (pending or declined), flagged `request`."),
        TRUE_OR_FALSE,
    ] = False,
) -> list[ConversationPublic]:
    """The caller's conversations, most recently active first; strangers' message requests
    are held apart (`GET /v1/message-requests`) unless `requests=true`."""
    return await service.list_conversations(
        state.pool, current.user, limit, cache_of(state), requests=requests
    )


@router.get("/v1/conversations/{conversation_id}", summary="One conversation", responses=_ERRORS)
async def get_conversation(
    conversation_id: Id, current: Current, state: State
) -> ConversationPublic:
    """A conversation the caller takes part in."""
    return await service.get_conversation(
        state.pool, current.user, conversation_id, cache_of(state)
    )


async def post_message(
    conversation_id: Id,
    data: MessageCreate,
    current: Current,
    state: State,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=255,
            description="Retries with the same key and body return the same message.",
        ),
    ] = None,
) -> MessagePosted:
    """Store a message, push it to every participant's devices, and queue it for peers;
    returns it with its ``version`` (what a ``PATCH`` names)."""
    return await service.post_message(
        state.pool,
        state.hub,
        state.agent_queue,
        current.user,
        conversation_id,
        data,
        idempotency_key=idempotency_key,
        message_requests_default=state.settings.message_requests_default,
        consent_seconds=state.settings.permission_ttl_seconds,
        posts=state.posts,
    )


def add_post_message(target: APIRouter, *, include_in_schema: bool = True) -> None:
    """Add the post's route to ``target``: to this router, at its documented place, and (out
    of the OpenAPI document) at the head of the app's own routes, where it is matched before
    any included router is searched (:func:`gateway.app.create_app`). The busiest route: its
    common requests also skip FastAPI's generic solving (:mod:`gateway.routes.express`)."""
    target.add_api_route(
        "/v1/conversations/{conversation_id}/messages",
        post_message,
        methods=["POST"],
        status_code=201,
        summary="Send a message",
        responses=_ERRORS,
        include_in_schema=include_in_schema,
        route_class_override=ExpressRoute,
    )


add_post_message(router)


@router.get(
    "/v1/conversations/{conversation_id}/reads",
    summary="Every participant's read state",
    responses=_ERRORS,
)
async def read_states(conversation_id: Id, current: Current, state: State) -> ReadStateList:
    """How far each participant has read and how many messages from others it has not read
    yet (at most 1000), in join order; a remote member's as its read receipts reached this
    instance."""
    return await service.read_states(state.pool, current.user, conversation_id)


@router.get(
    "/v1/conversations/{conversation_id}/messages", summary="List messages", responses=_ERRORS
)
async def list_messages(
    conversation_id: Id,
    current: Current,
    state: State,
    before: Annotated[str | None, id_query("Return messages older than this message id")] = None,
    limit: Annotated[int, Query(ge=1, le=200), DIGITS_ONLY] = 50,
) -> MessagePage:
    """Messages newest first; follow ``next_before`` for older pages."""
    items, next_before = await service.list_messages(
        state.pool, current.user, conversation_id, before=before, limit=limit
    )
    return MessagePage(items=items, next_before=next_before)
