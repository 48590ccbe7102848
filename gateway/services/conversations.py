"""Conversations and messages: create, post (store + fan-out + outbox), list.

Posting is the hot path: one transaction stores the message, queues one outbox row per
remote participant and appends the ``message.created`` event to every local member's stream;
after commit the event is pushed to their devices.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Literal, cast

import asyncpg

from did.web import instance_did, split_did_url
from gateway.agents.queue import TaskQueue
from gateway.agents.worker import enqueue_for_message
from gateway.db import GroupCommit, Transaction, transaction
from gateway.errors import (
    AgentNotReachableError,
    AgentPolicyDeniedError,
    ConversationArchivedError,
    ConversationNotFoundError,
    GroupTooLargeError,
    IdempotencyKeyReusedError,
    MessageNotFoundError,
    ObserverCannotPostError,
    RecipientNotFoundError,
    ValidationFailedError,
)
from gateway.ids import new_id
from gateway.realtime.ephemeral import EphemeralStore
from gateway.realtime.hub import EventHub
from gateway.services import local_consent, message_requests
from gateway.services.attachments import link_to_message, take_upload
from gateway.services.content import validate_message
from gateway.services.identity import Identity
from gateway.services.outbound import Post, queue_for_peers
from gateway.services.peers import PeerDirectory
from gateway.services.unread import unread_count
from gateway.store import conversations as conv_store
from gateway.store import message_changes as change_store
from gateway.store import message_requests as requests_store
from gateway.store import messages as messages_store
from gateway.store import peers as peers_store
from gateway.store import users as users_store
from gateway.store.conversations import ParticipantRef
from models import Agent, ConversationRow, Message, User
from models.api import (
    READ_STATE_UNREAD_CAP,
    ConversationCreate,
    ConversationPublic,
    MembershipPublic,
    MessageCreate,
    MessageListed,
    MessagePosted,
    ParticipantPublic,
    ReadStateList,
    ReadStatePublic,
)

MESSAGE_CREATED = "message.created"
RequestState = Literal["pending", "declined"]


async def _local_participant(
    conn: asyncpg.Connection, identity: Identity, did: str
) -> ParticipantRef:
    subject = identity.local_subject(did)
    if subject is not None:
        kind, name = subject
        if kind == "users":
            user = await users_store.get_user_by_username(conn, username=name)
            if user is not None:
                return ("user", user.id)
        else:
            agent = await users_store.get_agent(conn, id=name)
            if agent is not None:
                return ("own_agent", agent.id)
    raise RecipientNotFoundError(f"{did} is not a user or agent of this instance")


async def resolve_participant(
    pool: asyncpg.Pool, identity: Identity, peers: PeerDirectory, did: str
) -> ParticipantRef:
    """A DID as a participant: a local user or agent, or a peer agent (resolved and cached).

    Raises RecipientNotFoundError for an unknown local DID and the resolver's errors (4xx)
    for a remote one that cannot be used.
    """
    split_did_url(did)  # refuse DID URLs with fragments early
    if identity.local_subject(did) is None:
        peer = await peers.resolve(did)
        return ("peer_agent", peer.id)
    async with pool.acquire() as conn:
        return await _local_participant(conn, identity, did)


RESOLVE_CONCURRENCY = 8
"""Remote DIDs of one request resolved at the same time."""
RESOLVE_CONCURRENCY_PER_HOST = 2
"""Of those, at most this many fetches to one host at the same time."""
MAX_DIDS_PER_HOST = 64
"""Remote DIDs of one host one request may name: each may be a DID document fetch there, so a
request cannot aim hundreds of fetches at one host."""


async def resolve_participants(
    pool: asyncpg.Pool, identity: Identity, peers: PeerDirectory, dids: Sequence[str]
) -> list[ParticipantRef]:
    """:func:`resolve_participant` for each of ``dids``, in their order: local ones one after
    the other, remote ones :data:`RESOLVE_CONCURRENCY` at a time and at most
    :data:`RESOLVE_CONCURRENCY_PER_HOST` per host (did:web §3.2: one fetch per DID).

    Every DID is checked before anything is fetched. Raises InvalidDIDError, GroupTooLargeError
    for more than :data:`MAX_DIDS_PER_HOST` remote DIDs of one host, and the first error of
    :func:`resolve_participant` (the other resolutions are cancelled).
    """
    hosts: dict[str, list[int]] = {}
    for index, did in enumerate(dids):
        split_did_url(did)
        if identity.local_subject(did) is None:
            hosts.setdefault(instance_did(did).lower(), []).append(index)
    for host, indexes in hosts.items():
        if len(indexes) > MAX_DIDS_PER_HOST:
            raise GroupTooLargeError(
                f"{len(indexes)} DIDs of {host}: one request may name at most "
                f"{MAX_DIDS_PER_HOST} of one host"
            )
    refs: dict[int, ParticipantRef] = {}
    overall = asyncio.Semaphore(RESOLVE_CONCURRENCY)
    per_host = {host: asyncio.Semaphore(RESOLVE_CONCURRENCY_PER_HOST) for host in hosts}

    async def remote(host: str, index: int) -> None:
        async with per_host[host], overall:
            refs[index] = ("peer_agent", (await peers.resolve(dids[index])).id)

    tasks = [
        asyncio.create_task(remote(host, index))
        for host, indexes in hosts.items()
        for index in indexes
    ]
    try:
        async with pool.acquire() as conn:
            for index, did in enumerate(dids):
                if identity.local_subject(did) is not None:
                    refs[index] = await _local_participant(conn, identity, did)
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [refs[index] for index in range(len(dids))]


async def check_agent_reachable(conn: asyncpg.Connection, user: User, ref: ParticipantRef) -> None:
    """A local agent joins a conversation only when it is ``user``'s own or public.

    Another user's private agent would otherwise be drawn into a conversation (and answer in
    it) without its owner's consent. Raises AgentNotReachableError (403).
    """
    if ref[0] != "own_agent":
        return
    agent = await users_store.get_agent(conn, id=ref[1])
    if agent is None or not (agent.user_id == user.id or agent.is_public):
        raise AgentNotReachableError("that agent is neither yours nor public")


async def conversation_public(
    conn: asyncpg.Connection,
    conversation: ConversationRow,
    *,
    viewer: User | None = None,
    unread_cache: EphemeralStore | None = None,
    request: str | None = None,
) -> ConversationPublic:
    """The conversation with its participants; with ``viewer``, also their own membership
    (role, notification, last_read_at, exact unread count — cached in ``unread_cache``, see
    :mod:`gateway.services.unread`; 0 while ``request`` says it is a held message request)."""
    rows = await conv_store.list_participants(conn, conversation_id=conversation.id)
    membership = None
    if viewer is not None:
        mine = await conv_store.get_membership(
            conn, conversation_id=conversation.id, user_id=viewer.id
        )
        if mine is not None:
            unread = (
                0
                if request is not None
                else await unread_count(
                    conn,
                    unread_cache,
                    conversation=conversation,
                    membership=mine,
                    user_id=viewer.id,
                )
            )
            membership = MembershipPublic(
                participant_id=mine.id,
                role=mine.role,
                notification=mine.notification,
                last_read_at=mine.last_read_at,
                unread=unread,
            )
    return ConversationPublic(
        **conversation.model_dump(include={"id", "type", "name", "created_by"}),
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
        archived_at=conversation.archived_at,
        participants=[
            ParticipantPublic(
                participant_type=r["participant_type"],
                did=r["did"],
                name=r["name"],
                avatar_url=r["avatar_url"],
                role=r["role"],
                id=r["id"],
                joined_at=r["joined_at"],
                deleted=r["deleted"],
            )
            for r in rows
        ],
        membership=membership,
        request=cast(RequestState, request) if viewer is not None else None,
    )


_DIRECT_KINDS = {
    "direct_user_user": ("user", "peer_agent"),
    "direct_user_agent": ("own_agent", "peer_agent"),
    "direct_agent_agent": ("own_agent", "peer_agent"),
}


async def _speaking_agent(
    conn: asyncpg.Connection, identity: Identity, user: User, agent_did: str | None
) -> ParticipantRef:
    """The caller's agent for a direct_agent_agent conversation (default: the main one)."""
    if agent_did is None:
        agent = await users_store.get_main_agent(conn, user_id=user.id)
        if agent is None:
            raise ValidationFailedError("you have no agent to speak for you")
        return ("own_agent", agent.id)
    ref = await _local_participant(conn, identity, agent_did)
    agent = await users_store.get_agent(conn, id=ref[1]) if ref[0] == "own_agent" else None
    if agent is None or agent.user_id != user.id:
        raise ValidationFailedError("agent_did must be one of your own agents")
    return ref


async def create_direct_conversation(
    pool: asyncpg.Pool,
    identity: Identity,
    peers: PeerDirectory,
    user: User,
    data: ConversationCreate,
) -> tuple[ConversationPublic, bool]:
    """Find or create the direct conversation of ``data.type`` between ``user`` and one DID.

    Returns ``(conversation, created)``. A remote DID is resolved (and cached) first; a local
    one must name an existing user or agent of the kind the type needs (ValidationFailedError
    otherwise). In ``direct_agent_agent`` the caller's agent speaks and the caller observes.
    Concurrent creates of the same pair serialise on an advisory lock: they yield one row.
    """
    assert data.participant_did is not None
    if data.participant_did == user.did:
        raise ValidationFailedError("a direct conversation needs another participant")
    other = await resolve_participant(pool, identity, peers, data.participant_did)
    if other[0] not in _DIRECT_KINDS[data.type]:
        raise ValidationFailedError(f"{data.participant_did} cannot take part in {data.type}")
    async with pool.acquire() as conn, conn.transaction():
        await check_agent_reachable(conn, user, other)
        mine: ParticipantRef = ("user", user.id)
        if data.type == "direct_agent_agent":
            mine = await _speaking_agent(conn, identity, user, data.agent_did)
            if mine == other:
                raise ValidationFailedError("an agent cannot converse with itself")
        await conv_store.lock_direct_pair(
            conn, conv_store.direct_pair_key(("user", user.id), other)
        )
        existing = await conv_store.find_direct_conversation(
            conn, type=data.type, user_id=user.id, other=other
        )
        if existing is not None:
            return await conversation_public(conn, existing, viewer=user), False
        conversation = await conv_store.insert_conversation(
            conn, type=data.type, name=data.name, created_by=user.id
        )
        if mine[0] == "own_agent":
            await conv_store.insert_participant(conn, conversation_id=conversation.id, who=mine)
        role = "observer" if mine[0] == "own_agent" else "admin"
        await conv_store.insert_participant(
            conn, conversation_id=conversation.id, who=("user", user.id), role=role
        )
        await conv_store.insert_participant(conn, conversation_id=conversation.id, who=other)
        if other[0] == "peer_agent":
            await peers_store.upsert_contact(
                conn, user_id=user.id, peer_id=other[1], alias=None, added_via="conversation"
            )
        return await conversation_public(conn, conversation, viewer=user), True


async def get_conversation(
    pool: asyncpg.Pool,
    user: User,
    conversation_id: str,
    unread_cache: EphemeralStore | None = None,
) -> ConversationPublic:
    """A conversation the user takes part in. Raises ConversationNotFoundError otherwise."""
    async with pool.acquire() as conn:
        conversation = await _taking_part(conn, user, conversation_id)
        held = await message_requests.held_conversations(conn, user_id=user.id)
        return await conversation_public(
            conn,
            conversation,
            viewer=user,
            unread_cache=unread_cache,
            request=held.get(conversation_id),
        )


async def list_conversations(
    pool: asyncpg.Pool,
    user: User,
    limit: int,
    unread_cache: EphemeralStore | None = None,
    *,
    requests: bool = False,
) -> list[ConversationPublic]:
    """The user's conversations, most recently active first (unread counts cached in
    ``unread_cache`` when given). Message requests pending or declined are held apart: left
    out, or with ``requests`` listed too (with their ``request`` state and no unread count)."""
    async with pool.acquire() as conn:
        held = await message_requests.held_conversations(conn, user_id=user.id)
        rows = await conv_store.list_conversations_for_user(
            conn, user_id=user.id, limit=limit + (len(held) if not requests else 0)
        )
        listed = [r for r in rows if requests or r.id not in held][:limit]
        return [
            await conversation_public(
                conn, row, viewer=user, unread_cache=unread_cache, request=held.get(row.id)
            )
            for row in listed
        ]


async def check_can_post(
    conn: asyncpg.Connection, conversation: ConversationRow, user: User
) -> None:
    """Raise ConversationArchivedError (409) or ObserverCannotPostError (403) when ``user``
    may not post in ``conversation``. Locks the conversation's row until the transaction
    ends (posts to one conversation serialise on it anyway), so a concurrent archive or
    removal cannot slip in between."""
    archived = await conv_store.lock_conversation_archived_at(conn, conversation_id=conversation.id)
    if archived is not None:
        raise ConversationArchivedError("the conversation is archived (read-only)")
    membership = await conv_store.get_membership(
        conn, conversation_id=conversation.id, user_id=user.id
    )
    if membership is None or membership.role == "observer":
        raise ObserverCannotPostError("observers read but cannot post")


class _Kinds:
    """Conversation id → type, for the conversations this process saw lately. A
    conversation's type never changes, so a remembered one is never stale; at most ``size``
    are kept (the oldest forgotten first)."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._types: dict[str, str] = {}

    def get(self, conversation_id: str, default: str) -> str:
        return self._types.get(conversation_id, default)

    def remember(self, conversation_id: str, type: str) -> None:
        self._types[conversation_id] = type
        if len(self._types) > self._size:
            del self._types[next(iter(self._types))]


_KINDS = _Kinds()


async def check_agent_policy(
    pool: asyncpg.Pool, user: User, conversation_id: str, data: MessageCreate
) -> local_consent.Verdicts:
    """Another user's agent in a direct conversation meets ``user`` with the same verdict as a
    peer (:func:`gateway.services.local_consent.verdict`). A ``deny`` raises
    AgentPolicyDeniedError (403) before anything is stored; the evaluation is audited
    (``policy.evaluated``) either way. Returns the verdicts by agent id, for
    :func:`store_user_message` to hold an ``ask`` without evaluating again."""
    verdicts: local_consent.Verdicts = {}
    if _KINDS.get(conversation_id, "direct_user_agent") != "direct_user_agent":
        return verdicts  # no other user's agent can be in it: spare the connection
    async with pool.acquire() as conn:
        conversation = await conv_store.get_conversation_for_user(
            conn, conversation_id=conversation_id, user_id=user.id
        )
        if conversation is not None:
            _KINDS.remember(conversation_id, conversation.type)
        if conversation is None or conversation.type != "direct_user_agent":
            return verdicts
        for p in await conv_store.list_participants(conn, conversation_id=conversation_id):
            if p["participant_type"] != "own_agent":
                continue
            agent = await users_store.get_agent(conn, id=p["agent_id"])
            if agent is None or agent.user_id == user.id:
                continue
            verdict = await local_consent.verdict(
                conn, agent, user, data.content or "", conversation_id
            )
            if verdict.effect == "deny":
                raise AgentPolicyDeniedError(f"{agent.did} does not accept requests from you")
            verdicts[agent.id] = verdict
    return verdicts


async def post_message(
    pool: asyncpg.Pool,
    hub: EventHub,
    queue: TaskQueue,
    user: User,
    conversation_id: str,
    data: MessageCreate,
    *,
    idempotency_key: str | None = None,
    message_requests_default: bool = True,
    consent_seconds: float = local_consent.DEFAULT_TTL_SECONDS,
    posts: GroupCommit | None = None,
) -> MessagePosted:
    """Store a message from ``user``, queue it for remote participants, push it to devices;
    returns it with its current ``version`` (what a ``PATCH`` names).

    With ``posts``, concurrent posts to one conversation share a transaction (group commit,
    :class:`gateway.db.GroupCommit`), each exactly as if alone; without, each has its own.
    With ``idempotency_key``, a retry with the same body returns the first message and stores
    nothing (IdempotencyKeyReusedError, 422, for a different body under the same key).
    Raises ConversationNotFoundError when the user is not a participant,
    ObserverCannotPostError / ConversationArchivedError, and ValidationFailedError for a
    body that does not fit its content type or an ``in_reply_to`` of another conversation.
    """
    verdicts = await check_agent_policy(pool, user, conversation_id, data)

    async def store(tx: Transaction) -> MessagePosted:
        message = await store_user_message(
            tx,
            hub,
            queue,
            user,
            conversation_id,
            data,
            idempotency_key=idempotency_key,
            message_requests_default=message_requests_default,
            verdicts=verdicts,
            consent_seconds=consent_seconds,
        )
        # A new message is at version 1; only an idempotent retry may return an earlier,
        # since edited, message, so only then is the version looked up.
        version = 1
        if idempotency_key is not None:
            version = await change_store.current_version(tx.conn, message_id=message.id)
        return MessagePosted(**message.__dict__, version=version)  # its fields as they are

    # A post with an idempotency key takes the key's lock before the conversation's
    # (idempotent_message); in a batch, whose earlier works hold the conversation's lock, it
    # would take them the other way round and deadlock with the same key's retry on another
    # process. So it runs alone.
    if posts is not None and idempotency_key is None:
        return await posts.run(pool, conversation_id, store)
    async with transaction(pool) as tx:
        return await store(tx)


async def store_user_message(
    tx: Transaction,
    hub: EventHub,
    queue: TaskQueue,
    user: User,
    conversation_id: str,
    data: MessageCreate,
    *,
    idempotency_key: str | None = None,
    message_requests_default: bool = True,
    verdicts: local_consent.Verdicts | None = None,
    consent_seconds: float = local_consent.DEFAULT_TTL_SECONDS,
) -> Message:
    """The body of :func:`post_message`, inside the caller's unit of work.

    The ``message.created`` event is appended to every local member's stream in ``tx``, and the
    agent tasks the message starts are announced on ``queue``; both reach the bus and the
    workers once ``tx`` commits. Another user's agent answers only as its policy says
    (:func:`gateway.services.local_consent.admit`; ``verdicts`` reached before, requests
    open for ``consent_seconds``). An idempotent retry returns the earlier message and adds
    nothing.
    """
    conn = tx.conn
    validate_message(data)
    if idempotency_key is not None:
        earlier = await idempotent_message(conn, user, conversation_id, data, idempotency_key)
        if earlier is not None:
            return earlier
    content_json = data.content_json
    if data.content_type == "file" and isinstance(content_json, dict):
        # The file's name, type and size are the stored upload's, never the client's claim
        # (what clients show and what peers download it as); its row stays locked until the
        # post commits, so the unsent-upload reaper cannot take it meanwhile.
        content_json = await take_upload(conn, user=user, content_json=content_json)
    extras = data.model_dump(mode="json", include={"citations", "translation"})
    outcome = await messages_store.insert_post(
        conn,
        id=new_id(),
        conversation_id=conversation_id,
        sender_id=user.id,
        sender_did=user.did,
        content=data.content,
        content_type=data.content_type,
        content_json=content_json,
        in_reply_to=data.in_reply_to,
        via=data.via,
        citations=extras["citations"],
        language=data.language,
        translation=extras["translation"],
    )
    conversation, message = _posted(outcome, conversation_id)
    if data.content_type == "file" and isinstance(data.content_json, dict):
        await link_to_message(
            conn,
            attachment_id=str(data.content_json["attachment_id"]),
            user=user,
            message_id=message.id,
        )
    if idempotency_key is not None:
        await change_store.insert_idempotent(
            conn,
            user_id=user.id,
            key=idempotency_key,
            request_hash=request_hash(conversation_id, data),
            message_id=message.id,
        )
    participants = outcome.participants  # as they are under the conversation's lock
    if conversation.type != "group":
        # writing to a stranger who wrote first accepts their request (the accept endpoint's
        # effects and event), so the conversation is in the writer's inbox from now on
        [mine] = [p for p in participants if p["user_id"] == user.id] or [{}]
        await message_requests.accept_by_writing(
            tx,
            hub,
            user_id=user.id,
            conversation_id=conversation_id,
            state=mine.get("request_state"),
            now=message.created_at,
        )
    post = Post(
        message,
        sender_name=user.display_name or user.username,
        conversation_type=conversation.type,
        peers=[p for p in participants if p["participant_type"] == "peer_agent"],
    )
    await queue_for_peers(conn, post)
    local_users = [p["user_id"] for p in participants if p["user_id"]]
    body = message.model_dump(mode="json")
    # A direct conversation of two people; a request is only ever held for the one who did
    # not start it (gateway.services.message_requests), so a reply of theirs holds nothing.
    if conversation.type != "group" and len(local_users) == 2 and len(participants) == 2:
        [other] = [p for p in participants if p["user_id"] != user.id] or participants[:1]
        if other["user_id"] not in (
            user.id,
            conversation.created_by,
        ) and await message_requests.held_for(
            tx,
            hub,
            conversation_id=conversation_id,
            user_id=other["user_id"],
            sender_did=user.did,
            local_sender=True,
            message=body,
            default=message_requests_default,
            conversation=conversation,
            known=requests_store.of_participant(
                other, conversation_id=conversation_id, default=message_requests_default
            ),
        ):
            local_users = [user.id]  # held apart for the other person: no message.created
    await hub.append(
        tx,
        local_users,
        MESSAGE_CREATED,
        body,
        conversation_id=conversation_id,
        text=message.__pydantic_serializer__.to_json(message).decode(),
    )
    # after the message's own event, so a hold's or refusal's notice follows it
    await enqueue_for_message(
        tx,
        queue,
        conversation_id=conversation_id,
        message_id=message.id,
        sender_user_id=user.id,
        text=data.content,
        in_reply_to=data.in_reply_to,
        conversation_type=conversation.type,
        admit=functools.partial(_admit, tx, hub, user, message, verdicts, consent_seconds),
        group_agents=any(p["participant_type"] == "own_agent" for p in participants),
    )
    return message


def _posted(
    outcome: messages_store.PostOutcome, conversation_id: str
) -> tuple[ConversationRow, Message]:
    """The conversation and stored message of ``outcome``, or the error that refused it (the
    same checks, in the same order, as :func:`check_can_post` and the ``in_reply_to`` check)."""
    if outcome.conversation is None:
        raise ConversationNotFoundError(f"no conversation {conversation_id}")
    if outcome.archived:
        raise ConversationArchivedError("the conversation is archived (read-only)")
    if outcome.role == "observer":
        raise ObserverCannotPostError("observers read but cannot post")
    if not outcome.reply_ok:
        raise ValidationFailedError("in_reply_to is not a message of this conversation")
    assert outcome.message is not None
    return outcome.conversation, outcome.message


async def _admit(
    tx: Transaction,
    hub: EventHub,
    user: User,
    message: Message,
    verdicts: local_consent.Verdicts | None,
    consent_seconds: float,
    agents: list[Agent],
) -> list[Agent]:
    return await local_consent.admit(
        tx,
        hub,
        user=user,
        message=message,
        agents=agents,
        verdicts=verdicts,
        ttl_seconds=consent_seconds,
    )


def request_hash(conversation_id: str, data: MessageCreate) -> str:
    """SHA-256 (hex) of the conversation and the canonical request body."""
    canonical = json.dumps(
        [conversation_id, data.model_dump(mode="json")], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


async def idempotent_message(
    conn: asyncpg.Connection, user: User, conversation_id: str, data: MessageCreate, key: str
) -> Message | None:
    """The message an earlier send with ``key`` created (None if none), holding a lock on the
    key until the transaction ends. IdempotencyKeyReusedError when the body differs."""
    await conv_store.lock_direct_pair(conn, f"idempotency:{user.id}:{key}")
    earlier = await change_store.get_idempotent(conn, user_id=user.id, key=key)
    if earlier is None:
        return None
    if earlier["request_hash"] != request_hash(conversation_id, data):
        raise IdempotencyKeyReusedError("this Idempotency-Key was used for a different message")
    message = await messages_store.get_message(conn, id=earlier["message_id"])
    if message is None:
        raise MessageNotFoundError("the message sent with this Idempotency-Key was deleted")
    return message


async def _taking_part(
    conn: asyncpg.Connection, user: User, conversation_id: str
) -> ConversationRow:
    """The conversation ``user`` takes part in. Raises ConversationNotFoundError (404)."""
    conversation = await conv_store.get_conversation_for_user(
        conn, conversation_id=conversation_id, user_id=user.id
    )
    if conversation is None:
        raise ConversationNotFoundError(f"no conversation {conversation_id}")
    return conversation


async def read_states(pool: asyncpg.Pool, user: User, conversation_id: str) -> ReadStateList:
    """Every participant's read state in a conversation of ``user``'s
    (:class:`~models.api.ReadStatePublic`). Raises ConversationNotFoundError (404) when
    ``user`` takes no part in it."""
    async with pool.acquire() as conn:
        await _taking_part(conn, user, conversation_id)
        rows = await conv_store.list_read_states(
            conn, conversation_id=conversation_id, cap=READ_STATE_UNREAD_CAP
        )
    return ReadStateList(items=[ReadStatePublic.model_validate(r) for r in rows])


async def list_messages(
    pool: asyncpg.Pool, user: User, conversation_id: str, *, before: str | None, limit: int
) -> tuple[list[MessageListed], str | None]:
    """A page of messages newest first, and the cursor for the next page (None at the end)."""
    async with pool.acquire() as conn:
        await _taking_part(conn, user, conversation_id)
        items = await messages_store.list_messages(
            conn, conversation_id=conversation_id, before=before, limit=limit + 1
        )
        next_before = items[limit - 1].id if len(items) > limit else None
        return await change_store.listed(conn, items[:limit]), next_before
