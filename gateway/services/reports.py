"""Reports and the moderation queue: users report a message, a user or a peer; admins resolve.

A report (``POST /v1/reports``) names its target and a category, with optional text (at most
2,000 characters); a user may file ``CONFER_RATE_LIMIT_REPORTS`` of them. A reported message
must be one the reporter can read, and its content is kept in the report as it was
(``snapshot``): a peer's message may be edited or deleted on its instance, and the admin still
sees what was reported. Admins list the queue and resolve a report with an action —
``dismiss``, ``delete_message`` (our copy; a local author's delete reaches peers as usual),
``block_peer`` (the peer's domain goes on the instance deny list, ``services.federation_policy``;
an ``open`` instance switches to ``denylist``), ``suspend_user`` (a local user is disabled, as
``POST /v1/admin/users/{id}/disable``). Each filing and resolution is audited, and the reporter
hears the outcome as a ``report.resolved`` event on their stream.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from did.errors import InvalidDIDError
from did.web import did_host
from gateway.clock import Clock
from gateway.db import Transaction, transaction
from gateway.errors import MessageNotFoundError, NotFoundError, ValidationFailedError
from gateway.realtime.hub import EventHub
from gateway.services import admin, federation_policy
from gateway.services.did_budget import host_of
from gateway.services.identity import Identity
from gateway.services.messages import remove_message
from gateway.services.ratelimits import REPORT_USER, RateLimiter
from gateway.storage import AttachmentStorage
from gateway.store import audit as audit_store
from gateway.store import conversations as conv_store
from gateway.store import federation_policy as policy_store
from gateway.store import messages as messages_store
from gateway.store import reports as store
from gateway.store import users as users_store
from models import User
from models.moderation_api import ReportCreate, ReportPublic, ReportResolve

REPORT_RESOLVED = "report.resolved"


def public(row: dict[str, Any]) -> ReportPublic:
    """The API view of a report row."""
    data = dict(row)
    data["snapshot"] = data.pop("snapshot_json")
    return ReportPublic.model_validate(data)


async def _target(
    conn: asyncpg.Connection, identity: Identity, reporter: User, data: ReportCreate
) -> dict[str, Any]:
    """The report's target columns and snapshot. Raises ValidationFailedError and
    MessageNotFoundError (a message the reporter cannot read)."""
    if data.target_type == "message":
        if data.message_id is None:
            raise ValidationFailedError("a message report names message_id")
        message = await messages_store.get_message(conn, id=data.message_id)
        if message is None or not await conv_store.get_membership(
            conn, conversation_id=message.conversation_id, user_id=reporter.id
        ):
            raise MessageNotFoundError(f"no message {data.message_id} you can read")
        local = message.sender_type == "user"
        snapshot = message.model_dump(
            mode="json",
            include={"conversation_id", "sender_type", "sender_did", "content_type", "content"},
        ) | {"content_json": message.content_json, "created_at": message.created_at.isoformat()}
        return {
            "message_id": message.id,
            "target_user_id": message.sender_id if local else None,
            "target_did": message.sender_did,
            "snapshot": snapshot,
        }
    if data.did is None and (data.target_type == "user" or data.domain is None):
        raise ValidationFailedError(f"a {data.target_type} report names did")
    if data.did is None:
        assert data.domain is not None
        return {"target_did": federation_policy.normalise_pattern(data.domain)}
    try:
        did_host(data.did)
    except InvalidDIDError as exc:
        raise ValidationFailedError(f"not a did:web DID: {exc.detail}") from exc
    subject = identity.local_subject(data.did)
    user_id = None
    if subject is not None and subject[0] == "users":
        user = await users_store.get_user_by_username(conn, username=subject[1])
        user_id = user.id if user is not None and user.did == data.did else None
    return {"target_user_id": user_id, "target_did": data.did}


async def file_report(
    pool: asyncpg.Pool,
    identity: Identity,
    limiter: RateLimiter,
    reporter: User,
    data: ReportCreate,
    ip: str | None,
) -> ReportPublic:
    """Store a report (audited ``report.filed``). Raises RateLimitedError (429) over the
    user's budget, and as :func:`_target`."""
    await limiter.check(REPORT_USER, reporter.id)
    async with transaction(pool) as tx:
        target = await _target(tx.conn, identity, reporter, data)
        row = await store.insert_report(
            tx.conn,
            reporter_id=reporter.id,
            target_type=data.target_type,
            message_id=target.get("message_id"),
            target_user_id=target.get("target_user_id"),
            target_did=target.get("target_did"),
            category=data.category,
            text=data.text,
            snapshot=target.get("snapshot"),
        )
        await audit_store.insert_audit(
            tx.conn,
            action="report.filed",
            user_id=reporter.id,
            details={"report_id": row["id"], "target_type": data.target_type},
            ip_address=ip,
        )
    await limiter.count(REPORT_USER, reporter.id)
    return public(row)


async def list_reports(
    pool: asyncpg.Pool, *, status: str | None, before: str | None, limit: int
) -> list[ReportPublic]:
    """The moderation queue (or every report), newest first."""
    async with pool.acquire() as conn:
        return [
            public(r)
            for r in await store.list_reports(conn, status=status, before=before, limit=limit)
        ]


async def resolve(
    pool: asyncpg.Pool,
    hub: EventHub,
    clock: Clock,
    storage: AttachmentStorage,
    policy: federation_policy.FederationPolicy,
    *,
    admin_id: str,
    report_id: str,
    data: ReportResolve,
    ip: str | None,
) -> ReportPublic:
    """Resolve an open report with ``data.action`` (module docstring); audited
    ``admin.report.resolved``, the reporter told by ``report.resolved``. Raises NotFoundError,
    ValidationFailedError (the action does not fit the target or the report is closed)."""
    async with pool.acquire() as conn:
        report = await store.get_report_for_update(conn, id=report_id)
    if report is None:
        raise NotFoundError(f"no report {report_id}")
    if report["status"] != "open":
        raise ValidationFailedError("the report is already resolved")
    if data.action == "suspend_user":
        if report["target_user_id"] is None:
            raise ValidationFailedError("suspend_user needs a reported local user")
        await admin.set_disabled(
            pool,
            clock,
            admin_id=admin_id,
            user_id=report["target_user_id"],
            disabled=True,
            reason=f"report {report_id}",
            ip=ip,
        )
    async with transaction(pool) as tx:
        locked = await store.get_report_for_update(tx.conn, id=report_id)
        if locked is None or locked["status"] != "open":
            raise ValidationFailedError("the report is already resolved")
        details = await _act(pool, tx, hub, clock, storage, policy, report, data, admin_id)
        row = await store.resolve_report(
            tx.conn,
            id=report_id,
            action=data.action,
            note=data.note,
            resolved_by=admin_id,
            now=clock.now(),
        )
        await audit_store.insert_audit(
            tx.conn,
            action="admin.report.resolved",
            user_id=admin_id,
            details={"report_id": report_id, "action": data.action, **details},
            ip_address=ip,
        )
        outcome = {"report_id": report_id, "action": data.action, "status": "resolved"}
        await hub.append(tx, [report["reporter_id"]], REPORT_RESOLVED, outcome)
    return public(row)


async def _act(
    pool: asyncpg.Pool,
    tx: Transaction,
    hub: EventHub,
    clock: Clock,
    storage: AttachmentStorage,
    policy: federation_policy.FederationPolicy,
    report: dict[str, Any],
    data: ReportResolve,
    admin_id: str,
) -> dict[str, Any]:
    """Carry out ``delete_message`` or ``block_peer`` in ``tx``; what the audit row adds."""
    if data.action == "delete_message":
        message = (
            await messages_store.get_message(tx.conn, id=report["message_id"])
            if report["message_id"]
            else None
        )
        if message is None:
            raise ValidationFailedError("delete_message needs a reported message still there")
        local = message.sender_type in ("user", "own_agent")
        await remove_message(tx, hub, storage, message.conversation_id, message.id, federate=local)
        return {"message_id": message.id}
    if data.action == "block_peer":
        target = report["target_did"]
        if target is None:
            raise ValidationFailedError("block_peer needs a reported peer")
        pattern = host_of(target) if target.startswith("did:") else target
        await federation_policy.put_entry(
            pool,
            clock,
            pattern=pattern,
            list_name="deny",
            note=f"report {report['id']}",
            actor_id=admin_id,
            conn=tx.conn,
        )
        if await policy_store.get_mode(tx.conn) == "open":
            await policy_store.set_mode(tx.conn, mode="denylist", now=clock.now())
        tx.call_after(lambda: policy.reload(pool))
        return {"pattern": pattern}
    return {}
