"""The instance federation policy in the admin API (OpenAPI tag ``admin``).

``GET /v1/admin/federation/policy`` shows the mode and the lists, ``PATCH`` sets the mode,
``POST …/entries`` and ``DELETE …/entries/{pattern}`` edit the lists; every change is audited
and reaches every gateway process at once (``services.federation_policy``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from gateway.deps import State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from gateway.routes.admin import Admin
from gateway.services import federation_policy as service
from gateway.store import federation_policy as store
from models.moderation_api import (
    FederationPolicyPublic,
    PolicyEntryCreate,
    PolicyEntryPublic,
    PolicyModeUpdate,
)

router = APIRouter(prefix="/v1/admin/federation", tags=["admin"], responses=problems(401, 403, 422))


async def _current(state: State) -> FederationPolicyPublic:
    async with state.pool.acquire() as conn:
        mode = await store.get_mode(conn)
        entries = await store.list_entries(conn)
    return FederationPolicyPublic.model_validate(
        {"mode": mode, "entries": [vars(e) for e in entries]}
    )


@router.get("/policy", summary="The instance federation policy")
async def get_policy(_: Admin, state: State) -> FederationPolicyPublic:
    """The mode and every allow and deny entry, as stored."""
    return await _current(state)


@router.patch("/policy", summary="Set the federation mode")
async def set_mode(
    data: PolicyModeUpdate, current: Admin, request: Request, state: State
) -> FederationPolicyPublic:
    """``open``, ``denylist`` or ``allowlist``; audited as ``admin.federation.mode``."""
    await service.set_mode(
        state.pool,
        state.clock,
        mode=data.mode,
        actor_id=current.user.id,
        ip=client_ip(request),
        policy=state.federation_policy,
    )
    return await _current(state)


@router.post("/policy/entries", summary="Allow or deny a domain or DID", status_code=201)
async def put_entry(
    data: PolicyEntryCreate, current: Admin, request: Request, state: State
) -> PolicyEntryPublic:
    """Put a domain, ``*.domain`` or DID on the allow or deny list (422 when malformed);
    audited as ``admin.federation.allow`` / ``admin.federation.deny``."""
    row = await service.put_entry(
        state.pool,
        state.clock,
        pattern=data.pattern,
        list_name=data.list,
        note=data.note,
        actor_id=current.user.id,
        ip=client_ip(request),
        policy=state.federation_policy,
    )
    return PolicyEntryPublic.model_validate(vars(row))


@router.delete("/policy/entries/{pattern}", summary="Remove an entry", responses=problems(404))
async def remove_entry(
    pattern: Annotated[str, Path(max_length=255)], current: Admin, request: Request, state: State
) -> PolicyEntryPublic:
    """Take the entry off its list (404 when on neither); audited as
    ``admin.federation.remove``."""
    row = await service.remove_entry(
        state.pool,
        pattern=pattern,
        actor_id=current.user.id,
        ip=client_ip(request),
        policy=state.federation_policy,
    )
    return PolicyEntryPublic.model_validate(vars(row))
