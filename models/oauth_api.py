"""API bodies of MCP sign-in's consent page and OAuth grant list (docs/agents.md, "Signing in")."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from .base import ConferModel, Timestamp, Ulid

_ULID = "01J9Z8Q6X3V5N2K7M4R1T0W8YC"
_TIME = "2026-11-30T09:15:00Z"
_CLIENT = "https://client.example/oauth/client.json"


class OAuthRequestPublic(ConferModel):
    """An authorization request awaiting the user's consent."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "q3Jc1r2mV6bN0Yt8Xw4aZpL7sEeKdHfG",
                    "client_id": _CLIENT,
                    "client_name": "Example Code Agent",
                    "redirect_uri": "http://127.0.0.1:33418/callback",
                    "resource": "https://confer.example/mcp",
                    "scope": "mcp",
                    "expires_at": _TIME,
                }
            ]
        }
    )

    id: str
    client_id: str = Field(
        description="The client's id: its metadata document URL, or the id "
        "Confer gave it at registration."
    )
    client_name: str | None = Field(default=None, description="As the client describes itself.")
    redirect_uri: str = Field(description="Where the browser goes after the decision.")
    resource: str
    scope: str
    expires_at: Timestamp


class OAuthDecisionPublic(ConferModel):
    """Where to send the browser after the decision (the client's redirect URI, RFC 6749
    §4.1.2: with ``code``, ``state`` and ``iss``, or ``error=access_denied``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"redirect_to": "http://127.0.0.1:33418/callback?code=…&state=…&iss=…"}]
        }
    )

    redirect_to: str


class OAuthGrantPublic(ConferModel):
    """A client the user signed in to MCP (revoke: ``DELETE /v1/me/sessions/{session_id}``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "session_id": _ULID,
                    "client_id": _CLIENT,
                    "client_name": "Example Code Agent",
                    "resource": "https://confer.example/mcp",
                    "scope": "mcp",
                    "created_at": _TIME,
                    "last_active_at": _TIME,
                    "expires_at": "2026-12-30T09:15:00Z",
                }
            ]
        }
    )

    session_id: Ulid
    client_id: str
    client_name: str | None = None
    resource: str
    scope: str
    created_at: Timestamp
    last_active_at: Timestamp | None = None
    expires_at: Timestamp


class OAuthGrantList(ConferModel):
    """The user's live OAuth grants, newest first."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "session_id": _ULID,
                            "client_id": _CLIENT,
                            "client_name": "Example Code Agent",
                            "resource": "https://confer.example/mcp",
                            "scope": "mcp",
                            "created_at": _TIME,
                            "last_active_at": _TIME,
                            "expires_at": "2026-12-30T09:15:00Z",
                        }
                    ]
                }
            ]
        }
    )

    items: list[OAuthGrantPublic]
