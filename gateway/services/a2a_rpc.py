"""The A2A 1.0 JSON-RPC methods of a Confer endpoint (A2A §9; method table in §4.4).

Unary methods return the ``result`` object; streaming methods return an async iterator of
``StreamResponse`` objects (``{"task": …}`` first, then ``{"statusUpdate": …}`` until a terminal
or interrupted state, A2A §4.6). Protocol errors are :class:`a2a.protocol.JSONRPCError`.

Each call's ``params`` are validated once, by the method that receives them; the door check
(:func:`gateway.services.federation.admit`) runs once per call: at the edge for an endpoint's
recipient (before any method runs), here for a recipient a ``/a2a`` message names.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel, ValidationError

from a2a.confer import ConferMetadata, read_parts
from a2a.protocol import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    GetTaskParams,
    InvalidParamsError,
    JSONRPCError,
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
from did.errors import DIDError
from gateway.agents.queue import TaskQueue
from gateway.clock import Clock
from gateway.db import SharedTransaction
from gateway.errors import (
    ConferError,
    FederationRefusedError,
    NotGroupMemberError,
    RecipientNotFoundError,
    ValidationFailedError,
)
from gateway.realtime.hub import EventHub
from gateway.services import a2a_push as push_service
from gateway.services import (
    federated_changes,
    federated_receipts,
    federation,
    group_events,
    group_history,
    group_receipts,
    groups,
    signals,
)
from gateway.services import tasks as tasks_service
from gateway.services.a2a_push import PushRules
from gateway.services.callers import A2ACaller, VerifiedPeer
from gateway.services.content import check_json
from gateway.services.identity import Identity
from gateway.services.participants import GroupDeps
from gateway.services.peers import PeerDirectory
from gateway.services.tasks import Recipient, TaskEvents, status_update, task_json
from gateway.storage import AttachmentStorage
from gateway.store import audit as audit_store
from gateway.store.tasks import TaskRow

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class RpcContext:
    """One authenticated call and what its methods use.

    ``recipient`` is the endpoint's recipient, already admitted by the edge; None on ``/a2a``,
    where a message names its own. ``ip`` is the caller's address for the audit row.
    ``max_message_chars`` bounds a message's text, ``max_attachment_bytes`` the declared size
    of a peer's file (``CONFER_ATTACHMENT_MAX_BYTES``); a consent request expires
    ``permission_ttl_seconds`` after ``clock.now()``. ``storage`` holds fetched files (a
    peer's delete removes them). ``peers`` resolves the remote members a group message names
    (None: only members already known join a replica); ``max_group_members`` bounds a group
    a membership request may grow (``CONFER_MAX_GROUP_MEMBERS``) and
    ``group_backfill_messages`` the history a join it asks for sends
    (``CONFER_GROUP_BACKFILL_MESSAGES``); a peer's typing in one
    conversation reaches its users at most once per ``typing_interval_seconds``; ``push``
    bounds webhook configs. ``batch`` is the transaction the calls of one JSON-RPC batch share
    (:func:`joins_batch`); None for a single call.
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
    max_attachment_bytes: int
    permission_ttl_seconds: float
    message_requests_default: bool = True
    peers: PeerDirectory | None = None
    max_group_members: int = 256
    group_backfill_messages: int = 0
    typing_interval_seconds: float = 3.0
    push: PushRules = field(default_factory=PushRules)
    batch: SharedTransaction | None = None


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


async def _check_addressee(ctx: RpcContext, params: SendMessageParams) -> None:
    """A message to an endpoint's recipient may not name another one: a
    ``metadata.confer.recipient`` other than the endpoint's, or ``recipients`` without it,
    is InvalidParamsError (-32602) with the reason, audited ``federation.inbound.rejected``,
    before anything is stored (a message is never delivered to someone it was not for)."""
    if ctx.recipient is None:
        return
    confer = ConferMetadata.of(params.message.metadata)
    own = ctx.recipient.did
    if confer.recipient is not None and confer.recipient != own:
        detail = f"the message is addressed to {confer.recipient[:255]}, not to {own}"
    elif confer.recipients and own not in confer.recipients:
        detail = f"metadata.confer.recipients does not name {own}, whose endpoint this is"
    else:
        return
    async with ctx.pool.acquire() as conn:
        await audit_store.insert_audit(
            conn,
            action="federation.inbound.rejected",
            user_id=ctx.recipient.user_id,
            details={
                "method": "SendMessage",
                "caller": ctx.caller.ref,
                "remote_message_id": params.message.messageId[:128],
                "code": InvalidParamsError.code,
                "detail": detail,
            },
            ip_address=ctx.ip,
        )
    raise InvalidParamsError(f"Invalid params: {detail}")


async def _check_task_reference(ctx: RpcContext, params: SendMessageParams) -> None:
    """A ``message.taskId`` must name one of the caller's tasks: task ids are the server's,
    a client only refers to an existing one (A2A 1.0 §3.4, ``Message.taskId``). Raises
    TaskNotFoundError (-32001). Confer's own peers never set it: a consent answer names the
    held task in ``metadata.confer.taskId``, not here."""
    if params.message.taskId is not None:
        await tasks_service.get_task(ctx.pool, ctx.caller.ref, params.message.taskId)


async def _author(ctx: RpcContext, params: SendMessageParams) -> A2ACaller:
    """The caller, or for a group post its home relays (:func:`federation.relayed_author`)
    the author as the verified peer the message is stored from (the home's signature
    verified; the home's caller ref keeps the task). Raises InvalidParamsError when the
    author's DID cannot be resolved, NotGroupMemberError when it is one of ours,
    FederationRefusedError (audited) when our federation policy refuses the author."""
    author = federation.relayed_author(ctx.caller, params)
    if author is None or ctx.caller.peer is None or ctx.peers is None:
        return ctx.caller
    if ctx.identity.local_subject(author) is not None or author.startswith(ctx.identity.did):
        # no other instance speaks for our own users, whatever group it claims
        raise NotGroupMemberError(f"{ctx.caller.peer.peer.did} may not relay as {author}")
    try:
        row = await ctx.peers.resolve(author)
    except DIDError as exc:
        raise InvalidParamsError(f"Invalid params: the relayed author: {exc.detail}") from exc
    except FederationRefusedError as exc:  # the author's instance is refused, relayed or not
        await federation.audit_claim_refused(ctx.pool, ctx.caller, author, exc, ctx.ip)
        raise
    verified = VerifiedPeer(peer=row, keyid=ctx.caller.peer.keyid, body=ctx.caller.body)
    return A2ACaller(ref=ctx.caller.ref, body=ctx.caller.body, peer=verified)


async def _send(
    ctx: RpcContext, params: SendMessageParams, shared: SharedTransaction | None = None
) -> tuple[TaskRow, bool]:
    """Store a new message (or return the first answer to a retried one).

    A group message sent once to this instance (``/a2a``) names every local member it is for
    in ``metadata.confer.recipients``: the group stores it once and each of them receives it.
    A member the group no longer has, or who blocks the author or the instance that signed
    it (a group's home relaying), is skipped; when none receives it, the first refusal is
    raised (e.g. PeerBlockedError, 403)."""
    caller = await _author(ctx, params)
    await federation.check_sender(caller, params, pool=ctx.pool, ip=ctx.ip)
    await _check_task_reference(ctx, params)
    confer = ConferMetadata.of(params.message.metadata)
    claim = confer.conversation
    if claim is not None and ctx.peers is not None and caller.peer is not None:
        if ctx.caller.peer is not None and ctx.caller.peer.peer.did.startswith(claim.home + ":"):
            await groups.resolve_members(ctx.pool, ctx.peers, claim, ctx.identity.did)
    if ctx.recipient is not None or claim is None or not confer.recipients:
        recipient = await _recipient(ctx, params)
        if caller is not ctx.caller:  # a relay: the author must be welcome too
            async with ctx.pool.acquire() as conn:
                await federation.admit(conn, caller, recipient)
        return await _receive(ctx, caller, recipient, params, shared)
    named = [confer.recipient] if confer.recipient else []
    return await _fan_out(ctx, caller, params, [*named, *confer.recipients])


async def _fan_out(
    ctx: RpcContext, caller: A2ACaller, params: SendMessageParams, dids: list[str]
) -> tuple[TaskRow, bool]:
    """Deliver a group message to each local member ``dids`` names (:func:`_send`); the
    first delivery's ``(task, created)``, or the first refusal raised when none took it."""
    first: tuple[TaskRow, bool] | None = None
    refusal: ConferError | JSONRPCError | None = None
    for did in dict.fromkeys(dids):
        try:
            async with ctx.pool.acquire() as conn:
                other = await federation.recipient_for_did(conn, ctx.identity, did)
                await federation.admit(conn, ctx.caller, other)
                if caller is not ctx.caller:
                    await federation.admit(conn, caller, other)
            received = await _receive(ctx, caller, other, params)
        except (ConferError, JSONRPCError) as exc:
            refusal = refusal or exc
            continue  # this member is gone or refuses; the others still receive it
        first = first or received
    if first is None:
        if isinstance(refusal, RecipientNotFoundError):
            raise InvalidParamsError(f"Invalid params: {refusal.detail}") from refusal
        assert refusal is not None
        raise refusal
    return first


async def _receive(
    ctx: RpcContext,
    caller: A2ACaller,
    recipient: Recipient,
    params: SendMessageParams,
    shared: SharedTransaction | None = None,
) -> tuple[TaskRow, bool]:
    return await federation.receive_message(
        caller,
        recipient,
        params,
        ctx.ip,
        max_chars=ctx.max_message_chars,
        max_file_bytes=ctx.max_attachment_bytes,
        pool=ctx.pool,
        hub=ctx.hub,
        queue=ctx.queue,
        clock=ctx.clock,
        permission_ttl_seconds=ctx.permission_ttl_seconds,
        message_requests_default=ctx.message_requests_default,
        shared=shared,
    )


def joins_batch(ctx: RpcContext, params: SendMessageParams) -> bool:
    """Whether this ``SendMessage`` of a batch may be stored in the batch's shared transaction
    (:class:`gateway.db.SharedTransaction`): a plain message to the endpoint's recipient, whose
    every read and write goes through that transaction. Everything else (a change, receipt,
    signal, group or membership message, a consent answer, a task reference, a push config)
    reads or writes on other connections, so it runs after the batch's earlier calls have
    committed."""
    confer = ConferMetadata.of(params.message.metadata)
    return (
        ctx.batch is not None
        and ctx.recipient is not None
        and not confer.malformed
        and confer.change() is None
        and not confer.typing
        and all(
            value is None
            for value in (confer.conversation, confer.membership, confer.read, confer.presence)
        )
        and confer.taskId is None
        and confer.decision is None
        and not confer.recipients
        and params.message.taskId is None
        and not _PUSH_CONFIG_FIELDS & set(params.configuration or ())
    )


_PUSH_CONFIG_FIELDS = frozenset({"taskPushNotificationConfig", "pushNotificationConfig"})


async def send_message(ctx: RpcContext, raw: Any) -> dict[str, Any]:
    """``SendMessage`` → ``{"task": Task}`` (the first answer again for a retried messageId);
    a peer's edit or delete of an earlier message, its read receipt, a group membership
    event or request (:mod:`gateway.services.group_events`) or a group's history from its
    home (:mod:`gateway.services.group_history`) → ``{"message": Message}``."""
    params = _params(SendMessageParams, raw)
    shared = ctx.batch if joins_batch(ctx, params) else None
    if ctx.batch is not None and shared is None:
        await ctx.batch.commit()  # what comes next sees the batch's earlier calls
    await _check_addressee(ctx, params)
    confer = ConferMetadata.of(params.message.metadata)
    if confer.typing or confer.presence is not None:
        await federation.check_sender(ctx.caller, params, pool=ctx.pool, ip=ctx.ip)
        return await signals.receive(
            ctx.pool,
            ctx.hub,
            ctx.identity,
            ctx.caller,
            ctx.recipient,
            params,
            ctx.typing_interval_seconds,
        )
    if confer.membership is not None or "membership" in confer.malformed:
        await federation.check_sender(ctx.caller, params, pool=ctx.pool, ip=ctx.ip)
        if "membership" in confer.malformed or ctx.peers is None:
            raise InvalidParamsError("Invalid params: message.metadata.confer.membership")
        deps = GroupDeps(
            ctx.pool,
            ctx.hub,
            ctx.identity,
            ctx.peers,
            None,
            ctx.max_group_members,
            ctx.group_backfill_messages,
            requests_default=ctx.message_requests_default,
        )
        return await group_events.receive(deps, ctx.caller, params, ctx.ip)
    if confer.read is not None or "read" in confer.malformed:
        if not group_receipts.relayed_by_home(ctx.caller, params, ctx.identity.did):
            await federation.check_sender(ctx.caller, params, pool=ctx.pool, ip=ctx.ip)
        if confer.conversation is not None and ctx.peers is not None:
            on = group_receipts.ReceiptDeps(ctx.pool, ctx.hub, ctx.identity, ctx.peers)
            return await group_receipts.receive(on, ctx.caller, params, ctx.ip)
        recipient = await _recipient(ctx, params)
        return await federated_receipts.apply_receipt(
            ctx.caller, recipient, params, pool=ctx.pool, hub=ctx.hub
        )
    if confer.history is not None:
        return await _history(ctx, params)
    change = confer.change()
    if change is None:
        config = _push_config(ctx, params)
        task, _ = await _send(ctx, params, shared)
        if config is not None:
            await push_service.create_config(
                ctx.pool, ctx.caller.ref, task.id, config, ctx.push, send_task=True
            )
        if task.state == "TASK_STATE_WORKING" and not _returns_immediately(params):
            task = await _settled(ctx, task)
        return {"task": task_json(task)}
    text, content_json = "", None
    if change[0] == "edit":  # the new text and, for structured content, its data part
        text, content_json = read_parts(params.message.parts)
        if content_json is None:
            text = message_text(params.message, ctx.max_message_chars)
        elif len(text) > ctx.max_message_chars:
            raise InvalidParamsError(f"the text exceeds {ctx.max_message_chars} characters")
    caller = await _author(ctx, params)  # a group's home relays its members' changes too
    await federation.check_sender(caller, params, pool=ctx.pool, ip=ctx.ip)
    await _check_task_reference(ctx, params)
    recipient = await _recipient(ctx, params)
    return await federated_changes.apply_change(
        caller,
        recipient,
        params,
        text,
        pool=ctx.pool,
        hub=ctx.hub,
        clock=ctx.clock,
        task_events=ctx.task_events,
        storage=ctx.storage,
        content_json=content_json,
    )


async def _history(ctx: RpcContext, params: SendMessageParams) -> dict[str, Any]:
    """A group's history from its home, signed by the home for each message's author
    (:mod:`gateway.services.group_history`); InvalidParamsError when it names no author of
    another instance."""
    author = await _author(ctx, params)  # never one of our own users
    await federation.check_sender(author, params, pool=ctx.pool, ip=ctx.ip)
    if author is ctx.caller:
        raise InvalidParamsError("Invalid params: a history message names its author")
    deps = group_history.HistoryDeps(
        ctx.pool, ctx.hub, ctx.identity, ctx.clock, ctx.max_message_chars, ctx.max_attachment_bytes
    )
    return await group_history.receive(deps, ctx.caller, author, params, ctx.ip)


ANSWER_WAIT_SECONDS = 120.0
"""How long a blocking ``SendMessage`` waits for the agent's answer before it returns the task
still working (the caller then polls ``GetTask`` or subscribes)."""


def _returns_immediately(params: SendMessageParams) -> bool:
    """``configuration.returnImmediately`` (A2A 1.0 §3.2.2; the default is to block until the
    task is terminal or interrupted)."""
    return (params.configuration or {}).get("returnImmediately") is True


async def _settled(ctx: RpcContext, row: TaskRow) -> TaskRow:
    """The task once it is terminal or interrupted, or as it is after
    :data:`ANSWER_WAIT_SECONDS`."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(ANSWER_WAIT_SECONDS):
            async for _ in _follow(ctx, row, stop_on_interrupt=True):
                pass
    return await tasks_service.get_task(ctx.pool, ctx.caller.ref, row.id)


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
    await _check_addressee(ctx, params)
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
