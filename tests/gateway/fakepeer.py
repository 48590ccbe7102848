"""``FakePeer``: a remote instance with its own Ed25519 key, for signing attacks by hand.

It serves one DID document (``did:web:localhost%3A<port>:users:mallory``) on loopback and signs
requests with ``a2a.signatures.sign_request`` under whatever parameters a test chooses.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a.signatures import sign_request
from did.document import build_did_document
from did.web import did_from_base_url
from tests.gateway.harness import free_port, serve


@dataclass
class FakePeer:
    """A fake remote: ``did``, its ``key``, and a document (and its response ``headers``) a
    test may rewrite."""

    base_url: str
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    fetches: int = 0
    document: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    """More JSON it serves, by path (``/users/mallory/profile.json``), as the test wrote it."""

    @property
    def did(self) -> str:
        return did_from_base_url(self.base_url, "users", "mallory")

    @property
    def keyid(self) -> str:
        return f"{self.did}#key-1"

    def publish(self, key: Ed25519PrivateKey | None = None, fragment: str = "key-1") -> None:
        """Serve a DID document listing only ``key`` (default: our own) as ``#<fragment>``."""
        self.document = build_did_document(
            self.did,
            [(fragment, (key or self.key).public_key())],
            services=[
                {
                    "id": f"{self.did}#a2a",
                    "type": "A2AService",
                    "serviceEndpoint": f"{self.base_url}/users/mallory/a2a",
                }
            ],
        )

    def rpc(self, text: str = "hello", message_id: str | None = None, **meta: Any) -> bytes:
        """A JSON-RPC ``SendMessage`` body."""
        metadata = {"confer": {"sender": self.did, **meta}}
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": message_id or uuid.uuid4().hex,
                        "role": "ROLE_USER",
                        "parts": [{"text": text}],
                        "metadata": metadata,
                    }
                },
            }
        ).encode()

    def signed_headers(
        self,
        url: str,
        body: bytes,
        *,
        key: Ed25519PrivateKey | None = None,
        keyid: str | None = None,
        created: int | None = None,
        expires: int | None = None,
        nonce: str | None = "auto",
        components: tuple[str, ...] | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """Headers for POSTing ``body`` to ``url``, signed as chosen; ``extra`` headers are
        sent (and may be covered by ``components``)."""
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0", **(extra or {})}
        created = int(time.time()) if created is None else created
        kwargs: dict[str, Any] = {}
        if components is not None:
            kwargs["components"] = components
        headers.update(
            sign_request(
                method="POST",
                url=url,
                headers=headers,
                body=body,
                private_key=key or self.key,
                keyid=keyid or self.keyid,
                created=created,
                expires=created + 60 if expires is None else expires,
                nonce=uuid.uuid4().hex if nonce == "auto" else nonce,
                **kwargs,
            )
        )
        return headers


@contextlib.asynccontextmanager
async def run_fake_peer() -> AsyncIterator[FakePeer]:
    """Serve a FakePeer's DID document on a free loopback port."""
    port = free_port()
    peer = FakePeer(f"http://localhost:{port}")
    peer.publish()

    async def did_document(request: Request) -> Response:
        peer.fetches += 1
        return JSONResponse(peer.document, media_type="application/did+json", headers=peer.headers)

    async def file(request: Request) -> Response:
        body = peer.files.get(request.url.path)
        if body is None:
            return Response(status_code=404)
        return Response(body, media_type="application/json")

    app = Starlette(
        routes=[Route("/users/mallory/did.json", did_document), Route("/{path:path}", file)]
    )
    async with serve(app, port):
        yield peer
