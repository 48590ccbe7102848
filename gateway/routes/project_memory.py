"""Versioned project memory shared with a peer agent (the server side of ``.claude/peers/``).

``GET`` returns the document with ``ETag: "<version>"``; ``PUT`` replaces it and must carry
``If-Match: "<version>"`` (412 when stale, 428 when missing) unless it creates the document.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response

from gateway.deps import Current, State
from gateway.errors import BadRequestError, PreconditionFailedError
from gateway.services import project_memory as service
from models.api import DID
from models.context import ProjectMemoryPublic, ProjectMemoryVersionPublic, ProjectMemoryWrite

router = APIRouter(tags=["memory"])

ProjectId = Annotated[str, Path(pattern=service.PROJECT_ID_PATTERN)]
PeerDid = Annotated[DID, Query(description="The peer agent's DID (one of your contacts)")]
_ETAG = re.compile(r'^"(\d{1,9})"$')
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "Not a contact, or no document yet (problem+json)"},
    409: {"description": "base_version is stale (problem+json)"},
    412: {"description": "If-Match is stale (problem+json)"},
    428: {"description": "The document exists; send If-Match (problem+json)"},
}


def _if_match(value: str | None) -> int | None:
    """The version an ``If-Match`` names. RFC 9110 §13.1.1 compares strongly: a weak tag
    (``W/"3"``) never matches (412); anything but one quoted version is 400."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("W/"):
        raise PreconditionFailedError(
            "If-Match uses strong comparison (RFC 9110 §13.1.1): a weak entity tag never"
            ' matches; send the ETag you read, e.g. "3"'
        )
    match = _ETAG.match(value)
    if match is None:
        raise BadRequestError('If-Match must be the ETag you read, e.g. "3"')
    return int(match.group(1))


def _etag(response: Response, document: ProjectMemoryPublic) -> ProjectMemoryPublic:
    response.headers["ETag"] = f'"{document.version}"'
    return document


@router.get("/v1/project-memory/{project_id}", summary="Read project memory", responses=_ERRORS)
async def read_project_memory(
    project_id: ProjectId, peer: PeerDid, current: Current, state: State, response: Response
) -> ProjectMemoryPublic:
    """The current document and its version (also in ``ETag``)."""
    async with state.pool.acquire() as conn:
        document = await service.read(conn, current.user, project_id, peer)
    return _etag(response, document)


@router.put(
    "/v1/project-memory/{project_id}",
    summary="Write project memory",
    responses={**_ERRORS, 201: {"description": "Created (version 1)"}},
)
async def write_project_memory(
    project_id: ProjectId,
    peer: PeerDid,
    data: ProjectMemoryWrite,
    current: Current,
    state: State,
    response: Response,
    if_match: Annotated[str | None, Header()] = None,
) -> ProjectMemoryPublic:
    """Replace the whole document; name the version you read in ``If-Match``."""
    document, created = await service.write(
        state.pool, current.user, project_id, peer, data, if_match=_if_match(if_match), via="api"
    )
    if created:
        response.status_code = 201
    return _etag(response, document)


@router.get(
    "/v1/project-memory/{project_id}/versions",
    summary="Project memory history",
    responses=_ERRORS,
)
async def project_memory_history(
    project_id: ProjectId, peer: PeerDid, current: Current, state: State
) -> list[ProjectMemoryVersionPublic]:
    """Every version of the document, newest first."""
    return await service.history(state.pool, current.user, project_id, peer)
