"""The A2A 1.0 JSON-RPC methods of a Confer endpoint (A2A §9; method table in §4.4).

Unary methods return the ``result`` object; streaming methods return an async iterator of
``StreamResponse`` objects (``{"task": …}`` first, then ``{"statusUpdate": …}`` until a terminal
or interrupted state, A2A §4.6). Protocol errors are :class:`a2a.protocol.JSONRPCError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from a2a.confer import ConferMetadata
from a2a.protocol import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    GetTaskParams,
    InvalidParamsError,
    ListTasksParams,
    MethodNotFoundError,
    SendMessageParams,
    TaskIdParams,
    UnsupportedOperationError,
    message_text,
)
from gateway.errors import ValidationFailedError
from gateway.services import federated_changes, federation
from gateway.services import tasks as tasks_service
from gateway.services.callers import A2ACaller
from gateway.services.content import check_json
from gateway.services.tasks import Recipient, status_update, task_json
from gateway.state import AppState
from gateway.store.tasks import TaskRow

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class RpcContext:
    """One authenticated call: the app, the caller, the endpoint's recipient (None = /a2a)."""

    state: AppState
    caller: A2ACaller
    recipient: Recipient | None
    ip: str | None


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
    """The endpoint's recipient, or on ``/a2a`` the one named by ``tenant`` or metadata."""
    async with ctx.state.pool.acquire() as conn:
        recipient = ctx.recipient
        if recipient is None:
            if params.tenant:
                recipient = await federation.resolve_recipient(conn, "agents", params.tenant)
            else:
                did = ConferMetadata.of(params.message.metadata).recipient
                recipient = await federation.recipient_for_did(conn, ctx.state.identity, did)
        await federation.admit(conn, ctx.caller, recipient)
    return recipient


async def _send(ctx: RpcContext, raw: Any) -> tuple[TaskRow, bool]:
    params = _params(SendMessageParams, raw)
    federation.check_sender(ctx.caller, params)
    recipient = await _recipient(ctx, params)
    state = ctx.state
    task, created = await federation.receive_message(
        ctx.caller,
        recipient,
        params,
        ctx.ip,
        max_chars=state.settings.max_message_chars,
        pool=state.pool,
        hub=state.hub,
        queue=state.agent_queue,
        clock=state.clock,
        permission_ttl_seconds=state.settings.permission_ttl_seconds,
    )
    return task, created


async def send_message(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``SendMessage`` → ``{"task": Task}`` (the first answer again for a retried messageId);
    a peer's edit or delete of an earlier message → ``{"message": Message}``."""
    params = _params(SendMessageParams, raw)
    change = ConferMetadata.of(params.message.metadata).change()
    if change is not None:
        text = ""
        if change[0] == "edit":
            text = message_text(params.message, ctx.state.settings.max_message_chars)
        federation.check_sender(ctx.caller, params)
        recipient = await _recipient(ctx, params)
        state = ctx.state
        return await federated_changes.apply_change(
            ctx.caller,
            recipient,
            params,
            text,
            pool=state.pool,
            hub=state.hub,
            clock=state.clock,
            task_events=state.task_events,
        )
    task, _ = await _send(ctx, raw)
    return {"task": task_json(task)}


async def get_task(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``GetTask`` → ``Task`` (A2A §9: the result is the Task itself)."""
    params = _params(GetTaskParams, raw)
    row = await tasks_service.get_task(ctx.state.pool, ctx.caller.ref, params.id)
    return task_json(row, history_length=params.historyLength)


async def list_tasks(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``ListTasks`` → ``ListTasksResponse`` of the caller's tasks at this endpoint."""
    params = _params(ListTasksParams, raw or {})
    return await tasks_service.list_tasks(ctx.state.pool, ctx.caller.ref, ctx.recipient, params)


async def cancel_task(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``CancelTask`` → the canceled ``Task``; TaskNotCancelable once terminal."""
    params = _params(TaskIdParams, raw)
    state = ctx.state
    row = await tasks_service.cancel_task(
        state.pool, state.clock, state.task_events, ctx.caller.ref, params.id
    )
    return task_json(row)


async def _follow(ctx: RpcContext, row: TaskRow, *, stop_on_interrupt: bool) -> AsyncIterator[Any]:
    """Yield status updates of ``row``'s task until it ends (or is interrupted)."""
    async with ctx.state.task_events.watch(row.id) as queue:
        # Re-read after subscribing, so an update between the first read and now is not lost.
        current = await tasks_service.get_task(ctx.state.pool, ctx.caller.ref, row.id)
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
    task, created = await _send(ctx, raw)
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
    row = await tasks_service.get_task(ctx.state.pool, ctx.caller.ref, params.id)
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
}
STREAMING: dict[str, Streaming] = {
    "SendStreamingMessage": send_streaming_message,
    "SubscribeToTask": subscribe_to_task,
}


def method(name: str) -> tuple[Unary | None, Streaming | None]:
    """The handler for ``name``. Raises MethodNotFoundError (push configs are not offered)."""
    if name in UNARY:
        return UNARY[name], None
    if name in STREAMING:
        return None, STREAMING[name]
    raise MethodNotFoundError(f"Method not found: {name}")
