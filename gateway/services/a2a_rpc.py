"""The A2A 1.0 JSON-RPC methods of a Confer endpoint (A2A §9; method table in §4.4).

Unary methods return the ``result`` object; streaming methods return an async iterator of
``StreamResponse`` objects (``{"task": …}`` first, then ``{"statusUpdate": …}`` until a terminal
or interrupted state, A2A §4.6). Protocol errors are :class:`a2a.protocol.JSONRPCError`.

Each call's ``params`` are validated once, by the method that receives them; the door check
(:func:`gateway.services.federation.admit`) runs once per call: at the edge for an endpoint's
recipient (before any method runs), here for a recipient a ``/a2a`` message names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel, ValidationError

from a2a.confer import ConferMetadata
from a2a.protocol import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    GetTaskParams,
    InvalidParamsError,
    ListPushConfigsParams,
    ListTasksParams,
    MethodNotFoundError,
    PushConfigIdParams,
    PushConfigParams,
    SendMessageParams,
    TaskIdParams,
    UnsupportedOperationError,
    message_text,
)
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.errors import RecipientNotFoundError, ValidationFailedError
from gateway.realtime.hub import EventHub
from gateway.services import a2a_push as push_service
from gateway.services import federated_changes, federated_receipts, federation, groups
from gateway.services import tasks as tasks_service
from gateway.services.a2a_push import PushRules
from gateway.services.callers import A2ACaller
from gateway.services.content import check_json
from gateway.services.identity import Identity
from gateway.services.peers import PeerDirectory
from gateway.services.tasks import Recipient, TaskEvents, status_update, task_json
from gateway.storage import AttachmentStorage
from gateway.store.tasks import TaskRow

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class RpcContext:
    """One authenticated call and what its methods use.

    ``recipient`` is the endpoint's recipient, already admitted by the edge; None on ``/a2a``,
    where a message names its own. ``ip`` is the caller's address for the audit row.
    ``max_message_chars`` bounds a message's text; a consent request expires
    ``permission_ttl_seconds`` after ``clock.now()``. ``storage`` holds fetched files (a
    peer's delete removes them). ``peers`` resolves the remote members a group message names
    (None: only members already known join a replica). ``push`` bounds webhook configs.
    """

    caller: A2ACaller
    recipient: Recipient | None
    ip: str | None
    pool: asyncpg.Pool
    clock: Clock
    hub: EventHub
    queue: TaskQueue
    task_events: TaskEvents
    identity: Identity
    storage: AttachmentStorage
    max_message_chars: int
    permission_ttl_seconds: float
    peers: PeerDirectory | None = None
    push: PushRules = field(default_factory=PushRules)


def _params(model: type[M], raw: Any) -> M:
    """``raw`` as ``model``; InvalidParamsError (-32602) for a shape that does not fit, and
    for text PostgreSQL cannot store anywhere in it (NUL, lone surrogates, non-finite
    numbers), before anything is looked up or written."""
    try:
        check_json(raw, "params")
    except ValidationFailedError as exc:
        raise InvalidParamsError(f"Invalid params: {exc.detail}") from exc
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) or "params" for e in exc.errors())
        raise InvalidParamsError(f"Invalid params: {fields}") from exc


async def _recipient(ctx: RpcContext, params: SendMessageParams) -> Recipient:
    """The endpoint's recipient (admitted at the edge), or on ``/a2a`` the one named by
    ``tenant`` (an agent id) or ``metadata.confer.recipient`` (a local DID), admitted here.

    Raises InvalidParamsError (-32602, A2A §9.5: the request names no recipient, or one this
    instance does not have — a JSON-RPC error like any other bad params, not an HTTP 404),
    PeerBlockedError, ApiKeyScopeError.
    """
    if ctx.recipient is not None:
        return ctx.recipient
    did = ConferMetadata.of(params.message.metadata).recipient
    async with ctx.pool.acquire() as conn:
        try:
            if params.tenant:
                recipient = await federation.resolve_recipient(conn, "agents", params.tenant)
            elif did:
                recipient = await federation.recipient_for_did(conn, ctx.identity, did)
            else:
                raise InvalidParamsError(
                    "Invalid params: name the recipient: params.tenant (an agent id) or "
                    "message.metadata.confer.recipient (a local DID)"
                )
        except RecipientNotFoundError as exc:
            raise InvalidParamsError(f"Invalid params: {exc.detail}") from exc
        await federation.admit(conn, ctx.caller, recipient)
    return recipient


async def _check_task_reference(ctx: RpcContext, params: SendMessageParams) -> None:
    """A ``message.taskId`` must name one of the caller's tasks: task ids are the server's,
    a client only refers to an existing one (A2A 1.0 §3.4, ``Message.taskId``). Raises
    TaskNotFoundError (-32001). Confer's own peers never set it: a consent answer names the
    held task in ``metadata.confer.taskId``, not here."""
    if params.message.taskId is not None:
        await tasks_service.get_task(ctx.pool, ctx.caller.ref, params.message.taskId)


async def _send(ctx: RpcContext, params: SendMessageParams) -> tuple[TaskRow, bool]:
    """Store a new message (or return the first answer to a retried one)."""
    await federation.check_sender(ctx.caller, params, pool=ctx.pool, ip=ctx.ip)
    await _check_task_reference(ctx, params)
    recipient = await _recipient(ctx, params)
    claim = ConferMetadata.of(params.message.metadata).conversation
    if claim is not None and ctx.peers is not None and ctx.caller.peer is not None:
        if ctx.caller.peer.peer.did.startswith(claim.home + ":"):  # the home's member list
            await groups.resolve_members(ctx.pool, ctx.peers, claim, ctx.identity.did)
    return await federation.receive_message(
        ctx.caller,
        recipient,
        params,
        ctx.ip,
        max_chars=ctx.max_message_chars,
        pool=ctx.pool,
        hub=ctx.hub,
        queue=ctx.queue,
        clock=ctx.clock,
        permission_ttl_seconds=ctx.permission_ttl_seconds,
    )


async def send_message(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``SendMessage`` → ``{"task": Task}`` (the first answer again for a retried messageId);
    a peer's edit or delete of an earlier message, or its read receipt →
    ``{"message": Message}``."""
    params = _params(SendMessageParams, raw)
    confer = ConferMetadata.of(params.message.metadata)
    if confer.read is not None or "read" in confer.malformed:
        await federation.check_sender(ctx.caller, params, pool=ctx.pool, ip=ctx.ip)
        recipient = await _recipient(ctx, params)
        return await federated_receipts.apply_receipt(
            ctx.caller, recipient, params, pool=ctx.pool, hub=ctx.hub
        )
    change = confer.change()
    if change is None:
        config = _push_config(ctx, params)
        task, _ = await _send(ctx, params)
        if config is not None:
            await push_service.create_config(
                ctx.pool, ctx.caller.ref, task.id, config, ctx.push, send_task=True
            )
        return {"task": task_json(task)}
    text = message_text(params.message, ctx.max_message_chars) if change[0] == "edit" else ""
    await federation.check_sender(ctx.caller, params, pool=ctx.pool, ip=ctx.ip)
    await _check_task_reference(ctx, params)
    recipient = await _recipient(ctx, params)
    return await federated_changes.apply_change(
        ctx.caller,
        recipient,
        params,
        text,
        pool=ctx.pool,
        hub=ctx.hub,
        clock=ctx.clock,
        task_events=ctx.task_events,
        storage=ctx.storage,
    )


def _push_config(ctx: RpcContext, params: SendMessageParams) -> PushConfigParams | None:
    """``configuration.taskPushNotificationConfig``, checked before anything is stored (the
    field's 0.3 name ``pushNotificationConfig`` is read too). Raises InvalidParamsError."""
    configuration = params.configuration or {}
    raw = configuration.get("taskPushNotificationConfig")
    if raw is None:
        raw = configuration.get("pushNotificationConfig")
    if raw is None:
        return None
    config = _params(PushConfigParams, raw)
    push_service.check_url(config.url, ctx.push)
    if config.taskId is not None:
        raise InvalidParamsError("Invalid params: the new task's id is the server's to choose")
    return config


async def create_push_config(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``CreateTaskPushNotificationConfig`` → the stored ``TaskPushNotificationConfig``."""
    config = _params(PushConfigParams, raw)
    if config.taskId is None:
        raise InvalidParamsError("Invalid params: taskId")
    push_service.check_url(config.url, ctx.push)
    return await push_service.create_config(
        ctx.pool, ctx.caller.ref, config.taskId, config, ctx.push
    )


async def get_push_config(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``GetTaskPushNotificationConfig`` → ``TaskPushNotificationConfig``."""
    params = _params(PushConfigIdParams, raw)
    return await push_service.get_config(ctx.pool, ctx.caller.ref, params)


async def list_push_configs(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``ListTaskPushNotificationConfigs`` → ``ListTaskPushNotificationConfigsResponse``."""
    return await push_service.list_configs(
        ctx.pool, ctx.caller.ref, _params(ListPushConfigsParams, raw)
    )


async def delete_push_config(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``DeleteTaskPushNotificationConfig`` → ``{}`` (``google.protobuf.Empty``)."""
    return await push_service.delete_config(
        ctx.pool, ctx.caller.ref, _params(PushConfigIdParams, raw)
    )


async def get_task(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``GetTask`` → ``Task`` (A2A §9: the result is the Task itself)."""
    params = _params(GetTaskParams, raw)
    row = await tasks_service.get_task(ctx.pool, ctx.caller.ref, params.id)
    return task_json(row, history_length=params.historyLength)


async def list_tasks(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``ListTasks`` → ``ListTasksResponse`` of the caller's tasks at this endpoint."""
    params = _params(ListTasksParams, raw or {})
    return await tasks_service.list_tasks(ctx.pool, ctx.caller.ref, ctx.recipient, params)


async def cancel_task(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``CancelTask`` → the canceled ``Task``; TaskNotCancelable once terminal."""
    params = _params(TaskIdParams, raw)
    row = await tasks_service.cancel_task(
        ctx.pool, ctx.clock, ctx.task_events, ctx.caller.ref, params.id
    )
    return task_json(row)


async def _follow(ctx: RpcContext, row: TaskRow, *, stop_on_interrupt: bool) -> AsyncIterator[Any]:
    """Yield status updates of ``row``'s task until it ends (or is interrupted)."""
    async with ctx.task_events.watch(row.id) as queue:
        # Re-read after subscribing, so an update between the first read and now is not lost.
        current = await tasks_service.get_task(ctx.pool, ctx.caller.ref, row.id)
        if current.state != row.state:
            yield status_update(current)
        state = current.state
        while not _finished(state, stop_on_interrupt):
            event = await queue.get()
            yield event
            state = event["statusUpdate"]["status"]["state"]


def _finished(state: str, stop_on_interrupt: bool) -> bool:
    return state in TERMINAL_STATES or (stop_on_interrupt and state in INTERRUPTED_STATES)


async def send_streaming_message(ctx: RpcContext, raw: Any) -> AsyncIterator[dict[str, Any]]:
    """``SendStreamingMessage``: the Task as submitted, then its status until it settles."""
    params = _params(SendMessageParams, raw)
    config = _push_config(ctx, params)
    task, created = await _send(ctx, params)
    if config is not None:
        await push_service.create_config(
            ctx.pool, ctx.caller.ref, task.id, config, ctx.push, send_task=True
        )
    if created:
        submitted = task_json(task)
        submitted["status"] = {"state": "TASK_STATE_SUBMITTED"}
        return _stream([{"task": submitted}, status_update(task)], ctx, task)
    return _stream([{"task": task_json(task)}], ctx, task)


async def _stream(
    first: list[dict[str, Any]], ctx: RpcContext, task: TaskRow, stop_on_interrupt: bool = True
) -> AsyncIterator[dict[str, Any]]:
    for event in first:
        yield event
    async for event in _follow(ctx, task, stop_on_interrupt=stop_on_interrupt):
        yield event


async def subscribe_to_task(ctx: RpcContext, raw: Any) -> AsyncIterator[dict[str, Any]]:
    """``SubscribeToTask``: the current Task, then updates until terminal (A2A §4.6)."""
    params = _params(TaskIdParams, raw)
    row = await tasks_service.get_task(ctx.pool, ctx.caller.ref, params.id)
    if row.state in TERMINAL_STATES:
        raise UnsupportedOperationError(f"task {row.id} is already {row.state}")
    return _stream([{"task": task_json(row)}], ctx, row, stop_on_interrupt=False)


Unary = Callable[[RpcContext, Any], Awaitable[dict[str, Any]]]
Streaming = Callable[[RpcContext, Any], Awaitable[AsyncIterator[dict[str, Any]]]]

UNARY: dict[str, Unary] = {
    "SendMessage": send_message,
    "GetTask": get_task,
    "ListTasks": list_tasks,
    "CancelTask": cancel_task,
    "CreateTaskPushNotificationConfig": create_push_config,
    "GetTaskPushNotificationConfig": get_push_config,
    "ListTaskPushNotificationConfigs": list_push_configs,
    "DeleteTaskPushNotificationConfig": delete_push_config,
}
STREAMING: dict[str, Streaming] = {
    "SendStreamingMessage": send_streaming_message,
    "SubscribeToTask": subscribe_to_task,
}


def method(name: str) -> tuple[Unary | None, Streaming | None]:
    """The handler for ``name``.

    Raises UnsupportedOperationError (-32004) for ``GetExtendedAgentCard``: A2A 1.0 defines
    it, but the card does not declare ``extendedAgentCard`` (§3.1.11).
    Raises MethodNotFoundError for any other unknown name.
    """
    if name in UNARY:
        return UNARY[name], None
    if name in STREAMING:
        return None, STREAMING[name]
    if name == "GetExtendedAgentCard":
        raise UnsupportedOperationError("This agent has no authenticated extended card")
    raise MethodNotFoundError(f"Method not found: {name}")
