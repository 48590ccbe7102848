"""File uploads and downloads (multipart/form-data, field ``file``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, File, UploadFile
from fastapi.responses import StreamingResponse

from gateway.deps import Current, State
from gateway.routes.conversations import checked_id
from gateway.services import attachments as service
from gateway.storage import LocalStorage
from models.api import AttachmentPublic

router = APIRouter(tags=["conversations"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such attachment, or not yours to see (problem+json)"},
    413: {"description": "Larger than CONFER_ATTACHMENT_MAX_BYTES (problem+json)"},
    422: {"description": "Invalid input (problem+json)"},
}


def _storage(state: State) -> LocalStorage:
    settings = state.settings
    return LocalStorage(Path(settings.attachments_dir or settings.data_dir / "attachments"))


@router.post("/v1/attachments", status_code=201, summary="Upload a file", responses=_ERRORS)
async def upload_attachment(
    file: Annotated[UploadFile, File(description="The file")], current: Current, state: State
) -> AttachmentPublic:
    """Store a file (SHA-256 computed while streaming); send it with a ``file`` message whose
    ``content_json.attachment_id`` is the returned ``id``."""
    row = await service.upload(
        state.pool,
        _storage(state),
        current.user,
        filename=file.filename or "",
        content_type=file.content_type,
        read=file.read,
        max_bytes=state.settings.attachment_max_bytes,
    )
    return AttachmentPublic(**row.model_dump(exclude={"storage_url", "user_id"}))


@router.get(
    "/v1/attachments/{attachment_id}",
    summary="Download a file",
    responses={**_ERRORS, 200: {"content": {"application/octet-stream": {}}}},
    response_class=StreamingResponse,
)
async def download_attachment(
    attachment_id: str, current: Current, state: State
) -> StreamingResponse:
    """The file, for its uploader or the participants of its message's conversation."""
    row = await service.get_for_download(state.pool, current.user, checked_id(attachment_id))
    return StreamingResponse(
        _storage(state).open(row.storage_url),
        media_type=row.content_type or "application/octet-stream",
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(row.filename)}",
            "Content-Length": str(row.size_bytes or 0),
            "X-Content-Type-Options": "nosniff",
            "Digest-SHA256": row.sha256 or "",
        },
    )
