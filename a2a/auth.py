"""Outbound request signing for httpx clients (RFC 9421 + RFC 9530).

``RequestSigner`` holds the key and the signing policy; ``SignatureAuth`` plugs it
into ``httpx.Client``/``httpx.AsyncClient`` as an ``httpx.Auth`` so that every request
carries ``Content-Digest``, ``Signature-Input`` and ``Signature``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Generator, Sequence

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from a2a.signatures import (
    CONFER_TAG,
    DEFAULT_COMPONENTS,
    TRACE_CONTEXT_FIELDS,
    HeadersLike,
    field_lines,
    sign_request,
)


class RequestSigner:
    """Signs requests with one Ed25519 key under Confer's policy.

    Each signature gets ``created = int(clock())`` (UNIX seconds),
    ``expires = created + window`` and a fresh 128-bit random ``nonce``; it carries
    ``keyid``, ``alg="ed25519"`` and ``tag``. Every field in ``components`` must be
    present on the request (``content-type`` included), or signing raises
    ``SignatureComponentsError``. The fields in ``when_present`` (by default the W3C Trace
    Context fields, :data:`a2a.signatures.TRACE_CONTEXT_FIELDS`) are covered too when the
    request carries them.
    """

    def __init__(
        self,
        private_key: Ed25519PrivateKey,
        keyid: str,
        *,
        tag: str | None = CONFER_TAG,
        window: int = 60,
        clock: Callable[[], float] = time.time,
        components: Sequence[str] = DEFAULT_COMPONENTS,
        when_present: Sequence[str] = TRACE_CONTEXT_FIELDS,
    ) -> None:
        self._private_key = private_key
        self.keyid = keyid
        self.tag = tag
        self.window = window
        self.components = tuple(components)
        self.when_present = tuple(name for name in when_present if name not in self.components)
        self._clock = clock

    def headers_for(
        self, method: str, url: str, headers: HeadersLike, body: bytes
    ) -> dict[str, str]:
        """Return the fields to add to a request (see ``a2a.signatures.sign_request``).

        ``url`` is the absolute, percent-encoded target URI; ``body`` the exact bytes sent.
        """
        created = int(self._clock())
        present = tuple(name for name in self.when_present if field_lines(headers, name))
        return sign_request(
            method=method,
            url=url,
            headers=headers,
            body=body,
            private_key=self._private_key,
            keyid=self.keyid,
            created=created,
            expires=created + self.window,
            nonce=secrets.token_urlsafe(16),
            tag=self.tag,
            components=self.components + present,
        )


class SignatureAuth(httpx.Auth):
    """``httpx.Auth`` that signs each request with a ``RequestSigner``.

    Works with sync and async clients; the body is read first
    (``requires_request_body``), so streaming uploads are buffered.
    """

    requires_request_body = True

    def __init__(self, signer: RequestSigner) -> None:
        self.signer = signer

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add ``Content-Digest``/``Signature-Input``/``Signature`` and send the request."""
        added = self.signer.headers_for(
            request.method, str(request.url), request.headers, request.content
        )
        request.headers.update(added)
        yield request
