"""Ask for a message in another language (stored as a linked variant, reused when asked again)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from gateway.deps import Current, State
from gateway.routes.params import Id
from gateway.services import auto_translation
from gateway.services.translation import translate_message
from models.translation import AutoTranslationSetting, MessageTranslation, TranslationCreate

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
    conversation_id: Id,
    message_id: Id,
    data: TranslationCreate,
    current: Current,
    state: State,
    response: Response,
) -> MessageTranslation:
    """The message translated into ``to`` with your agent's ``translation`` model: 201 when
    translated now, 200 when a stored translation of the same text was reused. The original
    message is never changed."""
    result = await translate_message(
        state.context.translator, current.user, conversation_id, message_id, data.to
    )
    if result.reused:
        response.status_code = 200
    return result


_AUTO = "/v1/conversations/{conversation_id}/auto-translation"
_AUTO_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not authenticated (problem+json)"},
    404: {"description": "No such conversation of yours (problem+json)"},
    422: {"description": "Invalid language (problem+json)"},
}


@router.put(_AUTO, summary="Turn on automatic translation", responses=_AUTO_ERRORS)
async def put_auto_translation(
    conversation_id: Id, data: TranslationCreate, current: Current, state: State
) -> AutoTranslationSetting:
    """From now on, every new message of others in this conversation is translated into
    ``to`` with your agent's ``translation`` model; you get a ``message.translated`` event."""
    setting = await auto_translation.set_language(
        state.pool, current.user, conversation_id, data.to
    )
    return AutoTranslationSetting.model_validate(setting)


@router.get(_AUTO, summary="Automatic translation setting", responses=_AUTO_ERRORS)
async def get_auto_translation(
    conversation_id: Id, current: Current, state: State
) -> AutoTranslationSetting:
    """Your automatic translation language here (``language`` null when off)."""
    setting = await auto_translation.get_language(state.pool, current.user, conversation_id)
    return AutoTranslationSetting.model_validate(setting)


@router.delete(
    _AUTO, status_code=204, summary="Turn off automatic translation", responses=_AUTO_ERRORS
)
async def delete_auto_translation(conversation_id: Id, current: Current, state: State) -> None:
    """Stop translating new messages (stored translations stay)."""
    await auto_translation.clear_language(state.pool, current.user, conversation_id)
