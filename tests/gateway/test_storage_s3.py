"""S3Storage against a real S3-compatible server (moto's server mode on loopback): streamed
single-request and multipart uploads, the size cap while streaming, reads and deletes, and
what a missing object or an unreachable store answers."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator

import pytest

from gateway.errors import (
    AttachmentUnavailableError,
    PayloadTooLargeError,
    StorageUnavailableError,
)
from gateway.settings import Settings
from gateway.storage import ReadChunk, opened
from gateway.storage_s3 import PART_SIZE, S3Storage
from tests.gateway.harness import free_port
from tests.gateway.s3server import S3Server


def _reader(data: bytes, chunk: int = 100_000) -> ReadChunk:
    """What an upload's ``read`` gives: ``data`` in pieces of up to ``chunk`` bytes."""
    offset = 0

    async def read(_: int) -> bytes:
        nonlocal offset
        piece = data[offset : offset + chunk]
        offset += len(piece)
        return piece

    return read


async def _read_all(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


@pytest.fixture
async def storage(s3_server: S3Server, s3_bucket: str) -> AsyncIterator[S3Storage]:
    settings = Settings(**s3_server.settings(s3_bucket, s3_prefix="files/"))
    made = await asyncio.to_thread(S3Storage.from_settings, settings)
    yield made
    await made.close()


async def test_a_small_file_is_one_object(storage: S3Storage, s3_server: S3Server) -> None:
    data = os.urandom(300_000)
    size, sha256, url = await storage.save("01SMALL", _reader(data), max_bytes=len(data))
    assert (size, sha256, url) == (len(data), hashlib.sha256(data).hexdigest(), "s3:01SMALL")
    assert await asyncio.to_thread(s3_server.keys, storage.bucket) == ["files/01SMALL"]
    assert await _read_all(await opened(storage, url)) == data
    await storage.delete(url)
    assert await asyncio.to_thread(s3_server.keys, storage.bucket) == []
    await storage.delete(url)  # a missing object is no error


async def test_a_large_file_is_a_multipart_upload(storage: S3Storage, s3_server: S3Server) -> None:
    data = os.urandom(PART_SIZE + 3 * 1024 * 1024 + 17)
    size, sha256, url = await storage.save("01LARGE", _reader(data), max_bytes=len(data))
    assert size == len(data) and sha256 == hashlib.sha256(data).hexdigest()
    head = await asyncio.to_thread(
        s3_server.client().head_object, Bucket=storage.bucket, Key="files/01LARGE"
    )
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-2")  # two parts: the multipart ETag form
    assert await _read_all(storage.open(url)) == data


async def test_the_size_cap_applies_while_streaming(
    storage: S3Storage, s3_server: S3Server
) -> None:
    cap = PART_SIZE + 1024 * 1024
    with pytest.raises(PayloadTooLargeError):  # over the cap after the first part was sent
        await storage.save("01TOOBIG", _reader(os.urandom(cap + 1)), max_bytes=cap)
    assert await asyncio.to_thread(s3_server.keys, storage.bucket) == []
    assert await asyncio.to_thread(s3_server.open_uploads, storage.bucket) == []
    with pytest.raises(PayloadTooLargeError):  # within the first part: nothing was sent
        await storage.save("01TOOBIG", _reader(b"x" * 1001), max_bytes=1000)
    assert await asyncio.to_thread(s3_server.keys, storage.bucket) == []


async def test_a_missing_object_is_unavailable(storage: S3Storage) -> None:
    with pytest.raises(AttachmentUnavailableError):
        await opened(storage, "s3:01MISSING")
    with pytest.raises(AttachmentUnavailableError, match="another attachment storage"):
        await opened(storage, "local:01ELSEWHERE")  # the setting switched without a restore
    await storage.delete("local:01ELSEWHERE")  # not kept here: nothing to remove


async def test_an_unreachable_store_or_bucket_is_storage_unavailable(
    s3_server: S3Server,
) -> None:
    nobody = Settings(
        **{**s3_server.settings("b"), "s3_endpoint_url": f"http://127.0.0.1:{free_port()}"}
    )
    no_bucket = Settings(**s3_server.settings("confer-no-such-bucket"))
    for settings in (nobody, no_bucket):
        storage = await asyncio.to_thread(S3Storage.from_settings, settings)
        try:
            with pytest.raises(StorageUnavailableError) as caught:
                await storage.save("01X", _reader(b"abc"), max_bytes=10)
            assert caught.value.detail == "The attachment storage is unavailable"
            with pytest.raises(StorageUnavailableError):
                await opened(storage, "s3:01X")
        finally:
            await storage.close()


def test_s3_settings_need_a_bucket_and_both_key_halves() -> None:
    with pytest.raises(ValueError, match="CONFER_S3_BUCKET"):
        Settings(attachment_storage="s3")
    with pytest.raises(ValueError, match="both"):
        Settings(attachment_storage="s3", s3_bucket="b", s3_access_key_id="only-half")
