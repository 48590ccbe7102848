"""Where attachment bytes live: a small interface, a local-folder implementation, and the
factory that picks it or the S3-compatible one (:mod:`gateway.storage_s3`) from the settings.

Keys are chosen by Confer (ULIDs), never by the uploader, so no path can escape the folder or
the bucket. A stored blob is named by its storage URL, ``<scheme>:<key>`` (``local:…``,
``s3:…``), kept in ``attachments.storage_url``; where the folder or the bucket is comes from
the settings, so either can move without touching the rows.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import AttachmentUnavailableError, PayloadTooLargeError

if TYPE_CHECKING:
    from gateway.settings import Settings

CHUNK = 64 * 1024

ReadChunk = Callable[[int], Awaitable[bytes]]


def file_limit_text(max_bytes: int) -> str:
    """What a refused upload tells a person: the file limit in MiB (``26214400`` → ``"files
    are limited to 25 MiB"``; one decimal when it is not a whole number of MiB)."""
    mib = max_bytes / (1024 * 1024)
    shown = f"{mib:.0f}" if mib == int(mib) else f"{mib:.1f}"
    return f"files are limited to {shown} MiB"


class AttachmentStorage(ABC):
    """Stores blobs by key; ``save`` streams, hashes and caps the size."""

    @abstractmethod
    async def save(self, key: str, read: ReadChunk, *, max_bytes: int) -> tuple[int, str, str]:
        """Store everything ``read`` yields under ``key``; returns (size, SHA-256 hex, URL).

        Raises PayloadTooLargeError (413) once more than ``max_bytes`` arrive (nothing kept).
        """

    @abstractmethod
    def open(self, storage_url: str) -> AsyncGenerator[bytes, None]:
        """The stored bytes, in chunks. Raises (on the first chunk) AttachmentUnavailableError
        (409) when the blob is not there."""

    @abstractmethod
    async def delete(self, storage_url: str) -> None:
        """Remove a blob; missing blobs are ignored."""

    @abstractmethod
    async def close(self) -> None:
        """Release what the storage holds open (connections, threads); idempotent."""


class Metered:
    """An upload's chunks, counted and hashed (SHA-256) as they pass. Iterating
    :meth:`chunks` raises PayloadTooLargeError (413) once more than ``max_bytes`` arrived."""

    def __init__(self, read: ReadChunk, max_bytes: int) -> None:
        self._read, self._max_bytes = read, max_bytes
        self._digest = hashlib.sha256()
        self.size = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        """Everything ``read`` yields, in chunks of up to :data:`CHUNK` bytes."""
        while chunk := await self._read(CHUNK):
            self.size += len(chunk)
            if self.size > self._max_bytes:
                raise PayloadTooLargeError(file_limit_text(self._max_bytes))
            self._digest.update(chunk)
            yield chunk

    @property
    def sha256(self) -> str:
        """The SHA-256 (hex) of the chunks so far."""
        return self._digest.hexdigest()


def storage_key(storage_url: str) -> str:
    """The key of a storage URL (``local:KEY`` or ``s3:KEY``, KEY alphanumeric).

    Raises ValueError for anything else (a URL the database should never hold).
    """
    scheme, _, key = storage_url.partition(":")
    if scheme not in ("local", "s3") or not key.isalnum() or not key.isascii():
        raise ValueError(f"not a storage URL: {storage_url!r}")
    return key


def own_key(storage_url: str, scheme: str) -> str:
    """The key of a storage URL of ``scheme`` (this storage's). A URL of the other storage —
    the setting was switched without a backup and restore — is AttachmentUnavailableError
    (409): its bytes are not where this storage looks."""
    key = storage_key(storage_url)
    if not storage_url.startswith(f"{scheme}:"):
        raise AttachmentUnavailableError("the file is kept in another attachment storage")
    return key


async def opened(storage: AttachmentStorage, storage_url: str) -> AsyncIterator[bytes]:
    """``storage.open(storage_url)`` with its first chunk already read, so a missing blob
    (AttachmentUnavailableError, 409) or an unreachable store (StorageUnavailableError, 503)
    is raised here, before a response has started, not in the middle of one."""
    chunks = storage.open(storage_url)
    first = await anext(chunks, b"")

    async def rest() -> AsyncIterator[bytes]:
        try:
            if first:
                yield first
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.aclose()

    return rest()


class LocalStorage(AttachmentStorage):
    """Blobs as files under ``root`` (created on demand); URLs are ``local:<key>``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, storage_url: str) -> Path:
        return self.root / own_key(storage_url, "local")

    async def save(self, key: str, read: ReadChunk, *, max_bytes: int) -> tuple[int, str, str]:
        url = f"local:{key}"
        path = self._path(url)
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        upload = Metered(read, max_bytes)
        handle = await asyncio.to_thread(open, path, "wb")
        try:
            async for chunk in upload.chunks():
                await asyncio.to_thread(handle.write, chunk)
        except BaseException:
            handle.close()
            await asyncio.to_thread(path.unlink, True)
            raise
        handle.close()
        return upload.size, upload.sha256, url

    async def open(self, storage_url: str) -> AsyncGenerator[bytes, None]:
        try:
            handle = await asyncio.to_thread(open, self._path(storage_url), "rb")
        except FileNotFoundError as exc:
            raise AttachmentUnavailableError("the file's bytes are missing from storage") from exc
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def delete(self, storage_url: str) -> None:
        if not storage_url.startswith("local:"):
            return  # not kept here: nothing to remove
        path = self._path(storage_url)
        if await asyncio.to_thread(os.path.exists, path):
            await asyncio.to_thread(path.unlink, True)

    async def close(self) -> None:
        """Nothing is held open between calls."""


def attachment_storage(settings: Settings) -> AttachmentStorage:
    """The storage the settings name: an S3-compatible bucket for ``attachment_storage`` s3,
    else the folder ``attachments_dir`` (default ``<data_dir>/attachments``). The caller
    closes it (:meth:`AttachmentStorage.close`)."""
    if settings.attachment_storage == "s3":
        from gateway.storage_s3 import S3Storage  # lazily: boto3 loads only when it is used

        return S3Storage.from_settings(settings)
    return LocalStorage(Path(settings.attachments_dir or settings.data_dir / "attachments"))
