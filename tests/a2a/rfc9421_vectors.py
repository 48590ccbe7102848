"""Test vectors from RFC 9421 Appendix B, shared by the signature and signature-base tests.

Source: RFC 9421 Appendix B.1.4 (the ``test-key-ed25519`` key pair), B.2 (the example
request with its ``Content-Digest``, RFC 9530) and B.2.6 (the Ed25519 signature over
``date @method @path @authority content-type content-length``).
"""

from __future__ import annotations

PRIVATE_PEM = b"""-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----
"""
PUBLIC_PEM = b"""-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=
-----END PUBLIC KEY-----
"""
RFC_URL = "https://example.com/foo?param=Value&Pet=dog"
RFC_BODY = b'{"hello": "world"}'
RFC_DIGEST = (
    "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgB"
    "WnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"
)
RFC_HEADERS = [
    ("Host", "example.com"),
    ("Date", "Tue, 20 Apr 2021 02:07:55 GMT"),
    ("Content-Type", "application/json"),
    ("Content-Digest", RFC_DIGEST),
    ("Content-Length", "18"),
]
B26_COMPONENTS = ("date", "@method", "@path", "@authority", "content-type", "content-length")
B26_PARAMS = (
    '("date" "@method" "@path" "@authority" "content-type" "content-length")'
    ';created=1618884473;keyid="test-key-ed25519"'
)
B26_BASE = "\n".join(
    [
        '"date": Tue, 20 Apr 2021 02:07:55 GMT',
        '"@method": POST',
        '"@path": /foo',
        '"@authority": example.com',
        '"content-type": application/json',
        '"content-length": 18',
        f'"@signature-params": {B26_PARAMS}',
    ]
).encode("ascii")
B26_SIGNATURE_INPUT = f"sig-b26={B26_PARAMS}"
B26_SIGNATURE = (
    "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQ"
    "CK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:"
)
