"""File uploads and downloads (multipart/form-data, field ``file``), and the signed GET by which
a receiving instance fetches the file of a ``file`` message it was sent."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, File, UploadFile
from fastapi.responses import StreamingResponse

from did.web import instance_did
from gateway.deps import Current, State
from gateway.federation_auth import SignedFetch
from gateway.routes.params import Id
from gateway.services import attachments as service
from gateway.storage import opened
from models.api import AttachmentPublic

router = APIRouter(tags=["conversations"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such attachment, or not yours to see (problem+json)"},
    409: {
        "description": "A peer's file not fetched (yet): attachment_pending or "
        "attachment_unavailable (problem+json)"
    },
    413: {
        "description": "Larger than CONFER_ATTACHMENT_MAX_BYTES (payload_too_large), or past "
        "the user's CONFER_ATTACHMENT_QUOTA_BYTES (attachment_quota_exceeded) (problem+json)"
    },
    422: {"description": "Invalid input (problem+json)"},
    429: {"description": "Too many uploads (CONFER_RATE_LIMIT_UPLOADS): rate_limited"},
    503: {"description": "The attachment storage is unavailable: storage_unavailable"},
}


@router.post("/v1/attachments", status_code=201, summary="Upload a file", responses=_ERRORS)
async def upload_attachment(
    file: Annotated[UploadFile, File(description="The file")], current: Current, state: State
) -> AttachmentPublic:
    """Store a file (SHA-256 computed while streaming); send it with a ``file`` message whose
    ``content_json.attachment_id`` is the returned ``id``. Counts against the user's quota
    until its message is deleted; an upload never sent is deleted after
    CONFER_ATTACHMENT_ORPHAN_SECONDS."""
    row = await service.upload(
        state.pool,
        state.storage,
        state.accounts.limiter,
        current.user,
        filename=file.filename or "",
        content_type=file.content_type,
        read=file.read,
        max_bytes=state.settings.attachment_max_bytes,
        quota_bytes=state.settings.attachment_quota_bytes,
    )
    return AttachmentPublic(**row.model_dump(include=set(AttachmentPublic.model_fields)))


@router.get(
    "/v1/attachments/{attachment_id}",
    summary="Download a file",
    responses={**_ERRORS, 200: {"content": {"application/octet-stream": {}}}},
    response_class=StreamingResponse,
)
async def download_attachment(
    attachment_id: Id, current: Current, state: State
) -> StreamingResponse:
    """The file, for its uploader or the participants of its message's conversation, streamed
    through the gateway from whichever storage holds it (never a redirect to the store). A file
    a peer sent answers 409 ``attachment_pending`` until it is fetched from the sender's
    instance, and 409 ``attachment_unavailable`` when that failed for good."""
    row = await service.get_for_download(state.pool, current.user, attachment_id)
    assert row.storage_url is not None
    return StreamingResponse(
        await opened(state.storage, row.storage_url),
        media_type=row.content_type or "application/octet-stream",
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(row.filename)}",
            "Content-Length": str(row.size_bytes or 0),
            "X-Content-Type-Options": "nosniff",
            "Digest-SHA256": row.sha256 or "",
            # private bytes behind a session: no shared or browser cache may keep them
            "Cache-Control": "no-store",
        },
    )


@router.get(
    "/federation/attachments/{attachment_id}",
    tags=["federation"],
    summary="A file, for a receiving instance",
    responses={
        401: {"description": "Not signed per RFC 9421, or the signature fails (problem+json)"},
        403: {"description": "The signing instance has no participant there (problem+json)"},
        503: {"description": "The attachment storage is unavailable: storage_unavailable"},
        200: {"content": {"application/octet-stream": {}}},
    },
    response_class=StreamingResponse,
)
async def fetch_attachment(attachment_id: Id, peer: SignedFetch, state: State) -> StreamingResponse:
    """The bytes of a ``file`` message's attachment, for an instance that received the message:
    the GET must be signed (RFC 9421 §3.1, covering ``@method @authority @path @query``) by a
    key of an instance with a participant in the message's conversation. The receiver checks
    the bytes against the SHA-256 the message declared."""
    signer = instance_did(peer.peer.did)
    row = await service.get_for_instance(state.pool, signer, attachment_id)
    assert row.storage_url is not None
    return StreamingResponse(
        await opened(state.storage, row.storage_url),
        media_type=row.content_type or "application/octet-stream",
        headers={
            "Content-Length": str(row.size_bytes or 0),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )
