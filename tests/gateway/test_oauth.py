"""MCP sign-in over real HTTP: metadata, authorization code + PKCE, consent, tokens, refusals.

The SDK clients' end-to-end sign-ins are in tests/agents/test_mcp_oauth.py; this module drives
each step itself to check what the SDKs never do on purpose (wrong verifiers, reused codes…).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.clock import Clock
from tests.gateway.harness import Instance, User, free_port, run_instance, serve
from tests.gateway.oauth_flow import REDIRECT_URI, Client, consent, pkce, query, register

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
# A request the MCP endpoint answers 200 on its own (no session needed): the handshake's start.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


class MovableClock(Clock):
    def advance(self, seconds: float) -> None:
        self.offset += seconds


def authorize_url(
    instance: Instance, client: Client, challenge: str, **overrides: str | None
) -> str:
    params: dict[str, str | None] = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": client.redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st-123",
        "resource": f"{instance.base_url}/mcp",
        "scope": "mcp",
        **overrides,
    }
    return "/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})


async def code_for(instance: Instance, user: User, client: Client, challenge: str) -> str:
    redirect = await consent(
        instance.client, authorize_url(instance, client, challenge), user.token
    )
    params = query(redirect)
    assert redirect.startswith(client.redirect_uri)
    assert params["state"] == "st-123" and params["iss"] == instance.base_url
    return params["code"]


async def exchange(instance: Instance, **form: str) -> httpx.Response:
    return await instance.client.post("/oauth/token", data=form)


async def sign_in(instance: Instance, user: User, client: Client) -> dict[str, Any]:
    verifier, challenge = pkce()
    code = await code_for(instance, user, client, challenge)
    response = await exchange(
        instance,
        grant_type="authorization_code",
        code=code,
        code_verifier=verifier,
        client_id=client.client_id,
        redirect_uri=client.redirect_uri,
        resource=f"{instance.base_url}/mcp",
    )
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return dict(response.json())


async def mcp_status(instance: Instance, token: str) -> httpx.Response:
    return await instance.client.post(
        "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    )


async def test_discovery_documents_and_the_401_challenge(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        base = instance.base_url
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            document = (await instance.client.get(path)).json()
            assert document["resource"] == f"{base}/mcp"
            assert document["authorization_servers"] == [base]
        metadata = (await instance.client.get("/.well-known/oauth-authorization-server")).json()
        assert metadata["issuer"] == base
        assert metadata["code_challenge_methods_supported"] == ["S256"]
        assert metadata["client_id_metadata_document_supported"] is True
        assert metadata["authorization_response_iss_parameter_supported"] is True
        assert metadata["token_endpoint"] == f"{base}/oauth/token"

        bare = await instance.client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert bare.status_code == 401
        challenge = bare.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert "invalid_token" not in challenge
        wrong = await mcp_status(instance, "not-a-token")
        assert 'error="invalid_token"' in wrong.headers["www-authenticate"]


async def test_sign_in_refresh_and_scope(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        tokens = await sign_in(instance, alice, client)
        assert tokens["token_type"] == "Bearer" and tokens["scope"] == "mcp"
        assert tokens["expires_in"] == instance.settings.oauth_access_token_ttl_seconds
        assert (await mcp_status(instance, tokens["access_token"])).status_code == 200

        # scoped to MCP: REST refuses the token; the refresh token is not a REST one either
        me = await instance.client.get(
            "/v1/me", headers={"Authorization": f"Bearer {tokens['access_token']}"}
        )
        assert me.status_code == 401 and me.json()["code"] == "token_invalid"
        rest = await instance.client.post(
            "/v1/auth/refresh", json={"refresh_token": tokens["refresh_token"]}
        )
        assert rest.status_code == 401
        # a REST session's refresh token is no OAuth one
        login = await instance.client.post(
            "/v1/auth/login",
            json={"username": "alice", "password": "correct horse battery", "device_id": "d1"},
        )
        device_refresh = login.json()["refresh_token"]
        refused = await exchange(
            instance,
            grant_type="refresh_token",
            refresh_token=device_refresh,
            client_id=client.client_id,
        )
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"

        # listed with the user's sessions and as a grant
        grants = (await alice.request("GET", "/v1/oauth/grants")).json()["items"]
        assert [g["client_id"] for g in grants] == [client.client_id]
        sessions = (await alice.request("GET", "/v1/me/sessions")).json()["items"]
        assert grants[0]["session_id"] in {s["id"] for s in sessions}

        rotated = await exchange(
            instance,
            grant_type="refresh_token",
            refresh_token=tokens["refresh_token"],
            client_id=client.client_id,
            resource=f"{instance.base_url}/mcp",
        )
        assert rotated.status_code == 200, rotated.text
        fresh = rotated.json()
        assert fresh["refresh_token"] != tokens["refresh_token"]
        assert (await mcp_status(instance, fresh["access_token"])).status_code == 200
        other = await register(instance.client)
        stolen = await exchange(
            instance,
            grant_type="refresh_token",
            refresh_token=fresh["refresh_token"],
            client_id=other.client_id,
        )
        assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"


async def test_wrong_verifier_burns_the_code(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        verifier, challenge = pkce()
        code = await code_for(instance, alice, client, challenge)
        form = {"grant_type": "authorization_code", "code": code, "client_id": client.client_id}
        wrong = await exchange(instance, **form, code_verifier=pkce()[0])
        assert wrong.status_code == 400
        assert wrong.json()["error"] == "invalid_grant"
        assert "PKCE" in wrong.json()["error_description"]
        again = await exchange(instance, **form, code_verifier=verifier)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


async def test_reused_code_revokes_what_it_issued(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        verifier, challenge = pkce()
        code = await code_for(instance, alice, client, challenge)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "client_id": client.client_id,
            "code_verifier": verifier,
        }
        first = await exchange(instance, **form)
        assert first.status_code == 200
        token = first.json()["access_token"]
        assert (await mcp_status(instance, token)).status_code == 200
        second = await exchange(instance, **form)
        assert second.status_code == 400 and second.json()["error"] == "invalid_grant"
        assert (await mcp_status(instance, token)).status_code == 401
        refresh = await exchange(
            instance,
            grant_type="refresh_token",
            refresh_token=first.json()["refresh_token"],
            client_id=client.client_id,
        )
        assert refresh.status_code == 400


async def test_expired_token_and_expired_code(database_url: str) -> None:
    clock = MovableClock()
    async with run_instance(database_url, clock=clock) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        tokens = await sign_in(instance, alice, client)
        verifier, challenge = pkce()
        code = await code_for(instance, alice, client, challenge)
        # (REST tokens carry a real-time iat, so every consent step happens before the jump)
        settings = instance.settings
        clock.advance(
            max(settings.oauth_access_token_ttl_seconds, settings.oauth_code_ttl_seconds) + 1
        )
        expired = await mcp_status(instance, tokens["access_token"])
        assert expired.status_code == 401
        assert 'error="invalid_token"' in expired.headers["www-authenticate"]
        late = await exchange(
            instance,
            grant_type="authorization_code",
            code=code,
            client_id=client.client_id,
            code_verifier=verifier,
        )
        assert late.status_code == 400 and "expired" in late.json()["error_description"]


async def test_wrong_resource_and_non_s256(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        verifier, challenge = pkce()
        for overrides, error in (
            ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
            ({"code_challenge_method": "plain"}, "invalid_request"),
            ({"code_challenge_method": None}, "invalid_request"),
            ({"response_type": "token"}, "unsupported_response_type"),
        ):
            response = await instance.client.get(
                authorize_url(instance, client, challenge, **overrides)
            )
            assert response.status_code == 302
            params = query(response.headers["location"])
            assert params["error"] == error, params
            assert params["state"] == "st-123" and params["iss"] == instance.base_url

        code = await code_for(instance, alice, client, challenge)
        response = await exchange(
            instance,
            grant_type="authorization_code",
            code=code,
            client_id=client.client_id,
            code_verifier=verifier,
            resource="https://elsewhere.example/mcp",
        )
        assert response.status_code == 400 and response.json()["error"] == "invalid_target"


async def test_revoked_refresh_token(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        tokens = await sign_in(instance, alice, client)
        revoked = await instance.client.post(
            "/oauth/revoke",
            data={"token": tokens["refresh_token"], "client_id": client.client_id},
        )
        assert revoked.status_code == 200
        refresh = await exchange(
            instance,
            grant_type="refresh_token",
            refresh_token=tokens["refresh_token"],
            client_id=client.client_id,
        )
        assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
        assert (await mcp_status(instance, tokens["access_token"])).status_code == 401
        assert (await alice.request("GET", "/v1/oauth/grants")).json()["items"] == []
        again = await instance.client.post("/oauth/revoke", data={"token": "unknown"})
        assert again.status_code == 200  # RFC 7009 §2.2

        # revoked like a session, from the sessions list
        tokens = await sign_in(instance, alice, client)
        grant = (await alice.request("GET", "/v1/oauth/grants")).json()["items"][0]
        gone = await alice.request("DELETE", f"/v1/me/sessions/{grant['session_id']}")
        assert gone.status_code == 204
        assert (await mcp_status(instance, tokens["access_token"])).status_code == 401


async def test_denied_unknown_client_and_bad_registrations(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        client = await register(instance.client)
        _, challenge = pkce()
        denied = await consent(
            instance.client, authorize_url(instance, client, challenge), alice.token, approve=False
        )
        assert query(denied)["error"] == "access_denied"
        for overrides in (
            {"client_id": "confer-client-nope"},
            {"redirect_uri": "http://127.0.0.1:9/elsewhere"},
        ):
            response = await instance.client.get(
                authorize_url(instance, client, challenge, **overrides)
            )
            assert response.status_code == 400
            assert response.json()["code"] == "oauth_client_invalid"
        for body, error in (
            ({"redirect_uris": ["http://attacker.example/cb"]}, "invalid_redirect_uri"),
            ({"redirect_uris": []}, "invalid_redirect_uri"),
            (
                {"redirect_uris": [REDIRECT_URI], "grant_types": ["password"]},
                "invalid_client_metadata",
            ),
            ([1, 2], "invalid_client_metadata"),
        ):
            response = await instance.client.post("/oauth/register", json=body)
            assert response.status_code == 400 and response.json()["error"] == error
        missing = await instance.client.get(
            "/v1/oauth/requests/nope", headers={"Authorization": f"Bearer {alice.token}"}
        )
        assert missing.status_code == 404 and missing.json()["code"] == "oauth_request_not_found"
        bad_grant = await exchange(instance, grant_type="password")
        assert bad_grant.json()["error"] == "unsupported_grant_type"


async def test_client_names_are_cleaned_for_the_consent_page(database_url: str) -> None:
    """A registered client's name is cleaned like every shown name: a U+202E cannot reverse
    the consent page's heading, and a name with nothing visible left is refused."""
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        made = await instance.client.post(
            "/oauth/register",
            json={
                "client_name": "Claude Code (official)\u202egnp.exe",
                "redirect_uris": [REDIRECT_URI],
            },
        )
        assert made.status_code == 201, made.text
        assert made.json()["client_name"] == "Claude Code (official)gnp.exe"
        client = Client(made.json()["client_id"])
        shown = await instance.client.get(authorize_url(instance, client, pkce()[1]))
        assert shown.status_code == 302, shown.text
        request_id = shown.headers["location"].rsplit("/", 1)[1]
        consent_request = await instance.client.get(
            f"/v1/oauth/requests/{request_id}", headers=alice.headers
        )
        assert consent_request.status_code == 200, consent_request.text
        assert consent_request.json()["client_name"] == "Claude Code (official)gnp.exe"
        for name in ("\u202e\u200b", "  "):
            refused = await instance.client.post(
                "/oauth/register", json={"client_name": name, "redirect_uris": [REDIRECT_URI]}
            )
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"] == "invalid_client_metadata"


@contextlib.asynccontextmanager
async def metadata_host(documents: dict[str, Any]) -> AsyncIterator[str]:
    """A loopback web server publishing client ID metadata documents; yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    fetched: list[str] = []

    async def document(request: Request) -> Response:
        fetched.append(request.url.path)
        body = documents.get(request.url.path)
        if body is None:
            return Response(status_code=404)
        text = body if isinstance(body, str) else json.dumps(body).replace("BASE", base)
        return Response(text, media_type="application/json")

    app = Starlette(routes=[Route("/{name:path}", document)])
    app.state.fetched = fetched
    async with serve(app, port):
        yield base


async def test_client_id_metadata_documents(database_url: str) -> None:
    good = {
        "client_id": "BASE/good.json",
        "client_name": "Doc agent",
        "redirect_uris": [REDIRECT_URI],
    }
    documents: dict[str, Any] = {
        "/good.json": good,
        "/mismatch.json": {**good, "client_id": "BASE/other.json"},
        "/secret.json": {**good, "client_id": "BASE/secret.json", "client_secret": "x"},
        "/huge.json": {**good, "client_id": "BASE/huge.json", "pad": "x" * 10000},
        "/broken.json": "{not json",
    }
    async with (
        metadata_host(documents) as base,
        run_instance(database_url, oauth_allow_http_client_ids=True) as instance,
    ):
        alice = await instance.register("alice")
        client = Client(f"{base}/good.json")
        verifier, challenge = pkce()
        code = await code_for(instance, alice, client, challenge)
        tokens = await exchange(
            instance,
            grant_type="authorization_code",
            code=code,
            client_id=client.client_id,
            code_verifier=verifier,
        )
        assert tokens.status_code == 200, tokens.text
        assert (await mcp_status(instance, tokens.json()["access_token"])).status_code == 200
        grants = (await alice.request("GET", "/v1/oauth/grants")).json()["items"]
        assert grants[0]["client_name"] == "Doc agent"

        for name in ("mismatch", "secret", "huge", "broken", "absent"):
            response = await instance.client.get(
                authorize_url(instance, Client(f"{base}/{name}.json"), challenge)
            )
            assert response.status_code == 400, (name, response.text)
            assert response.json()["code"] == "oauth_client_invalid"

    async with (
        metadata_host(documents) as base,
        run_instance(
            database_url, oauth_allow_http_client_ids=True, allow_private_networks=False
        ) as instance,
    ):
        response = await instance.client.get(
            authorize_url(instance, Client(f"{base}/good.json"), pkce()[1])
        )
        assert response.status_code == 400
        assert "not a public address" in response.json()["detail"]


async def test_http_client_ids_need_the_setting(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        response = await instance.client.get(
            authorize_url(instance, Client("http://127.0.0.1:9/client.json"), pkce()[1])
        )
        assert response.status_code == 400
        assert response.json()["code"] == "oauth_client_invalid"


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/revoke"])
async def test_missing_parameters_are_oauth_errors(database_url: str, path: str) -> None:
    async with run_instance(database_url) as instance:
        response = await instance.client.post(path, data={"grant_type": "authorization_code"})
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_request"


async def test_unauthenticated_oauth_requests_are_rate_limited(database_url: str) -> None:
    async with run_instance(database_url, rate_limit_oauth_ip="3/minute") as instance:
        client = await register(instance.client)
        await instance.client.get(authorize_url(instance, client, pkce()[1]))
        await instance.client.get(authorize_url(instance, client, pkce()[1]))
        refused = await instance.client.post(
            "/oauth/register", json={"redirect_uris": [REDIRECT_URI]}
        )
        assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
        assert int(refused.headers["retry-after"]) >= 1
