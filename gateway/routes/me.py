"""The caller's own account: profile, deletion, password, device sessions and LLM keys."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from gateway.agents.catalog import configured_providers
from gateway.deps import Current, State
from gateway.federation_auth import client_ip
from gateway.routes import problems
from gateway.routes.params import Id
from gateway.services import llm_keys, profiles
from models.account_api import (
    AccountDelete,
    LLMKeyList,
    LLMKeyPublic,
    LLMKeyPut,
    PasswordUpdate,
    ProviderPublic,
    SessionList,
    SessionsRevoked,
    UserUpdate,
)
from models.api import UserPublic

router = APIRouter(tags=["accounts"])


@router.patch("/v1/me", summary="Update my profile", responses=problems(401, 409, 422))
async def update_me(
    data: UserUpdate, current: Current, request: Request, state: State
) -> UserPublic:
    """Change display name, avatar, email, phone or preferences. Absent fields are kept;
    `null` clears. Preferences are validated against `UserPreferences` (IANA time zone, BCP 47
    language); unknown keys are 422."""
    return await profiles.update_profile(
        state.accounts, state.clock, current, data, ip=client_ip(request)
    )


@router.delete("/v1/me", status_code=204, summary="Delete my account", responses=problems(401))
async def delete_me(
    data: AccountDelete, current: Current, request: Request, state: State
) -> Response:
    """Soft-delete the account (password required): sessions end, keys and contact data are
    erased, uploads never sent are deleted, the username stays reserved, messages remain."""
    await profiles.delete_account(
        state.accounts,
        state.clock,
        current,
        data.password,
        storage=state.storage,
        ip=client_ip(request),
    )
    return Response(status_code=204)


@router.put("/v1/me/password", summary="Change my password", responses=problems(401, 422))
async def change_password(
    data: PasswordUpdate, current: Current, request: Request, state: State
) -> SessionsRevoked:
    """Replace the password; every other session of the account is revoked."""
    revoked = await state.accounts.change_password(
        current, data.current_password, data.new_password, ip=client_ip(request)
    )
    return SessionsRevoked(revoked=revoked)


@router.get("/v1/me/sessions", summary="My device sessions", responses=problems(401))
async def list_sessions(current: Current, state: State) -> SessionList:
    """Live sessions (device, platform, last activity); the caller's has `current: true`."""
    return await state.accounts.sessions.list(
        user_id=current.user.id, current_session_id=current.session_id
    )


@router.delete(
    "/v1/me/sessions/{session_id}",
    status_code=204,
    summary="Revoke one of my sessions",
    responses=problems(401, 404),
)
async def revoke_session(
    session_id: Id, current: Current, request: Request, state: State
) -> Response:
    """End one session (its tokens stop working at once)."""
    await state.accounts.sessions.revoke(
        user_id=current.user.id, session_id=session_id, ip=client_ip(request)
    )
    return Response(status_code=204)


@router.delete("/v1/me/sessions", summary="Revoke all my other sessions", responses=problems(401))
async def revoke_other_sessions(
    current: Current, request: Request, state: State
) -> SessionsRevoked:
    """End every session but the caller's."""
    revoked = await state.accounts.sessions.revoke_others(
        user_id=current.user.id, keep=current.session_id, ip=client_ip(request)
    )
    return SessionsRevoked(revoked=revoked)


@router.get("/v1/me/llm-keys", summary="My provider keys", responses=problems(401))
async def list_llm_keys(current: Current) -> LLMKeyList:
    """Providers that have a key and when it was set — never the key itself."""
    return llm_keys.list_llm_keys(current.user)


@router.put(
    "/v1/me/llm-keys/{provider}",
    summary="Set a provider key",
    responses=problems(401, 422, 503),
)
async def put_llm_key(
    provider: str, data: LLMKeyPut, current: Current, request: Request, state: State
) -> LLMKeyPublic:
    """Store (or replace) the API key for a catalog provider, AES-256-GCM encrypted."""
    stored = await llm_keys.set_llm_key(
        state.pool,
        state.keyring,
        state.clock,
        user_id=current.user.id,
        provider=provider,
        api_key=data.api_key,
        ip=client_ip(request),
        extra_providers=state.settings.llm_providers,
    )
    return stored


@router.delete(
    "/v1/me/llm-keys/{provider}",
    status_code=204,
    summary="Remove a provider key",
    responses=problems(401, 404),
)
async def delete_llm_key(
    provider: str, current: Current, request: Request, state: State
) -> Response:
    """Forget the key for one provider."""
    await llm_keys.delete_llm_key(
        state.pool, state.clock, user_id=current.user.id, provider=provider, ip=client_ip(request)
    )
    return Response(status_code=204)


@router.get("/v1/providers", summary="The provider catalog", tags=["agents"])
async def list_providers(state: State) -> list[ProviderPublic]:
    """Every LLM and tool provider of this instance: the catalog, with the operator's
    endpoints (`CONFER_LLM_PROVIDERS`) folded in (ids for `model_config` and LLM keys)."""
    return [
        ProviderPublic(
            id=p.id,
            display_name=p.display_name,
            kind=p.kind,
            api_style=p.api_style,
            base_url=p.base_url,
            requires_key=p.requires_key,
        )
        for p in configured_providers(state.settings.llm_providers)
    ]
