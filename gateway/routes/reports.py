"""Reports (``/v1/reports``) and the admin's moderation queue (``/v1/admin/reports``);
``services.reports`` has the rules."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from gateway.deps import Current, State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from gateway.routes.admin import Admin, Before, Limit
from gateway.routes.params import Id
from gateway.services import reports as service
from gateway.storage import attachment_storage
from models.moderation_api import ReportCreate, ReportPage, ReportPublic, ReportResolve

router = APIRouter(responses=problems(401, 422))


@router.post(
    "/v1/reports",
    summary="Report a message, a user or a peer",
    status_code=201,
    responses=problems(404, 429),
)
async def file_report(
    data: ReportCreate, current: Current, request: Request, state: State
) -> ReportPublic:
    """File a report for the admins (rate limited per user: 429 with Retry-After)."""
    return await service.file_report(
        state.pool, state.identity, state.accounts.limiter, current.user, data, client_ip(request)
    )


@router.get(
    "/v1/admin/reports", summary="The moderation queue", tags=["admin"], responses=problems(403)
)
async def list_reports(
    _: Admin,
    state: State,
    status: Annotated[Literal["open", "resolved"] | None, Query()] = "open",
    before: Before = None,
    limit: Limit = 100,
) -> ReportPage:
    """Reports newest first: open ones by default, with the reported message's snapshot."""
    items = await service.list_reports(state.pool, status=status, before=before, limit=limit)
    return ReportPage(items=items)


@router.post(
    "/v1/admin/reports/{report_id}/resolve",
    summary="Resolve a report",
    tags=["admin"],
    responses=problems(403, 404),
)
async def resolve_report(
    report_id: Id, data: ReportResolve, current: Admin, request: Request, state: State
) -> ReportPublic:
    """Dismiss, delete the message, block the peer or suspend the user; audited, and the
    reporter gets a ``report.resolved`` event."""
    return await service.resolve(
        state.pool,
        state.hub,
        state.clock,
        attachment_storage(state.settings),
        state.federation_policy,
        admin_id=current.user.id,
        report_id=report_id,
        data=data,
        ip=client_ip(request),
    )
