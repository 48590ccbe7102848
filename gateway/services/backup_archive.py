"""The backup archive: a tar file (POSIX.1-2001 pax) holding the database dump, the stored
files and a manifest with every member's size and SHA-256.

Members::

    database.pgdump          pg_dump --format=custom of one snapshot
    attachments/<key>        the bytes of each storage URL the snapshot references
    manifest.json            BackupManifest (written last, when every checksum is known)

Reading checks the manifest first and then every member against its checksum before anything
is restored, so a damaged or truncated archive is refused as a whole. The functions here are
synchronous file work; callers run them in a thread.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from datetime import datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from gateway.errors import BackupArchiveError
from gateway.storage import storage_key

MANIFEST = "manifest.json"
DATABASE = "database.pgdump"
CHUNK = 1024 * 1024


class ArchivedFile(BaseModel):
    """One member: its name in the archive, size in bytes and SHA-256 (hex)."""

    member: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ArchivedAttachment(ArchivedFile):
    """A stored file and the storage URL the database names it by."""

    storage_url: str

    @field_validator("storage_url")
    @classmethod
    def _is_a_storage_url(cls, value: str) -> str:
        storage_key(value)  # ValueError for anything else
        return value


class BackupManifest(BaseModel):
    """``manifest.json``: what the archive holds and where it came from."""

    format: Literal["confer-backup"] = "confer-backup"
    version: Literal[1] = 1
    created_at: datetime
    alembic_revision: str | None
    server_major: int
    pg_dump_major: int
    database: ArchivedFile
    attachments: list[ArchivedAttachment]
    missing: list[str] = Field(
        default_factory=list,
        description="Storage URLs the snapshot referenced whose bytes were gone by the copy.",
    )


def file_digest(path: Path) -> tuple[int, str]:
    """(size, SHA-256 hex) of a file, read in chunks."""
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            size += len(chunk)
            digest.update(chunk)
    return size, digest.hexdigest()


class ArchiveWriter:
    """Builds an archive at ``path`` (the caller writes to a temporary name and renames)."""

    def __init__(self, path: Path) -> None:
        self._tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT)

    def add_file(self, member: str, source: Path) -> ArchivedFile:
        """Copy ``source`` in as ``member``; returns its size and checksum."""
        size, sha256 = file_digest(source)
        info = tarfile.TarInfo(member)
        info.size, info.mode = size, 0o600
        with source.open("rb") as handle:
            self._tar.addfile(info, handle)
        return ArchivedFile(member=member, size=size, sha256=sha256)

    def add_manifest(self, manifest: BackupManifest) -> None:
        """Write ``manifest.json`` (last: it lists the checksums of everything before it)."""
        data = manifest.model_dump_json(indent=2).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mode = len(data), 0o600
        self._tar.addfile(info, io.BytesIO(data))

    def close(self) -> None:
        """Finish the tar file."""
        self._tar.close()


class ArchiveReader:
    """An archive opened for restoring: its manifest read and validated on opening.

    Raises BackupArchiveError when the file is not a tar archive, has no valid manifest, or
    (in :meth:`verify`) a member is missing or does not match its size and SHA-256.
    """

    def __init__(self, path: Path) -> None:
        try:
            self._tar = tarfile.open(path, "r:")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise BackupArchiveError(f"{path} is not a Confer backup archive: {exc}") from exc
        try:
            raw = self._open(MANIFEST).read()
            self.manifest = BackupManifest.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as exc:
            self._tar.close()
            raise BackupArchiveError(f"{path}: the manifest is not valid ({exc})") from exc
        except BackupArchiveError:
            self._tar.close()
            raise

    def _open(self, member: str) -> IO[bytes]:
        try:
            handle = self._tar.extractfile(member)
        except KeyError:
            handle = None
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise BackupArchiveError(f"the archive is damaged: {exc}") from exc
        if handle is None:
            raise BackupArchiveError(f"the archive is damaged or incomplete: no {member}")
        return handle

    def verify(self, database_to: Path) -> None:
        """Check every member against the manifest, copying the dump to ``database_to``."""
        with database_to.open("wb") as out:
            self._check(self.manifest.database, out)
        for attachment in self.manifest.attachments:
            self._check(attachment, None)

    def _check(self, expected: ArchivedFile, copy_to: IO[bytes] | None) -> None:
        digest, size = hashlib.sha256(), 0
        try:
            with self._open(expected.member) as handle:
                while chunk := handle.read(CHUNK):
                    size += len(chunk)
                    digest.update(chunk)
                    if copy_to is not None:
                        copy_to.write(chunk)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise BackupArchiveError(f"the archive is damaged: {exc}") from exc
        if (size, digest.hexdigest()) != (expected.size, expected.sha256):
            raise BackupArchiveError(
                f"the archive is damaged: {expected.member} does not match its checksum"
            )

    def open_member(self, member: str) -> IO[bytes]:
        """A member's bytes (after :meth:`verify`)."""
        return self._open(member)

    def close(self) -> None:
        """Close the archive."""
        self._tar.close()
