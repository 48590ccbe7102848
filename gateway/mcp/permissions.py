"""MCP write tool ``confer_decide_permission``: the owner's consent decision, audited.

The decision goes through :func:`gateway.services.consent.decide_in` inside
:func:`gateway.mcp.audit.audited_write`, so the decision, the delivery or refusal it causes and
the ``mcp_audit_log`` row commit together (MCP server spec). An expired request is resolved as
denied after the failed transaction, exactly as ``POST /v1/permissions/{id}/decision`` does.
"""

from __future__ import annotations

from typing import Any

from gateway.db import Transaction
from gateway.mcp.audit import audited_write
from gateway.mcp.deps import ToolDeps
from gateway.services import consent
from models import User
from models.federation_api import PermissionDecisionCreate


async def decide_permission(
    deps: ToolDeps,
    user: User,
    *,
    permission_id: str,
    decision: str,
    scope: str | None,
    agent: str,
) -> dict[str, Any]:
    """Decide one of the user's pending requests: ``decision`` allow_once | allow_always |
    deny, ``scope`` peer | peer_action | global (allow_always defaults to peer_action).

    Returns ``{"ok": True, "permission": PermissionRow, "audit_id"}`` or the failure shape of
    :func:`audited_write` (codes ``validation_failed``, ``permission_not_found``,
    ``permission_decided``, ``permission_expired``).
    """
    payload = {"permission_id": permission_id, "decision": decision, "scope": scope}
    deciding = deps.deciding

    async def action(tx: Transaction) -> tuple[dict[str, Any], str | None]:
        data = PermissionDecisionCreate.model_validate({"decision": decision, "scope": scope})
        outcome = await consent.decide_in(
            tx, deciding, user, permission_id, data.decision, data.scope
        )
        return {"permission": outcome.permission.model_dump(mode="json")}, outcome.permission.id

    # the decision's events and the agent's answer go out once the audited write has committed
    result = await audited_write(
        deps.pool,
        user_id=user.id,
        agent=agent,
        tool_name="confer_decide_permission",
        payload=payload,
        target_table="permissions",
        action=action,
    )
    if not result["ok"] and result["code"] == "permission_expired":
        await consent.expire(deps.pool, deciding, permission_id)
    return result
