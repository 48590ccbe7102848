"""Fixtures for the ``did`` tests: loopback HTTP and HTTPS servers and a trusting client.

``server`` is a plain-HTTP ``LoopbackServer`` (``tests/did/httpserver.py``);
``tls_server`` serves HTTPS with a self-signed ``localhost`` certificate
(``certificate``) that only ``tls_client`` trusts.
"""

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.did.httpserver import LoopbackServer
from tests.tls import self_signed_localhost


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer() as server:
        yield server


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate valid for DNS name ``localhost`` only (no IP SAN)."""
    return self_signed_localhost(tmp_path)


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
