"""``confer backup`` and ``confer restore``: the database and its attachments, consistently.

A backup opens one ``REPEATABLE READ READ ONLY`` transaction, exports its snapshot and, while
it stays open, lists the stored files the snapshot references and runs ``pg_dump
--snapshot`` on that same snapshot; then the bytes of exactly those files are copied from the
attachment storage (a local folder or a bucket) into the archive
(:mod:`gateway.services.backup_archive`). Rows and files therefore agree. A file deleted
between the snapshot and its copy (its message deleted meanwhile) is listed as ``missing`` in
the manifest, and the command warns about it.

A restore checks the whole archive against its manifest first, refuses a database that is not
empty (unless ``force``: then schema ``public`` is wiped first), writes the files into the
configured storage (which may be another kind than the backup's: their storage URLs are
re-pointed), and runs ``pg_restore`` in a single transaction, so a failed restore into an empty
database leaves it empty.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import asyncpg

from gateway import migrations
from gateway.errors import (
    AttachmentUnavailableError,
    BackupArchiveError,
    BackupError,
    RestoreTargetNotEmptyError,
)
from gateway.pgtools import find_tool, run_tool
from gateway.services.backup_archive import (
    DATABASE,
    ArchivedAttachment,
    ArchiveReader,
    ArchiveWriter,
    BackupManifest,
)
from gateway.storage import AttachmentStorage, ReadChunk, storage_key
from gateway.store import backups as store
from gateway.store import system as system_store


@dataclass
class BackupSummary:
    """What a backup holds: the schema revision, files copied, their bytes, files missing."""

    revision: str | None
    files: int
    file_bytes: int
    missing: list[str] = field(default_factory=list)


@dataclass
class RestoreSummary:
    """What a restore wrote: the schema revision and the files put into storage."""

    revision: str | None
    files: int


async def create_backup(
    database_url: str, storage: AttachmentStorage, path: Path, *, bin_dir: Path | None = None
) -> BackupSummary:
    """Write the backup archive to ``path`` (replaced atomically when it exists).

    The archive holds every secret of the instance (its signing keys, password hashes), so it
    is readable by its owner only (mode 0600).

    Raises BackupError when ``pg_dump`` is missing or fails or ``path`` cannot be written (a
    missing folder, a directory), StorageUnavailableError when the storage cannot be read.
    """
    path = await asyncio.to_thread(path.resolve)
    if await asyncio.to_thread(path.is_dir):
        raise BackupError(f"{path} is a directory: give the archive's file name")
    if not await asyncio.to_thread(path.parent.is_dir):
        raise BackupError(f"{path.parent} does not exist")
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".confer-backup-") as tmp:
        work = Path(tmp)
        snapshot = await _dump(database_url, work / DATABASE, bin_dir)
        partial = work / "archive.tar"
        writer = await asyncio.to_thread(ArchiveWriter, partial)
        try:
            database = await asyncio.to_thread(writer.add_file, DATABASE, work / DATABASE)
            await asyncio.to_thread((work / DATABASE).unlink)
            attachments, missing = await _archive_files(writer, storage, snapshot.files, work)
            manifest = BackupManifest(
                created_at=datetime.now(UTC),
                alembic_revision=snapshot.revision,
                server_major=snapshot.server_major,
                pg_dump_major=snapshot.dump_major,
                database=database,
                attachments=attachments,
                missing=missing,
            )
            await asyncio.to_thread(writer.add_manifest, manifest)
        finally:
            await asyncio.to_thread(writer.close)
        await asyncio.to_thread(os.chmod, partial, 0o600)
        await asyncio.to_thread(os.replace, partial, path)
    return BackupSummary(
        revision=snapshot.revision,
        files=len(attachments),
        file_bytes=sum(a.size for a in attachments),
        missing=missing,
    )


@dataclass
class _Snapshot:
    """What the dumped snapshot was: its schema revision, server and pg_dump majors, and the
    stored files it references."""

    revision: str | None
    server_major: int
    dump_major: int
    files: list[store.StoredFile]


async def _dump(database_url: str, out: Path, bin_dir: Path | None) -> _Snapshot:
    """pg_dump (custom format) one exported snapshot into ``out``."""
    conn = await _connect(database_url)
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            exported = await store.export_snapshot(conn)
            files = await store.list_stored_files(conn)
            revision = await system_store.get_alembic_revision(conn)
            server_major = await store.get_server_major(conn)
            pg_dump, dump_major = await asyncio.to_thread(
                find_tool, "pg_dump", at_least=server_major, bin_dir=bin_dir
            )
            # The snapshot is valid only while this transaction is open: pg_dump runs inside.
            await run_tool(
                pg_dump,
                "--format=custom",
                f"--snapshot={exported}",
                f"--file={out}",
                database_url=database_url,
            )
    finally:
        await conn.close()
    return _Snapshot(revision, server_major, dump_major, files)


async def _archive_files(
    writer: ArchiveWriter, storage: AttachmentStorage, files: list[store.StoredFile], work: Path
) -> tuple[list[ArchivedAttachment], list[str]]:
    """Copy each stored file into the archive; returns those archived and the storage URLs
    whose bytes were gone."""
    archived: list[ArchivedAttachment] = []
    missing: list[str] = []
    for stored in files:
        if not await _copy_out(storage, stored.storage_url, work / "file"):
            missing.append(stored.storage_url)
            continue
        member = f"attachments/{storage_key(stored.storage_url)}"
        copied = await asyncio.to_thread(writer.add_file, member, work / "file")
        archived.append(ArchivedAttachment(**copied.model_dump(), storage_url=stored.storage_url))
    return archived, missing


async def _copy_out(storage: AttachmentStorage, storage_url: str, to: Path) -> bool:
    """Copy one stored file to ``to``; False when its bytes are gone."""
    handle = await asyncio.to_thread(to.open, "wb")
    try:
        async for chunk in storage.open(storage_url):
            await asyncio.to_thread(handle.write, chunk)
    except AttachmentUnavailableError:
        return False
    finally:
        await asyncio.to_thread(handle.close)
    return True


async def restore_backup(
    database_url: str,
    storage: AttachmentStorage,
    path: Path,
    *,
    force: bool = False,
    bin_dir: Path | None = None,
) -> RestoreSummary:
    """Restore the archive at ``path`` into ``database_url`` and ``storage``.

    Raises BackupArchiveError (not a backup, damaged: nothing is written), BackupError (a
    schema revision this version does not know, no database, ``pg_restore`` missing or
    failing), RestoreTargetNotEmptyError (the database has tables and ``force`` is off).
    """
    reader = await asyncio.to_thread(ArchiveReader, path)
    try:
        with tempfile.TemporaryDirectory(prefix="confer-restore-") as tmp:
            dump = Path(tmp) / DATABASE
            await asyncio.to_thread(reader.verify, dump)
            await asyncio.to_thread(_check_revision, reader.manifest)
            conn = await _connect(database_url)
            try:
                await _restore(conn, database_url, reader, storage, dump, force, bin_dir)
            finally:
                await conn.close()
    finally:
        await asyncio.to_thread(reader.close)
    return RestoreSummary(reader.manifest.alembic_revision, len(reader.manifest.attachments))


async def _restore(
    conn: asyncpg.Connection,
    database_url: str,
    reader: ArchiveReader,
    storage: AttachmentStorage,
    dump: Path,
    force: bool,
    bin_dir: Path | None,
) -> None:
    """The files into ``storage``, then the checked dump into the database ``conn`` is on."""
    if await store.count_relations(conn) and not force:
        raise RestoreTargetNotEmptyError(
            "the database is not empty; restore into a new one, or pass --force to replace "
            "everything in it"
        )
    server_major = await store.get_server_major(conn)
    pg_restore = await asyncio.to_thread(_pg_restore, reader.manifest, server_major, bin_dir)
    moved = await _copy_in(reader, storage)
    if force:
        async with conn.transaction():
            await store.wipe_public_schema(conn)
    await run_tool(
        pg_restore,
        "--no-owner",
        "--no-acl",
        "--exit-on-error",
        "--single-transaction",
        str(dump),
        database_url=database_url,
    )
    await store.update_storage_urls(conn, moved)


def _check_revision(manifest: BackupManifest) -> None:
    """Refuse a backup whose schema this Confer cannot migrate (made by a newer version)."""
    revision = manifest.alembic_revision
    if revision is not None and revision not in migrations.declared_revisions():
        raise BackupError(
            f"the backup's database is at schema revision {revision}, which this version of "
            "Confer does not know: restore it with the version that made it, or a newer one"
        )


async def _connect(database_url: str) -> asyncpg.Connection:
    """A connection of its own; BackupError saying why when there is none."""
    try:
        return await asyncpg.connect(database_url)
    except (OSError, asyncpg.PostgresError) as exc:
        raise BackupError(f"cannot connect to the database: {exc}") from exc


def _pg_restore(manifest: BackupManifest, server_major: int, bin_dir: Path | None) -> Path:
    """A pg_restore that reads the archive's dump, preferably one as new as the server."""
    try:
        path, _ = find_tool(
            "pg_restore", at_least=max(manifest.pg_dump_major, server_major), bin_dir=bin_dir
        )
    except BackupError:
        path, _ = find_tool("pg_restore", at_least=manifest.pg_dump_major, bin_dir=bin_dir)
    return path


async def _copy_in(reader: ArchiveReader, storage: AttachmentStorage) -> dict[str, str]:
    """Write every archived file into ``storage`` under its key; returns the storage URLs
    that changed (old → new) when the storage is of another kind than the backup's."""
    moved: dict[str, str] = {}
    for archived in reader.manifest.attachments:
        handle = await asyncio.to_thread(reader.open_member, archived.member)
        key = storage_key(archived.storage_url)
        try:
            _, sha256, url = await storage.save(key, _reader(handle), max_bytes=archived.size)
        finally:
            handle.close()
        if sha256 != archived.sha256:
            raise BackupArchiveError(f"{archived.member} changed while it was restored")
        if url != archived.storage_url:
            moved[archived.storage_url] = url
    return moved


def _reader(handle: IO[bytes]) -> ReadChunk:
    """An upload's ``read`` over an archive member, each read in a thread."""

    async def read(size: int) -> bytes:
        return await asyncio.to_thread(handle.read, size)

    return read
