"""Where attachment bytes live: a small interface, a local-folder implementation, and the
factory that picks it or the S3-compatible one (:mod:`gateway.storage_s3`) from the settings.

Keys are chosen by Confer (ULIDs), never by the uploader, so no path can escape the folder or
the bucket. A stored blob is named by its storage URL, ``<scheme>:<key>`` (``local:…``,
``s3:…``), kept in ``attachments.storage_url``; where the folder or the bucket is comes from
the settings, so either can move without touching the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import tempfile
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import (
    AttachmentUnavailableError,
    PayloadTooLargeError,
    StorageUnavailableError,
)

if TYPE_CHECKING:
    from gateway.settings import Settings

log = logging.getLogger(__name__)

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
        """Remove a blob; missing blobs are ignored. Raises StorageUnavailableError (503)
        when the store fails."""

    @abstractmethod
    async def close(self) -> None:
        """Release what the storage holds open (connections, threads); idempotent."""

    @abstractmethod
    async def check(self) -> None:
        """Run at start-up: raise StorageUnavailableError, naming the setting, when the
        storage cannot be used at all (the gateway then refuses to start)."""


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
    """Blobs as files under ``root`` (created on demand); URLs are ``local:<key>``.

    A folder that cannot be written (a regular file in its place, no permission, a full or
    read-only disk) is StorageUnavailableError (503 ``storage_unavailable``; the OS error is
    logged, not shown), never a 500; :meth:`check` finds it at start-up.
    """

    def __init__(self, root: Path, *, setting: str = "CONFER_ATTACHMENTS_DIR") -> None:
        self.root = root
        self.setting = setting

    def _path(self, storage_url: str) -> Path:
        return self.root / own_key(storage_url, "local")

    def _unavailable(self, doing: str, exc: OSError) -> StorageUnavailableError:
        log.warning("attachment folder %s: cannot %s: %s", self.root, doing, exc)
        return StorageUnavailableError()

    async def check(self) -> None:
        """Create the folder if needed and write (then remove) a probe file in it. Raises
        StorageUnavailableError whose detail names the setting when that fails."""

        def probe() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".confer-probe-"):
                pass

        try:
            await asyncio.to_thread(probe)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise StorageUnavailableError(
                f"{self.setting}={self.root} is not a writable directory ({reason})"
            ) from exc

    async def save(self, key: str, read: ReadChunk, *, max_bytes: int) -> tuple[int, str, str]:
        url = f"local:{key}"
        path = self._path(url)
        upload = Metered(read, max_bytes)
        try:
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
            handle = await asyncio.to_thread(open, path, "wb")
        except OSError as exc:
            raise self._unavailable("store a file", exc) from exc
        try:
            async for chunk in upload.chunks():
                await asyncio.to_thread(handle.write, chunk)
            await asyncio.to_thread(handle.close)
        except BaseException as exc:
            handle.close()
            with contextlib.suppress(OSError):
                await asyncio.to_thread(path.unlink, True)
            if isinstance(exc, OSError):
                raise self._unavailable("store a file", exc) from exc
            raise
        return upload.size, upload.sha256, url

    async def open(self, storage_url: str) -> AsyncGenerator[bytes, None]:
        try:
            handle = await asyncio.to_thread(open, self._path(storage_url), "rb")
        except FileNotFoundError as exc:
            raise AttachmentUnavailableError("the file's bytes are missing from storage") from exc
        except OSError as exc:
            raise self._unavailable("read a file", exc) from exc
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        except OSError as exc:
            raise self._unavailable("read a file", exc) from exc
        finally:
            handle.close()

    async def delete(self, storage_url: str) -> None:
        """Remove the file; a missing one is ignored, any other failure is
        StorageUnavailableError."""
        if not storage_url.startswith("local:"):
            return  # not kept here: nothing to remove
        try:
            await asyncio.to_thread(self._path(storage_url).unlink, True)
        except OSError as exc:
            raise self._unavailable("remove a file", exc) from exc

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
