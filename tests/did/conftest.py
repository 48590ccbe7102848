"""Fixtures for the ``did`` tests: loopback HTTP and HTTPS servers and a trusting client.

``server`` is a plain-HTTP ``LoopbackServer`` (``tests/did/httpserver.py``);
``tls_server`` serves HTTPS with a self-signed ``localhost`` certificate
(``certificate``) that only ``tls_client`` trusts.
"""

import datetime
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID

from tests.did.httpserver import LoopbackServer


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer() as server:
        yield server


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate valid for DNS name ``localhost`` only (no IP SAN)."""
    key = Ed25519PrivateKey.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, None)
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
async def tls_server(certificate: tuple[Path, Path]) -> AsyncIterator[LoopbackServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    async with LoopbackServer(context) as server:
        yield server


@pytest.fixture
async def tls_client(certificate: tuple[Path, Path]) -> AsyncIterator[httpx.AsyncClient]:
    """A client that trusts only the self-signed ``localhost`` certificate."""
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    async with httpx.AsyncClient(verify=trust, trust_env=False) as client:
        yield client
