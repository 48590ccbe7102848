"""Fixtures of the gateway tests: an S3-compatible server (moto) and a bucket per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gateway.s3server import S3Server, moto_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto server for the session, started on first use."""
    with moto_server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on :func:`s3_server`."""
    return s3_server.new_bucket()
