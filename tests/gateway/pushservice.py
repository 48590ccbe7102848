"""Test peers for notifications: a Web Push service and an SMTP server, both on loopback.

``PushService`` is a real HTTP server (uvicorn) that plays a push service (RFC 8030): each
``POST /push/{name}`` is checked the way a push service and a browser would check it, with
code of its own (not the gateway's libraries):

- the VAPID ``Authorization: vapid t=<JWT>, k=<key>`` (RFC 8292 §3): ``k`` must be the
  instance's public key, the JWT must verify as ES256 against it, its ``aud`` must be this
  server's origin and its ``exp`` in the future but at most 24 hours ahead;
- the body is decrypted per RFC 8291 (ECDH with the subscription's private key, HKDF with the
  auth secret, ``aes128gcm`` of RFC 8188) and parsed as JSON.

Checked requests are kept in ``received[name]``; a failed check in ``errors``. The answer's
status is ``status[name]`` (default 201 Created).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import struct
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

import jwt
from aiosmtpd.controller import Controller
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.gateway.harness import free_port, serve


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


@dataclass
class Browser:
    """A user agent's push subscription keys (RFC 8291 §3): its ECDH key pair and secret."""

    private_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def public_bytes(self) -> bytes:
        return self.private_key.public_key().public_bytes(
            Encoding.X962, PublicFormat.UncompressedPoint
        )

    def subscription(self, endpoint: str) -> dict[str, Any]:
        """The body a browser posts: ``PushSubscription.toJSON()``."""
        return {
            "endpoint": endpoint,
            "expirationTime": None,
            "keys": {"p256dh": b64url(self.public_bytes), "auth": b64url(self.auth)},
        }

    def decrypt(self, body: bytes) -> bytes:
        """RFC 8291 §3.4 / RFC 8188 §2: one aes128gcm record for this browser."""
        salt, rs, idlen = body[:16], struct.unpack("!I", body[16:20])[0], body[20]
        sender_public = body[21 : 21 + idlen]
        ciphertext = body[21 + idlen :]
        assert idlen == 65 and rs >= 18 and len(ciphertext) <= rs, "one record, keyid = as_public"
        sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender_public)
        shared = self.private_key.exchange(ec.ECDH(), sender)
        info = b"WebPush: info\x00" + self.public_bytes + sender_public
        ikm = _hkdf(self.auth, shared, info, 32)
        cek = _hkdf(salt, ikm, b"Content-Encoding: aes128gcm\x00", 16)
        nonce = _hkdf(salt, ikm, b"Content-Encoding: nonce\x00", 12)
        padded = AESGCM(cek).decrypt(nonce, ciphertext, None)
        unpadded = padded.rstrip(b"\x00")
        assert unpadded.endswith(b"\x02"), "the last record ends with delimiter 0x02"
        return unpadded[:-1]


@dataclass
class PushService:
    """A push service on 127.0.0.1 (module docstring)."""

    port: int
    vapid_public_key: str = ""
    browsers: dict[str, Browser] = field(default_factory=dict)
    received: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    headers: dict[str, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))
    status: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def endpoint(self, name: str) -> str:
        return f"{self.origin}/push/{name}"

    def browser(self, name: str) -> Browser:
        return self.browsers.setdefault(name, Browser())

    def _check_vapid(self, authorization: str) -> None:
        scheme, _, params = authorization.partition(" ")
        assert scheme.lower() == "vapid", f"scheme {scheme!r}"
        parts = dict(p.strip().split("=", 1) for p in params.split(","))
        assert parts["k"] == self.vapid_public_key, "k is not the instance's VAPID key"
        point = unb64url(parts["k"])
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        claims = jwt.decode(
            parts["t"],
            key,
            algorithms=["ES256"],
            audience=self.origin,
            options={"require": ["exp"]},
        )
        assert claims["exp"] <= time.time() + 24 * 3600, "exp more than 24 h ahead"
        assert claims.get("sub"), "no sub claim"

    async def _push(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.hits[name] += 1
        try:
            assert request.headers["content-encoding"] == "aes128gcm"
            assert int(request.headers["ttl"]) >= 0
            self._check_vapid(request.headers["authorization"])
            payload = json.loads(self.browser(name).decrypt(await request.body()))
        except Exception as exc:
            self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            return Response(status_code=400)
        self.received[name].append(payload)
        self.headers[name].append(dict(request.headers))
        return Response(status_code=self.status.get(name, 201))

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/push/{name}", self._push, methods=["POST"])])


@contextlib.asynccontextmanager
async def push_service() -> AsyncIterator[PushService]:
    """A running :class:`PushService`; set ``vapid_public_key`` before pushes arrive."""
    service = PushService(free_port())
    async with serve(service.app(), service.port):
        yield service


class _Sink:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"


@contextlib.contextmanager
def smtp_server() -> Any:
    """An aiosmtpd SMTP server on 127.0.0.1; yields (port, list of (recipients, message))."""
    sink = _Sink()
    port = free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, sink.messages
    finally:
        controller.stop()
