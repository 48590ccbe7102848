"""Outbound signing through httpx: RequestSigner and SignatureAuth over MockTransport."""

from __future__ import annotations

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a.auth import RequestSigner, SignatureAuth
from a2a.errors import DigestMismatchError, SignatureComponentsError, SignatureVerificationError
from a2a.signatures import CONFER_TAG, DEFAULT_COMPONENTS, parse_signature, verify_request

KEY = Ed25519PrivateKey.generate()
KEYID = "did:web:alice.example#key-1"
NOW = 1_700_000_000
URL = "https://bob.example:8443/a2a/v1?tenant=b%20c"


def _signer(window: int = 60) -> RequestSigner:
    return RequestSigner(KEY, KEYID, window=window, clock=lambda: NOW + 0.9)


def _verifying_handler(seen: list[httpx.Request]) -> httpx.MockTransport:
    """A fake peer that verifies each request like the gateway would, then answers 200."""

    def handle(request: httpx.Request) -> httpx.Response:
        parsed = parse_signature(request.headers)
        verify_request(
            parsed,
            method=request.method,
            url=str(request.url),
            headers=request.headers,
            body=request.content,
            public_key=KEY.public_key(),
            now=NOW + 1,
        )
        seen.append(request)
        return httpx.Response(200, json={"keyid": parsed.keyid, "nonce": parsed.nonce})

    return httpx.MockTransport(handle)


def test_headers_for_uses_clock_window_and_fresh_nonce() -> None:
    signer = _signer(window=30)
    headers = [("Content-Type", "application/json")]
    first = signer.headers_for("POST", URL, headers, b"{}")
    second = signer.headers_for("POST", URL, headers, b"{}")
    parsed = parse_signature([*headers, *first.items()])
    assert (parsed.created, parsed.expires, parsed.tag) == (NOW, NOW + 30, CONFER_TAG)
    assert parsed.components == DEFAULT_COMPONENTS
    assert parsed.nonce and parsed.nonce != parse_signature([*headers, *second.items()]).nonce
    assert set(first) == {"Content-Digest", "Signature-Input", "Signature"}


def test_headers_for_requires_covered_fields() -> None:
    with pytest.raises(SignatureComponentsError):
        _signer().headers_for("GET", URL, [], b"")


def test_sync_client_request_is_verifiable() -> None:
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_verifying_handler(seen), auth=SignatureAuth(_signer())) as client:
        response = client.post(URL, json={"jsonrpc": "2.0", "method": "SendMessage", "id": 1})
    assert response.status_code == 200
    assert response.json()["keyid"] == KEYID
    [request] = seen
    assert {"content-digest", "signature-input", "signature"} <= set(request.headers.keys())


async def test_async_client_request_is_verifiable() -> None:
    seen: list[httpx.Request] = []
    auth = SignatureAuth(_signer())
    async with httpx.AsyncClient(transport=_verifying_handler(seen), auth=auth) as client:
        response = await client.post(URL, content=b"hello", headers={"Content-Type": "text/plain"})
    assert response.status_code == 200
    assert seen[0].content == b"hello"


def test_body_altered_after_signing_is_rejected() -> None:
    def tamper(request: httpx.Request) -> httpx.Response:
        parsed = parse_signature(request.headers)
        verify_request(
            parsed,
            method=request.method,
            url=str(request.url),
            headers=request.headers,
            body=request.content + b" ",
            public_key=KEY.public_key(),
            now=NOW,
        )
        return httpx.Response(200)  # pragma: no cover - verification must fail

    transport = httpx.MockTransport(tamper)
    with httpx.Client(transport=transport, auth=SignatureAuth(_signer())) as client:
        with pytest.raises(DigestMismatchError):
            client.post(URL, json={})


def test_trace_context_fields_are_covered_when_present() -> None:
    headers = [
        ("Content-Type", "application/json"),
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ("tracestate", "confer=1"),
    ]
    added = _signer().headers_for("POST", URL, headers, b"{}")
    signed = [*headers, *added.items()]
    parsed = parse_signature(signed)
    assert parsed.components == (*DEFAULT_COMPONENTS, "traceparent", "tracestate")
    # another traceparent than the one signed breaks the signature
    tampered = [(k, v.replace("-01", "-00") if k == "traceparent" else v) for k, v in signed]
    for received, verifies in ((signed, True), (tampered, False)):
        try:
            verify_request(
                parsed,
                method="POST",
                url=URL,
                headers=received,
                body=b"{}",
                public_key=KEY.public_key(),
                now=NOW + 1,
            )
        except SignatureVerificationError:
            assert not verifies
        else:
            assert verifies
    # without them, the default components only
    plain = _signer().headers_for("POST", URL, headers[:1], b"{}")
    assert parse_signature([*headers[:1], *plain.items()]).components == DEFAULT_COMPONENTS
