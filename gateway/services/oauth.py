"""Confer as the OAuth 2.1 authorization server of its own users, for its MCP endpoint.

The flow (MCP authorization spec 2026; OAuth 2.1 draft §4.1): an MCP client that gets a 401
from ``/mcp`` reads the protected resource metadata (RFC 9728) and this server's metadata
(RFC 8414), sends the user's browser to ``/oauth/authorize`` with a PKCE ``S256`` challenge
(RFC 7636) and the ``resource`` it wants a token for (RFC 8707). Confer checks the client
(:mod:`gateway.services.oauth_clients`) and redirect URI, records the request and sends the
browser to the web client's consent page; the logged-in user approves or denies there; the
browser goes back to the client's redirect URI with ``code`` + ``state`` + ``iss``
(RFC 9207). The client exchanges the code (once, within ``oauth_code_ttl_seconds``, with the
PKCE verifier) at ``/oauth/token`` for an access token whose audience is the resource and a
refresh token. An OAuth sign-in is a device session with a grant
(:mod:`gateway.services.sessions`): its refresh token rotates and is hashed at rest, reuse
revokes it, and it is listed and revoked with the user's sessions or at ``/oauth/revoke``
(RFC 7009). A second use of a code revokes the session it opened (RFC 6749 §4.1.2).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from gateway.clock import Clock
from gateway.errors import (
    OAuthClientInvalidError,
    OAuthError,
    OAuthRequestNotFoundError,
    RefreshTokenInvalidError,
    TokenInvalidError,
)
from gateway.ids import is_ulid, new_id
from gateway.services.identity import Identity
from gateway.services.oauth_clients import ClientDirectory
from gateway.services.sessions import DeviceSessions, TokenPair, hash_refresh_token
from gateway.services.tokens import verify_access_token
from gateway.settings import Settings
from gateway.store import audit as audit_store
from gateway.store import oauth as oauth_store
from gateway.store import sessions as sessions_store

SCOPE = "mcp"
PLATFORM = "mcp"
CODE_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
CODE_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
MAX_PARAM_CHARS = 2000


def protected_resource_metadata_url(resource: str) -> str:
    """The RFC 9728 §3.1 metadata URL of ``resource``: the well-known path inserted between
    the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{path}"


def s256(verifier: str) -> str:
    """The PKCE S256 challenge of ``verifier`` (RFC 7636 §4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def with_query(uri: str, params: Mapping[str, str | None]) -> str:
    """``uri`` with ``params`` (None values left out) added to its query (RFC 6749 §4.1.2)."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, v) for k, v in params.items() if v is not None]
    return urlunsplit(parts._replace(query=urlencode(query)))


@dataclass(frozen=True)
class ConsentRequest:
    """A pending authorization request as the consent page shows it."""

    id: str
    client_id: str
    client_name: str | None
    redirect_uri: str
    resource: str
    scope: str
    expires_at: datetime


class AuthorizationServer:
    """The authorization endpoint's checks, the consent decision, the token and revocation
    endpoints, and the metadata documents (module docstring)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        identity: Identity,
        clock: Clock,
        settings: Settings,
        sessions: DeviceSessions,
        clients: ClientDirectory,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._settings = settings
        self._sessions = sessions
        self._identity = identity
        self.clients = clients
        self.issuer = identity.public_url.rstrip("/")
        self.resource = f"{self.issuer}/mcp"

    def metadata(self) -> dict[str, Any]:
        """Authorization server metadata (RFC 8414 §2; CIMD draft §5; RFC 9207 §3)."""
        base = self.issuer
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "registration_endpoint": f"{base}/oauth/register",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "scopes_supported": [SCOPE],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": True,
            "authorization_response_iss_parameter_supported": True,
        }

    def resource_metadata(self) -> dict[str, Any]:
        """Protected resource metadata of ``/mcp`` (RFC 9728 §2)."""
        return {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": [SCOPE],
            "bearer_methods_supported": ["header"],
            "resource_name": "Confer MCP",
        }

    def _resource(self, requested: str | None) -> str:
        """The resource a request names (RFC 8707 §2); absent means ``/mcp``."""
        if requested is None or requested.rstrip("/") == self.resource:
            return self.resource
        raise OAuthError("invalid_target", f"this server issues tokens only for {self.resource}")

    async def authorize(self, params: Mapping[str, str]) -> str:
        """Where ``/oauth/authorize`` sends the browser: the consent page, or the client's
        redirect URI with an ``error`` (RFC 6749 §4.1.2.1).

        Raises OAuthClientInvalidError when the client or redirect URI is not trustworthy
        (then nothing may be sent to the redirect URI)."""
        if any(len(v) > MAX_PARAM_CHARS for v in params.values()):
            raise OAuthClientInvalidError("an authorization parameter is too long")
        client = await self.clients.get(params.get("client_id") or "")
        redirect_uri = params.get("redirect_uri")
        if redirect_uri is None and len(client.redirect_uris) == 1:
            redirect_uri = client.redirect_uris[0]
        if redirect_uri not in client.redirect_uris:
            raise OAuthClientInvalidError("redirect_uri is not one the client registered")
        state = params.get("state")
        try:
            resource = self._check_request(params)
        except OAuthError as exc:
            return self._redirect(
                redirect_uri, error=exc.error, description=exc.detail, state=state
            )
        now = self._clock.now()
        request_id = secrets.token_urlsafe(24)
        async with self._pool.acquire() as conn:
            await oauth_store.insert_authorization(
                conn,
                id=request_id,
                client_id=client.client_id,
                client_name=client.client_name,
                redirect_uri=redirect_uri,
                code_challenge=params["code_challenge"],
                state=state,
                resource=resource,
                scope=SCOPE,
                expires_at=now + timedelta(seconds=self._settings.oauth_consent_ttl_seconds),
                now=now,
            )
        return f"{self.issuer}/#/oauth/consent/{request_id}"

    def _check_request(self, params: Mapping[str, str]) -> str:
        """The request's resource after checking response type and PKCE. Raises OAuthError."""
        if params.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "response_type must be code")
        if params.get("code_challenge_method") != "S256":
            raise OAuthError("invalid_request", "code_challenge_method must be S256")
        if not CODE_CHALLENGE.fullmatch(params.get("code_challenge") or ""):
            raise OAuthError("invalid_request", "code_challenge must be a base64url SHA-256")
        return self._resource(params.get("resource"))

    def _redirect(self, uri: str, *, error: str, description: str, state: str | None) -> str:
        return with_query(
            uri,
            {"error": error, "error_description": description, "state": state, "iss": self.issuer},
        )

    async def pending(self, request_id: str) -> ConsentRequest:
        """The pending request for the consent page. Raises OAuthRequestNotFoundError."""
        async with self._pool.acquire() as conn:
            row = await oauth_store.get_pending_authorization(
                conn, id=request_id, now=self._clock.now()
            )
        if row is None:
            raise OAuthRequestNotFoundError(f"no pending authorization request {request_id!r}")
        return ConsentRequest(
            row["id"],
            row["client_id"],
            row["client_name"],
            row["redirect_uri"],
            row["resource"],
            row["scope"],
            row["expires_at"],
        )

    async def decide(self, request_id: str, *, user_id: str, approve: bool, ip: str | None) -> str:
        """The user's decision; the client redirect URI to send the browser to, with ``code``
        (approved) or ``error=access_denied``. Raises OAuthRequestNotFoundError."""
        now = self._clock.now()
        code = secrets.token_urlsafe(32)
        async with self._pool.acquire() as conn, conn.transaction():
            if approve:
                row = await oauth_store.approve_authorization(
                    conn,
                    id=request_id,
                    user_id=user_id,
                    code_hash=hash_refresh_token(code),
                    expires_at=now + timedelta(seconds=self._settings.oauth_code_ttl_seconds),
                    now=now,
                )
            else:
                row = await oauth_store.delete_authorization(conn, id=request_id)
            if row is None or (not approve and row["expires_at"] <= now):
                raise OAuthRequestNotFoundError(f"no pending authorization request {request_id!r}")
            await audit_store.insert_audit(
                conn,
                action="oauth.approved" if approve else "oauth.denied",
                user_id=user_id,
                details={"client_id": row["client_id"], "resource": row["resource"]},
                ip_address=ip,
            )
        if not approve:
            return self._redirect(
                row["redirect_uri"],
                error="access_denied",
                description="the user denied the request",
                state=row["state"],
            )
        return with_query(
            row["redirect_uri"], {"code": code, "state": row["state"], "iss": self.issuer}
        )

    async def token(self, form: Mapping[str, str], *, ip: str | None) -> dict[str, Any]:
        """The token endpoint (OAuth 2.1 §3.2.3): ``authorization_code`` or ``refresh_token``.

        Returns the RFC 6749 §5.1 body. Raises OAuthError (``invalid_request``,
        ``invalid_grant``, ``invalid_target``, ``unsupported_grant_type``)."""
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            pair, scope = await self._exchange_code(form, ip)
        elif grant_type == "refresh_token":
            pair, scope = await self._refresh(form, ip)
        else:
            raise OAuthError("unsupported_grant_type", f"grant_type {grant_type!r}")
        return {
            "access_token": pair.access_token,
            "token_type": "Bearer",
            "expires_in": pair.expires_in,
            "refresh_token": pair.refresh_token,
            "scope": scope,
        }

    async def _exchange_code(
        self, form: Mapping[str, str], ip: str | None
    ) -> tuple[TokenPair, str]:
        code, verifier = _required(form, "code"), _required(form, "code_verifier")
        client_id = _required(form, "client_id")
        now = self._clock.now()
        failure: OAuthError | None = None
        async with self._pool.acquire() as conn, conn.transaction():
            # The code is spent by this attempt whatever its outcome, so a failed PKCE check
            # cannot be retried with another verifier.
            row = await oauth_store.use_code(conn, code_hash=hash_refresh_token(code), now=now)
            if row is None:
                raise OAuthError("invalid_grant", "unknown authorization code")
            if row["used_at"] is not None:
                failure = OAuthError("invalid_grant", "the authorization code was already used")
                await self._revoke_reused(conn, row, ip)
            elif row["expires_at"] <= now:
                failure = OAuthError("invalid_grant", "the authorization code has expired")
            elif row["client_id"] != client_id:
                failure = OAuthError("invalid_grant", "the code was issued to another client")
            elif form.get("redirect_uri", row["redirect_uri"]) != row["redirect_uri"]:
                failure = OAuthError("invalid_grant", "redirect_uri differs from the request's")
            elif not CODE_VERIFIER.fullmatch(verifier) or not hmac.compare_digest(
                s256(verifier), row["code_challenge"]
            ):
                failure = OAuthError("invalid_grant", "the PKCE code_verifier does not match")
            elif form.get("resource", row["resource"]).rstrip("/") != row["resource"]:
                failure = OAuthError("invalid_target", "resource differs from the request's")
            if failure is None:
                pair = await self._open_grant(conn, row, ip)
        if failure is not None:
            raise failure
        return pair, row["scope"]

    async def _open_grant(
        self, conn: asyncpg.Connection, row: dict[str, Any], ip: str | None
    ) -> TokenPair:
        pair = await self._sessions.open(
            conn,
            user_id=row["user_id"],
            device_id=f"oauth-{new_id()}",
            platform=PLATFORM,
            audience=row["resource"],
        )
        await oauth_store.insert_grant(
            conn,
            session_id=pair.session_id,
            user_id=row["user_id"],
            client_id=row["client_id"],
            client_name=row["client_name"],
            resource=row["resource"],
            scope=row["scope"],
        )
        await oauth_store.set_authorization_session(conn, id=row["id"], session_id=pair.session_id)
        await audit_store.insert_audit(
            conn,
            action="oauth.token_issued",
            user_id=row["user_id"],
            details={"client_id": row["client_id"], "session_id": pair.session_id},
            ip_address=ip,
        )
        return pair

    async def _revoke_reused(
        self, conn: asyncpg.Connection, row: dict[str, Any], ip: str | None
    ) -> None:
        revoked = False
        if row["session_id"] is not None:
            revoked = await sessions_store.delete_session(conn, id=row["session_id"])
        await audit_store.insert_audit(
            conn,
            action="oauth.code_reuse",
            user_id=row["user_id"],
            details={"client_id": row["client_id"], "session_revoked": revoked},
            ip_address=ip,
        )

    async def _refresh(self, form: Mapping[str, str], ip: str | None) -> tuple[TokenPair, str]:
        token, client_id = _required(form, "refresh_token"), _required(form, "client_id")
        session_id = token.partition(".")[0]
        async with self._pool.acquire() as conn:
            grant = await oauth_store.get_grant(conn, session_id=session_id)
        if grant is None or grant["client_id"] != client_id:
            raise OAuthError("invalid_grant", "unknown or revoked refresh token")
        if "resource" in form:
            self._resource(form["resource"])
        try:
            pair = await self._sessions.refresh(token, ip=ip, audience=grant["resource"])
        except RefreshTokenInvalidError as exc:
            raise OAuthError("invalid_grant", exc.detail) from exc
        return pair, grant["scope"]

    async def revoke(self, form: Mapping[str, str], *, ip: str | None) -> None:
        """Token revocation (RFC 7009 §2): a refresh or access token of a grant ends the
        grant's session. An unknown or already invalid token is no error (§2.2).
        Raises OAuthError ``invalid_request`` without ``token``."""
        token, client_id = _required(form, "token"), form.get("client_id")
        session_id = await self._session_of(token)
        if session_id is None:
            return
        async with self._pool.acquire() as conn, conn.transaction():
            grant = await oauth_store.get_grant(conn, session_id=session_id)
            if grant is None or (client_id is not None and grant["client_id"] != client_id):
                return
            await sessions_store.delete_session(conn, id=session_id)
            await audit_store.insert_audit(
                conn,
                action="oauth.revoked",
                user_id=grant["user_id"],
                details={"client_id": grant["client_id"], "session_id": session_id},
                ip_address=ip,
            )

    async def _session_of(self, token: str) -> str | None:
        """The session a current refresh token or a valid resource access token belongs to."""
        session_id, sep, _ = token.partition(".")
        if sep and is_ulid(session_id) and token.count(".") == 1:
            async with self._pool.acquire() as conn:
                session = await sessions_store.get_session(conn, id=session_id)
            current = session.refresh_token_hash if session else None
            if current and hmac.compare_digest(current, hash_refresh_token(token)):
                return session_id
            return None
        try:
            claims = verify_access_token(
                self._identity, token, now=int(self._clock.time()), audience=self.resource
            )
        except TokenInvalidError:
            return None
        return claims.session_id

    async def grants(self, *, user_id: str) -> list[dict[str, Any]]:
        """The user's live grants (client, resource, scope, session times), newest first."""
        async with self._pool.acquire() as conn:
            return await oauth_store.list_grants(conn, user_id=user_id, now=self._clock.now())


def _required(form: Mapping[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise OAuthError("invalid_request", f"{name} is required")
    if len(value) > MAX_PARAM_CHARS:
        raise OAuthError("invalid_request", f"{name} is too long")
    return value
