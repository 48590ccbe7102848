"""A real S3-compatible server for tests: moto's server mode as a subprocess on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from gateway.settings import Settings
from tests.gateway.harness import free_port

ACCESS_KEY, SECRET_KEY, REGION = "test-access-key", "test-secret-key", "us-east-1"


@dataclass
class S3Server:
    """A running S3-compatible server at ``endpoint_url`` (any credentials are accepted)."""

    endpoint_url: str

    def client(self) -> Any:
        """A boto3 S3 client for checking what the gateway stored."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}),
        )

    def new_bucket(self) -> str:
        """A new empty bucket of its own name."""
        name = f"confer-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        """The object keys in ``bucket``."""
        listed = self.client().list_objects_v2(Bucket=bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def open_uploads(self, bucket: str) -> list[str]:
        """Keys of multipart uploads begun and neither completed nor aborted."""
        listed = self.client().list_multipart_uploads(Bucket=bucket)
        return [upload["Key"] for upload in listed.get("Uploads", [])]

    def settings(self, bucket: str, **extra: Any) -> dict[str, Any]:
        """Settings overrides that store attachments in ``bucket``."""
        return {
            "attachment_storage": "s3",
            "s3_endpoint_url": self.endpoint_url,
            "s3_region": REGION,
            "s3_bucket": bucket,
            "s3_access_key_id": ACCESS_KEY,
            "s3_secret_access_key": SECRET_KEY,
            "s3_path_style": True,
            **extra,
        }

    def env(self, bucket: str) -> dict[str, str]:
        """The same as ``CONFER_*`` environment variables, for ``confer serve``."""
        return {f"CONFER_{k.upper()}": str(v) for k, v in self.settings(bucket).items()}


@contextlib.contextmanager
def moto_server(within: float = 90.0) -> Iterator[S3Server]:
    """``python -m moto.server`` on a free loopback port, once it answers HTTP; stopped at
    exit. The deadline is generous: a loaded machine imports moto slowly."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + within
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise AssertionError(f"moto server not up: {log.read()[-2000:]!r}")
                with contextlib.suppress(httpx.HTTPError):
                    httpx.get(f"{endpoint}/moto-api/", timeout=2)
                    break
                time.sleep(0.2)
            yield S3Server(endpoint)
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def stored_blobs(settings: Settings) -> list[str]:
    """The blobs an instance's attachment storage holds: the folder's file names, or the
    bucket's object keys and open multipart uploads."""
    if settings.attachment_storage == "s3":
        s3, bucket = S3Server(settings.s3_endpoint_url or ""), settings.s3_bucket
        return await asyncio.to_thread(lambda: s3.keys(bucket) + s3.open_uploads(bucket))
    folder = Path(settings.attachments_dir or settings.data_dir / "attachments")
    return await asyncio.to_thread(lambda: sorted(p.name for p in folder.glob("*")))


STORAGES = ["local", "s3"]
"""The attachment storages a test parameterized with ``params=STORAGES`` runs over."""


async def storage_settings(request: pytest.FixtureRequest, folder: Path) -> dict[str, Any]:
    """Settings overrides for the storage ``request.param`` names: ``local`` (``folder``) or
    ``s3`` (a new bucket on the session's moto server, fixture ``s3_server``)."""
    if request.param == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        return s3.settings(await asyncio.to_thread(s3.new_bucket))
    return {"attachments_dir": folder}
