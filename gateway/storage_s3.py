"""Attachment bytes in an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, Garage, …).

boto3's client is synchronous; every call runs on this storage's own small thread pool, so a
slow store never takes the threads the rest of the gateway uses for files and password hashes
(:func:`asyncio.to_thread`). An upload is streamed: the SHA-256 and the size are computed as
the chunks arrive, the size cap is enforced on the way, and at most one part
(:data:`PART_SIZE`) is held in memory. A file smaller than a part is one ``PutObject``; a
larger one is a multipart upload (``CreateMultipartUpload``, ``UploadPart``…,
``CompleteMultipartUpload``), aborted when the upload fails or is cut off, so no object and
no orphaned parts are left. Downloads are proxied through the gateway (``GetObject`` streamed
in chunks), so the store never needs to be reachable by clients or peers and every download
passes the gateway's own authorization. Storage URLs are ``s3:<key>``; the object is
``<s3_prefix><key>`` in ``s3_bucket``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from gateway.errors import AttachmentUnavailableError, StorageUnavailableError
from gateway.storage import AttachmentStorage, Metered, ReadChunk, own_key

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

    from gateway.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

PART_SIZE = 8 * 1024 * 1024
"""Bytes per multipart part (S3 wants at least 5 MiB for every part but the last)."""
READ_SIZE = 256 * 1024
"""Bytes per read of a download: one thread hop each."""
THREADS = 8
"""Concurrent calls to the store (also the client's connection pool size)."""
MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class S3Storage(AttachmentStorage):
    """Blobs as objects ``<prefix><key>`` in ``bucket``; URLs are ``s3:<key>``.

    Raises StorageUnavailableError (503) when the store fails or refuses a call (the store's
    answer is logged, not shown to the client), AttachmentUnavailableError (409) for a blob
    that is not there, PayloadTooLargeError (413) over an upload's ``max_bytes``.
    """

    def __init__(
        self, client: S3Client, bucket: str, *, prefix: str = "", part_size: int = PART_SIZE
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.part_size = part_size
        self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="confer-s3")

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Storage:
        """The bucket of ``settings.s3_*`` (path-style addressing when ``s3_path_style``)."""
        config = Config(
            region_name=settings.s3_region,
            signature_version="s3v4",
            s3={"addressing_style": "path" if settings.s3_path_style else "auto"},
            connect_timeout=10,
            read_timeout=60,
            retries={"mode": "standard", "max_attempts": 3},
            max_pool_connections=THREADS,
            # Only the checksums S3 requires: many S3-compatible services refuse the
            # trailing CRC checksums newer SDKs send by default.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        client = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.s3_endpoint_url or None,
            aws_access_key_id=settings.s3_access_key_id or None,
            aws_secret_access_key=settings.s3_secret_access_key or None,
            config=config,
        )
        return cls(client, settings.s3_bucket, prefix=settings.s3_prefix)

    def _object(self, storage_url: str) -> str:
        return self.prefix + own_key(storage_url, "s3")

    async def _call(self, method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``method(*args, **kwargs)`` on the storage's threads; store errors become ours."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._threads, functools.partial(method, *args, **kwargs)
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in MISSING:
                raise AttachmentUnavailableError(
                    "the file's bytes are missing from storage"
                ) from exc
            log.warning("attachment storage refused %s: %s", getattr(method, "__name__", ""), exc)
            raise StorageUnavailableError() from exc
        except BotoCoreError as exc:
            log.warning("attachment storage unreachable: %s", exc)
            raise StorageUnavailableError() from exc

    async def save(self, key: str, read: ReadChunk, *, max_bytes: int) -> tuple[int, str, str]:
        url = f"s3:{key}"
        upload = _Upload(self, self._object(url))
        metered = Metered(read, max_bytes)
        buffer = bytearray()
        try:
            async for chunk in metered.chunks():
                buffer += chunk
                if len(buffer) >= self.part_size:
                    part, buffer = buffer, bytearray()  # handed over, not copied
                    await upload.part(part)
            await upload.finish(buffer)
        except BaseException:
            await upload.abort()
            raise
        return metered.size, metered.sha256, url

    async def open(self, storage_url: str) -> AsyncGenerator[bytes, None]:
        name = self._object(storage_url)
        response = await self._call(self.client.get_object, Bucket=self.bucket, Key=name)
        body = response["Body"]
        try:
            while chunk := await self._call(body.read, READ_SIZE):
                yield chunk
        finally:
            body.close()

    async def delete(self, storage_url: str) -> None:
        if not storage_url.startswith("s3:"):
            return  # not kept here: nothing to remove
        # DeleteObject succeeds for a missing key: nothing to ignore.
        await self._call(
            self.client.delete_object, Bucket=self.bucket, Key=self._object(storage_url)
        )

    async def check(self) -> None:
        """Nothing at start-up: a bucket may be briefly unreachable, and each call then
        answers 503 ``storage_unavailable`` on its own."""

    async def close(self) -> None:
        await asyncio.to_thread(self._threads.shutdown, wait=True)
        self.client.close()


class _Upload:
    """One object being written: a ``PutObject`` if it ends within the first part, else a
    multipart upload begun with the first full part."""

    def __init__(self, storage: S3Storage, name: str) -> None:
        self._storage = storage
        self._name = name
        self._upload_id: str | None = None
        self._parts: list[CompletedPartTypeDef] = []

    async def part(self, data: bytearray) -> None:
        """Send one full part (beginning the multipart upload with the first)."""
        storage, client = self._storage, self._storage.client
        if self._upload_id is None:
            created = await storage._call(
                client.create_multipart_upload, Bucket=storage.bucket, Key=self._name
            )
            self._upload_id = created["UploadId"]
        number = len(self._parts) + 1
        sent = await storage._call(
            client.upload_part,
            Bucket=storage.bucket,
            Key=self._name,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=data,
        )
        self._parts.append({"ETag": sent["ETag"], "PartNumber": number})

    async def finish(self, rest: bytearray) -> None:
        """Store the last bytes: the whole object, or the last part and the completion."""
        storage, client = self._storage, self._storage.client
        if self._upload_id is None:
            await storage._call(client.put_object, Bucket=storage.bucket, Key=self._name, Body=rest)
            return
        if rest:
            await self.part(rest)
        await storage._call(
            client.complete_multipart_upload,
            Bucket=storage.bucket,
            Key=self._name,
            UploadId=self._upload_id,
            MultipartUpload={"Parts": self._parts},
        )
        self._upload_id = None

    async def abort(self) -> None:
        """Drop the parts sent so far (best effort: the bucket's lifecycle rule for
        incomplete uploads is the backstop)."""
        if self._upload_id is None:
            return
        storage = self._storage
        with contextlib.suppress(Exception):
            await storage._call(
                storage.client.abort_multipart_upload,
                Bucket=storage.bucket,
                Key=self._name,
                UploadId=self._upload_id,
            )
