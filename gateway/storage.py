"""Where attachment bytes live: a small interface, and a local-folder implementation.

``AttachmentStorage`` is what an S3-compatible backend would implement next. Keys are chosen
by Confer (attachment ULIDs), never by the uploader, so no path can escape the folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import PayloadTooLargeError

if TYPE_CHECKING:
    from gateway.settings import Settings

CHUNK = 64 * 1024

ReadChunk = Callable[[int], Awaitable[bytes]]


class AttachmentStorage(ABC):
    """Stores blobs by key; ``save`` streams, hashes and caps the size."""

    @abstractmethod
    async def save(self, key: str, read: ReadChunk, *, max_bytes: int) -> tuple[int, str, str]:
        """Store everything ``read`` yields under ``key``; returns (size, SHA-256 hex, URL).

        Raises PayloadTooLargeError (413) once more than ``max_bytes`` arrive (nothing kept).
        """

    @abstractmethod
    def open(self, storage_url: str) -> AsyncIterator[bytes]:
        """The stored bytes, in chunks."""

    @abstractmethod
    async def delete(self, storage_url: str) -> None:
        """Remove a blob; missing blobs are ignored."""


class LocalStorage(AttachmentStorage):
    """Blobs as files under ``root`` (created on demand); URLs are ``local:<key>``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, storage_url: str) -> Path:
        key = storage_url.removeprefix("local:")
        if not key.isalnum():
            raise ValueError(f"not a local storage key: {storage_url!r}")
        return self.root / key

    async def save(self, key: str, read: ReadChunk, *, max_bytes: int) -> tuple[int, str, str]:
        url = f"local:{key}"
        path = self._path(url)
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        handle = await asyncio.to_thread(open, path, "wb")
        try:
            while chunk := await read(CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise PayloadTooLargeError(f"attachments are limited to {max_bytes} bytes")
                digest.update(chunk)
                await asyncio.to_thread(handle.write, chunk)
        except BaseException:
            handle.close()
            await asyncio.to_thread(path.unlink, True)
            raise
        handle.close()
        return size, digest.hexdigest(), url

    async def open(self, storage_url: str) -> AsyncIterator[bytes]:
        handle = await asyncio.to_thread(open, self._path(storage_url), "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def delete(self, storage_url: str) -> None:
        path = self._path(storage_url)
        if await asyncio.to_thread(os.path.exists, path):
            await asyncio.to_thread(path.unlink, True)


def attachment_storage(settings: Settings) -> LocalStorage:
    """The storage the settings name: ``attachments_dir``, else ``<data_dir>/attachments``."""
    return LocalStorage(Path(settings.attachments_dir or settings.data_dir / "attachments"))
