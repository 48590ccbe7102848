"""The web client's and the docs' pages over real HTTP: browser security headers (a CSP that
allows only the client's own files, no framing, no referrer, nosniff) and ``HEAD`` wherever
``GET`` answers for pages and health checks. That the client still works under its policy is
``tests/web/`` (Chromium fails a test on any policy violation)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.gateway.harness import Instance, run_instance


@pytest.fixture
async def instance(database_url: str) -> AsyncIterator[Instance]:
    async with run_instance(database_url) as running:
        yield running


def _policy(response: httpx.Response) -> dict[str, list[str]]:
    directives = (d.split() for d in response.headers["content-security-policy"].split(";"))
    return {d[0]: d[1:] for d in directives if d}


def _page_headers(response: httpx.Response) -> None:
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert _policy(response)["frame-ancestors"] == ["'none'"]


async def test_the_client_page_allows_only_its_own_files(instance: Instance) -> None:
    page = await instance.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    _page_headers(page)
    policy = _policy(page)
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval
    assert policy["style-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'"]
    assert set(policy["img-src"]) == {"'self'", "data:", "blob:"}
    assert policy["object-src"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    # the built client has no inline script or style for the policy to block
    assert "<script>" not in page.text and "<style" not in page.text and "style=" not in page.text


async def test_the_docs_pages_keep_their_own_policy(instance: Instance) -> None:
    for path in ("/docs", "/redoc"):
        page = await instance.client.get(path)
        assert page.status_code == 200, path
        _page_headers(page)
        policy = _policy(page)
        assert policy["default-src"] == ["'self'"] and policy["connect-src"] == ["'self'"]
        assert "'unsafe-inline'" in policy["script-src"]  # FastAPI's page starts the bundle


async def test_api_answers_and_files_are_nosniff(instance: Instance) -> None:
    for path in ("/healthz", "/v1/me", "/static/app.js", "/openapi.json"):
        response = await instance.client.get(path)
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["x-content-type-options"].count(",") == 0  # sent once


async def test_head_answers_where_get_does(instance: Instance) -> None:
    for path in ("/", "/docs", "/redoc", "/healthz", "/readyz", "/static/app.js"):
        get = await instance.client.get(path)
        head = await instance.client.head(path)
        assert head.status_code == get.status_code == 200, (path, head.status_code)
        assert head.content == b"", path
        assert head.headers["content-type"] == get.headers["content-type"], path
    head = await instance.client.head("/")
    _page_headers(head)
    # HEAD stays out of the API description
    spec = (await instance.client.get("/openapi.json")).json()
    assert "head" not in spec["paths"]["/healthz"] and "get" in spec["paths"]["/healthz"]
    # and a method nobody serves is still 405
    assert (await instance.client.request("DELETE", "/healthz")).status_code == 405
