"""Web Push: the instance's VAPID key and one encrypted, signed push message per subscription.

- The VAPID key (RFC 8292) is a P-256 key generated on first start and kept in
  ``instance_keys`` (purpose ``vapid``), so subscriptions survive restarts; browsers get its
  public key (uncompressed point, base64url: the Push API's ``applicationServerKey``).
- A message (RFC 8030 §5) is ``POST``ed to the subscription's endpoint with the payload
  encrypted per RFC 8291 (``Content-Encoding: aes128gcm``, RFC 8188, by ``http_ece``: a fresh
  ECDH key per message against the subscription's ``p256dh``, mixed with its ``auth`` secret)
  and ``Authorization: vapid t=<JWT>, k=<public key>`` (RFC 8292 §3, by ``py_vapid``: ES256
  JWT with ``aud`` = the endpoint's origin, ``exp`` 12 h ahead, ``sub`` the operator contact).
- It goes through the outbound address policy like every request to a stranger-chosen URL
  (:meth:`did.outbound.OutboundPolicy.send`), and the answer is classified: 2xx ``sent``;
  404/410 ``gone`` (RFC 8030 §7.3: the subscription has expired — the caller deletes it);
  429, 5xx and network errors ``retry``; any other answer ``failed``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import asyncpg
import http_ece
import httpx
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from py_vapid import Vapid02

from did.errors import AddressRefusedError, DIDResolutionError
from did.outbound import OutboundPolicy
from gateway.ids import new_id
from gateway.settings import Settings
from gateway.store import keys as keys_store

log = logging.getLogger(__name__)

VAPID = "vapid"
JWT_LIFETIME_SECONDS = 12 * 3600
"""RFC 8292 §2: ``exp`` MUST NOT be more than 24 hours ahead."""
MAX_PAYLOAD_BYTES = 3072
"""Plaintext bound: RFC 8291 §4 lets push services refuse records over 4096 octets."""

PushOutcome = Literal["sent", "gone", "retry", "failed"]


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2), the Push API's encoding of keys."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode base64url with or without padding. Raises ValueError (binascii.Error)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class VapidKey:
    """The instance's VAPID signing key."""

    private_key: ec.EllipticCurvePrivateKey

    @property
    def public_key(self) -> str:
        """The uncompressed P-256 public point, base64url (65 bytes decoded)."""
        raw = self.private_key.public_key().public_bytes(
            Encoding.X962, PublicFormat.UncompressedPoint
        )
        return b64url(raw)

    def authorization(self, endpoint: str, *, subject: str, now: int) -> str:
        """The ``Authorization`` header value for a push to ``endpoint`` (RFC 8292 §3)."""
        parts = urlsplit(endpoint)
        claims = {
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": now + JWT_LIFETIME_SECONDS,
            "sub": subject,
        }
        # "no-strict": the subject is the operator's setting, checked there, and a
        # development instance's http:// URL is a fine contact for a local push service.
        headers: dict[str, str] = Vapid02(self.private_key, conf={"no-strict": True}).sign(claims)
        return headers["Authorization"]


def vapid_subject(settings: Settings) -> str:
    """The VAPID ``sub`` claim (RFC 8292 §2.1): ``push_subject``, else ``mailto:`` the
    ``smtp_from`` address, else the public URL."""
    if settings.push_subject:
        return settings.push_subject
    if settings.smtp_from:
        return f"mailto:{settings.smtp_from}"
    return settings.public_url


async def load_vapid_key(pool: asyncpg.Pool) -> VapidKey:
    """The instance's VAPID key, generated and stored on first call (safe under races)."""
    async with pool.acquire() as conn:
        rows = await keys_store.list_keys(conn, purpose=VAPID)
        if not any(r.retired_at is None for r in rows):
            key = ec.generate_private_key(ec.SECP256R1())
            raw = key.private_numbers().private_value.to_bytes(32, "big")
            await keys_store.insert_key_if_none(
                conn, id=new_id(), purpose=VAPID, fragment="vapid-1", private_key=raw
            )
            rows = await keys_store.list_keys(conn, purpose=VAPID)
    active = [r for r in rows if r.retired_at is None][-1]
    scalar = int.from_bytes(bytes(active.private_key), "big")
    return VapidKey(ec.derive_private_key(scalar, ec.SECP256R1()))


def encrypt_payload(payload: bytes, *, p256dh: bytes, auth: bytes) -> bytes:
    """The RFC 8291 ``aes128gcm`` body of ``payload`` for a subscription's keys: header
    (salt, record size, the sender's ephemeral public key as keyid) and one record."""
    sender = ec.generate_private_key(ec.SECP256R1())
    body: bytes = http_ece.encrypt(
        payload,
        salt=os.urandom(16),
        private_key=sender,
        dh=p256dh,
        auth_secret=auth,
        version="aes128gcm",
    )
    return body


@dataclass(frozen=True)
class PushTarget:
    """Where one push goes: the endpoint and the subscription's keys."""

    endpoint: str
    p256dh: bytes
    auth: bytes


class WebPushSender:
    """Sends one push message: encrypt, sign, post under the address policy, classify."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        policy: OutboundPolicy,
        key: VapidKey,
        *,
        subject: str,
        ttl: int,
        timeout: float,
    ) -> None:
        self._client = client
        self._policy = policy
        self._key = key
        self._subject = subject
        self._ttl = ttl
        self._timeout = timeout

    async def send(self, target: PushTarget, message: dict[str, Any], *, now: int) -> PushOutcome:
        """Deliver ``message`` (JSON object, at most MAX_PAYLOAD_BYTES encoded) to ``target``.

        Never raises for the push service's behaviour: every answer and network failure is
        an outcome (module docstring).
        """
        payload = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"push payload of {len(payload)} bytes is over {MAX_PAYLOAD_BYTES}")
        request = self._client.build_request(
            "POST",
            target.endpoint,
            content=encrypt_payload(payload, p256dh=target.p256dh, auth=target.auth),
            headers={
                "Content-Encoding": "aes128gcm",
                "Content-Type": "application/octet-stream",
                "TTL": str(self._ttl),
                "Urgency": "normal",
                # RFC 8030 §5.4: a newer message with the same topic replaces one the push
                # service still holds, so an offline browser wakes up to one notification.
                "Topic": "confer-messages",
                "Authorization": self._key.authorization(
                    target.endpoint, subject=self._subject, now=now
                ),
            },
        )
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._policy.send(self._client, request)
                await response.aclose()
        except AddressRefusedError as exc:
            log.warning("push endpoint refused by the address policy: %s", exc.detail)
            return "gone"
        except (TimeoutError, DIDResolutionError, httpx.HTTPError, httpx.InvalidURL) as exc:
            log.info(
                "push to %s failed: %s",
                urlsplit(target.endpoint).netloc,
                str(exc) or type(exc).__name__,
            )
            return "retry"
        return classify(response.status_code)


def classify(status: int) -> PushOutcome:
    """The outcome of a push service's answer (RFC 8030 §5, §7.3, §8.4)."""
    if 200 <= status < 300:
        return "sent"
    if status in (404, 410):
        return "gone"
    if status == 429 or status >= 500:
        return "retry"
    return "failed"
