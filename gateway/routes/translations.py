"""Ask for a message in another language (stored as a linked variant, reused when asked again)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from gateway.deps import Current, State
from gateway.errors import ValidationFailedError
from gateway.ids import is_ulid
from gateway.services.translation import translate_message
from models.translation import MessageTranslation, TranslationCreate

router = APIRouter(tags=["conversations"])


@router.post(
    "/v1/conversations/{conversation_id}/messages/{message_id}/translation",
    status_code=201,
    summary="Translate a message",
    responses={
        200: {"description": "An already stored translation, reused", "model": MessageTranslation},
        401: {"description": "Not authenticated (problem+json)"},
        404: {"description": "No such conversation of yours, or message in it (problem+json)"},
        422: {"description": "Invalid language, or a message without text (problem+json)"},
        502: {"description": "The translation model failed; nothing stored (problem+json)"},
    },
)
async def translate(
    conversation_id: str,
    message_id: str,
    data: TranslationCreate,
    current: Current,
    state: State,
    response: Response,
) -> MessageTranslation:
    """The message translated into ``to`` with your agent's ``translation`` model: 201 when
    translated now, 200 when a stored translation of the same text was reused. The original
    message is never changed."""
    for name, value in (("conversation", conversation_id), ("message", message_id)):
        if not is_ulid(value):
            raise ValidationFailedError(f"{value!r} is not a {name} id (ULID)")
    result = await translate_message(state, current.user, conversation_id, message_id, data.to)
    if result.reused:
        response.status_code = 200
    return result
