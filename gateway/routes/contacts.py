"""Contacts: add by DID, list, read, update (alias, tags, pinned, muted, trust, overrides)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from gateway.deps import Current, State
from gateway.routes.params import Id
from gateway.services import contacts as service
from models.api import ContactCreate, ContactPublic, ContactUpdate

router = APIRouter(tags=["conversations"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such contact (problem+json)"},
    422: {"description": "Invalid input or DID (problem+json)"},
}


@router.post("/v1/contacts", status_code=201, summary="Add a contact by DID", responses=_ERRORS)
async def add_contact(data: ContactCreate, current: Current, state: State) -> ContactPublic:
    """Resolve a DID (did:web, over HTTPS) and add it to the caller's contacts."""
    return await service.add_contact(state.pool, state.peers, current.user, data)


@router.get("/v1/contacts", summary="List contacts", responses=_ERRORS)
async def list_contacts(
    current: Current,
    state: State,
    tag: Annotated[
        str | None, Query(max_length=64, description="Only contacts with this tag")
    ] = None,
) -> list[ContactPublic]:
    """The caller's contacts, pinned first, then oldest first."""
    return await service.list_contacts(state.pool, current.user, tag)


@router.get("/v1/contacts/{contact_id}", summary="One contact", responses=_ERRORS)
async def get_contact(contact_id: Id, current: Current, state: State) -> ContactPublic:
    """One of the caller's contacts."""
    return await service.get_contact(state.pool, current.user, contact_id)


@router.patch("/v1/contacts/{contact_id}", summary="Update a contact", responses=_ERRORS)
async def update_contact(
    contact_id: Id, data: ContactUpdate, current: Current, state: State
) -> ContactPublic:
    """Change alias, tags, pinned, muted, trust level or policy overrides (fields sent only)."""
    return await service.update_contact(state.pool, current.user, contact_id, data)


@router.delete(
    "/v1/contacts/{contact_id}", status_code=204, summary="Remove a contact", responses=_ERRORS
)
async def remove_contact(contact_id: Id, current: Current, state: State) -> Response:
    """Remove a contact; its conversations stay."""
    await service.remove_contact(state.pool, current.user, contact_id)
    return Response(status_code=204)
