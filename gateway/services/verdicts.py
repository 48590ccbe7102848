"""One policy verdict for a request to a local agent, whoever the requester is.

Signed peers (:mod:`gateway.services.federation`) and API-key callers
(:mod:`gateway.services.key_consent`) differ only in who they are and which earlier
``allow_always`` grant applies; the evaluation, the grant reuse for L2 and the
``policy.evaluated`` audit row are the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from gateway.services import policy
from gateway.services.contacts import ContactSettings
from gateway.store import audit as audit_store
from gateway.store import users as users_store
from models import PermissionRow

GrantLookup = Callable[[], Awaitable[PermissionRow | None]]


async def agent_verdict(
    conn: asyncpg.Connection,
    *,
    agent_id: str,
    owner_id: str,
    settings: ContactSettings,
    requester_did: str,
    action: str,
    text: str,
    find_grant: GrantLookup,
    audit: dict[str, Any] | None = None,
) -> policy.Verdict:
    """Evaluate the agent's ``PolicyConfig`` merged with ``settings`` for ``requester_did``.

    An L2 ``ask`` becomes ``allow`` when ``find_grant`` returns a live ``allow_always`` in scope.
    Writes the ``policy.evaluated`` audit row (``audit`` adds details). Returns the verdict.
    """
    agent = await users_store.get_agent(conn, id=agent_id)
    assert agent is not None
    verdict = policy.evaluate(
        agent.policies,
        settings.overrides,
        trust_level=settings.trust_level,
        peer_did=requester_did,
        action=action,
        text=text,
    )
    if verdict.effect == "ask" and verdict.level == "L2":
        grant = await find_grant()
        if grant is not None:
            verdict = policy.Verdict("allow", verdict.level, f"allow_always {grant.id}")
    await audit_store.insert_audit(
        conn,
        action="policy.evaluated",
        user_id=owner_id,
        details={
            "peer": requester_did,
            **(audit or {}),
            "action": action,
            **dataclasses.asdict(verdict),
        },
    )
    return verdict
