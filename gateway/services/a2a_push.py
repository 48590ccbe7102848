"""A2A push notifications: the per-task webhook configs a caller manages (A2A 1.0 §4.3, §9).

``CreateTaskPushNotificationConfig`` / ``Get…`` / ``List…`` / ``Delete…`` and
``SendMessageConfiguration.taskPushNotificationConfig`` land here. A config belongs to one of
the caller's tasks; another caller's task (or config) is TaskNotFound, exactly like a missing
one. Bounds, checked before anything is written: the URL (``http(s)``, at most
:data:`a2a.protocol.MAX_PUSH_URL_CHARS`, no user info; plain ``http`` only with
``allow_http``; a literal address must pass the outbound address policy — a host name is
checked, and pinned, at every delivery), the token and credentials (visible ASCII, bounded),
and ``max_configs`` per task.

Each task update queues its ``StreamResponse`` for every enabled config in the transaction
that changed the task (:func:`gateway.services.tasks.record_update`); the push worker
(:mod:`gateway.workers.a2a_push`) delivers them. A config that keeps failing is disabled; Get and
List show that in a ``confer`` member (unknown members are ignored by A2A clients, §4.5).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from a2a.protocol import (
    InvalidParamsError,
    ListPushConfigsParams,
    PushConfigIdParams,
    PushConfigParams,
    TaskNotFoundError,
)
from did.outbound import OutboundPolicy
from gateway.db import transaction
from gateway.ids import new_id
from gateway.services.tasks import task_json, timestamp
from gateway.store import a2a_push as store
from gateway.store import tasks as tasks_store
from gateway.store.a2a_push import PushConfigRow


@dataclass(frozen=True)
class PushRules:
    """What a webhook config may be: ``max_configs`` per task; ``allow_http`` plain-http URLs
    (development); ``policy`` the outbound address policy for literal addresses."""

    max_configs: int = 10
    allow_http: bool = False
    policy: OutboundPolicy = field(default_factory=OutboundPolicy)


def check_url(url: str, rules: PushRules) -> None:
    """Raise InvalidParamsError (-32602) unless ``url`` may be a webhook (module docstring)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError as exc:
        raise InvalidParamsError("url: not a URL") from exc
    schemes = ("https", "http") if rules.allow_http else ("https",)
    if parts.scheme not in schemes:
        raise InvalidParamsError(f"url: the scheme must be {' or '.join(schemes)}")
    if not host or parts.username is not None or parts.password is not None:
        raise InvalidParamsError("url: needs a host and no user info")
    if parts.fragment or any(c.isspace() or ord(c) < 0x21 for c in url):
        raise InvalidParamsError("url: no fragment, spaces or control characters")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return  # a name: resolved, checked and pinned at every delivery
    if not rules.policy.allows(address):
        raise InvalidParamsError(f"url: {address} is refused by the outbound address policy")


def config_json(row: PushConfigRow) -> dict[str, Any]:
    """The ``TaskPushNotificationConfig`` as A2A clients read it, plus its delivery health in
    ``confer`` (``active``, ``failures``, ``lastError``, ``disabledAt``)."""
    config: dict[str, Any] = {"id": row.id, "taskId": row.task_id, "url": row.url}
    if row.token is not None:
        config["token"] = row.token
    if row.auth_scheme is not None:
        authentication = {"scheme": row.auth_scheme}
        if row.auth_credentials is not None:
            authentication["credentials"] = row.auth_credentials
        config["authentication"] = authentication
    health: dict[str, Any] = {"active": row.disabled_at is None, "failures": row.failures}
    if row.last_error:
        health["lastError"] = row.last_error
    if row.disabled_at is not None:
        health["disabledAt"] = timestamp(row.disabled_at)
    config["confer"] = health
    return config


async def create_config(
    pool: asyncpg.Pool,
    caller: str,
    task_id: str,
    config: PushConfigParams,
    rules: PushRules,
    *,
    send_task: bool = False,
) -> dict[str, Any]:
    """Create (or, for an existing ``id``, replace) a config of the caller's task.

    Without an ``id`` the server names it; the same URL and token again returns the existing
    config (a retried create). ``send_task`` also queues the task as it is now
    (``{"task": Task}``) for the new config: a config given with ``SendMessage`` learns the
    state the message left the task in. Raises TaskNotFoundError, InvalidParamsError
    (``taskId`` names another task, or the task has ``rules.max_configs`` already).
    """
    if config.taskId is not None and config.taskId != task_id:
        raise InvalidParamsError("taskId does not match the task")
    auth = config.authentication
    async with transaction(pool) as tx:
        conn = tx.conn
        if not await store.lock_task(conn, task_id=task_id, caller=caller):
            raise TaskNotFoundError(f"no task {task_id}")
        config_id = config.id or await store.find_config_by_target(
            conn, task_id=task_id, url=config.url, token=config.token
        )
        exists = config_id is not None and (
            await store.get_config(conn, task_id=task_id, id=config_id, caller=caller)
        )
        if not exists and await store.count_configs(conn, task_id=task_id) >= rules.max_configs:
            raise InvalidParamsError(
                f"a task has at most {rules.max_configs} push notification configs"
            )
        row = await store.upsert_config(
            conn,
            task_id=task_id,
            id=config_id or new_id(),
            url=config.url,
            token=config.token,
            auth_scheme=auth.scheme if auth else None,
            auth_credentials=auth.credentials if auth else None,
        )
        if send_task:
            task = await tasks_store.get_task(conn, id=task_id, caller=caller)
            assert task is not None  # locked above
            await store.queue_notifications(
                conn,
                ids=[new_id()],
                task_id=task_id,
                payload={"task": task_json(task)},
                config_id=row.id,
            )
    return config_json(row)


async def get_config(pool: asyncpg.Pool, caller: str, params: PushConfigIdParams) -> dict[str, Any]:
    """The caller's config. Raises TaskNotFoundError (no such task or config of the caller)."""
    async with pool.acquire() as conn:
        row = await store.get_config(conn, task_id=params.taskId, id=params.id, caller=caller)
    if row is None:
        raise TaskNotFoundError(f"no push notification config {params.id} on task {params.taskId}")
    return config_json(row)


async def list_configs(
    pool: asyncpg.Pool, caller: str, params: ListPushConfigsParams
) -> dict[str, Any]:
    """``ListTaskPushNotificationConfigsResponse``: ``configs`` by id, ``nextPageToken``
    (the last id of a full page; "" at the end). Raises TaskNotFoundError."""
    async with pool.acquire() as conn:
        if await tasks_store.get_task(conn, id=params.taskId, caller=caller) is None:
            raise TaskNotFoundError(f"no task {params.taskId}")
        rows = await store.list_configs(
            conn,
            task_id=params.taskId,
            caller=caller,
            after=params.pageToken or None,
            limit=params.pageSize + 1,
        )
    more = len(rows) > params.pageSize
    rows = rows[: params.pageSize]
    return {
        "configs": [config_json(r) for r in rows],
        "nextPageToken": rows[-1].id if more else "",
    }


async def delete_config(
    pool: asyncpg.Pool, caller: str, params: PushConfigIdParams
) -> dict[str, Any]:
    """Delete the caller's config and what is queued for it → ``{}`` (``Empty``).

    Raises TaskNotFoundError (the task or the config is not the caller's)."""
    async with pool.acquire() as conn:
        deleted = await store.delete_config(
            conn, task_id=params.taskId, id=params.id, caller=caller
        )
    if not deleted:
        raise TaskNotFoundError(f"no push notification config {params.id} on task {params.taskId}")
    return {}
