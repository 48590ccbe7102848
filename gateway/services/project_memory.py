"""Versioned project memory shared by a user and a peer agent (data model ``project_memory``).

Reads return the version (sent as ``ETag``); writes must name the version they replace —
``If-Match: "<version>"`` (a mismatch is 412, RFC 9110 §13.1.1) or ``base_version`` in the body
(a mismatch is 409). Only creation may omit both; overwriting without either is 428
(RFC 6585 §3). Every version is kept in ``project_memory_versions``.
"""

from __future__ import annotations

import re

import asyncpg

from gateway.errors import (
    ContactNotFoundError,
    FieldInvalidError,
    PreconditionFailedError,
    PreconditionRequiredError,
    ProjectMemoryNotFoundError,
    VersionConflictError,
)
from gateway.store import contacts as contacts_store
from gateway.store import project_memory as store
from models import ProjectMemoryRow, User
from models.context import ProjectMemoryPublic, ProjectMemoryVersionPublic, ProjectMemoryWrite

PROJECT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$"
"""A project id: 1–255 of letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit
(no ``/``, no ``..`` path tricks). The REST path parameter and the MCP tool both use it."""

_PROJECT_ID = re.compile(PROJECT_ID_PATTERN)


def public(row: ProjectMemoryRow, peer_did: str) -> ProjectMemoryPublic:
    """The API view of a row."""
    return ProjectMemoryPublic(
        project_id=row.project_id,
        peer_did=peer_did,
        facts_md=row.facts_md,
        decisions_md=row.decisions_md,
        meta=row.meta_json,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def contact_peer_id(conn: asyncpg.Connection, user: User, peer_did: str) -> str:
    """The ``peer_agents`` id of ``peer_did`` if it is one of the user's contacts (else 404)."""
    peer_id = await contacts_store.get_contact_peer_id(conn, user_id=user.id, peer_did=peer_did)
    if peer_id is None:
        raise ContactNotFoundError(f"{peer_did} is not one of your contacts")
    return peer_id


async def read(
    conn: asyncpg.Connection, user: User, project_id: str, peer_did: str
) -> ProjectMemoryPublic:
    """The current document. Raises ContactNotFoundError / ProjectMemoryNotFoundError (404)."""
    peer_id = await contact_peer_id(conn, user, peer_did)
    row = await store.get_project_memory(
        conn, user_id=user.id, project_id=project_id, peer_id=peer_id
    )
    if row is None:
        raise ProjectMemoryNotFoundError(f"no project memory for {project_id} with {peer_did}")
    return public(row, peer_did)


async def write_in(
    conn: asyncpg.Connection,
    user: User,
    project_id: str,
    peer_did: str,
    data: ProjectMemoryWrite,
    *,
    if_match: int | None,
    via: str,
    keep_unset: bool = False,
    version_field: str = "If-Match",
) -> tuple[ProjectMemoryPublic, bool]:
    """Create or replace the document inside the caller's transaction: ``(document, created)``.

    ``version_field`` is what the 428 asks the caller to send: the REST API's ``If-Match``
    (or the body's ``base_version``), the MCP tool's ``base_version`` argument.

    A replace sets ``facts_md``/``decisions_md`` to what ``data`` holds (absent = null), except
    that with ``keep_unset`` the fields not set in ``data`` keep their stored text (a partial
    update); ``meta`` not set is always kept.

    Raises FieldInvalidError (422) when ``project_id`` does not match
    :data:`PROJECT_ID_PATTERN`, PreconditionFailedError (412) for a stale ``If-Match``,
    VersionConflictError (409) for a stale ``base_version`` or a concurrent create,
    PreconditionRequiredError (428) when replacing without naming a version.
    """
    if _PROJECT_ID.fullmatch(project_id) is None:
        raise FieldInvalidError(
            ["project_id"],
            f"a project id must match {PROJECT_ID_PATTERN}",
            "string_pattern_mismatch",
        )
    peer_id = await contact_peer_id(conn, user, peer_did)
    fields = data.model_dump(exclude={"base_version"})
    current = await store.get_project_memory(
        conn, user_id=user.id, project_id=project_id, peer_id=peer_id, lock=True
    )
    if current is None:
        if if_match is not None:
            raise PreconditionFailedError("there is no document to match yet")
        if data.base_version is not None:
            raise VersionConflictError("there is no document yet; omit base_version to create")
        row = await store.insert_project_memory(
            conn, user_id=user.id, project_id=project_id, peer_id=peer_id, fields=fields
        )
        if row is None:
            raise VersionConflictError("the document was created concurrently; read it first")
        created = True
    else:
        expected = _expected_version(current, if_match, data.base_version, version_field)
        if "meta" not in data.model_fields_set:
            fields["meta"] = current.meta_json  # a write without meta keeps the stored meta
        if keep_unset:
            for name in ("facts_md", "decisions_md"):
                if name not in data.model_fields_set:
                    fields[name] = getattr(current, name)
        updated = await store.update_project_memory(
            conn, id=current.id, expected_version=expected, fields=fields
        )
        assert updated is not None  # the row is locked and its version checked
        row, created = updated, False
    await store.insert_version(conn, row=row, via=via)
    return public(row, peer_did), created


def _expected_version(
    current: ProjectMemoryRow, if_match: int | None, base: int | None, version_field: str
) -> int:
    if if_match is None and base is None:
        raise PreconditionRequiredError(
            f"the document exists (version {current.version}); send {version_field}"
            f" {current.version} to replace it",
            version=current.version,
        )
    if if_match is not None and if_match != current.version:
        raise PreconditionFailedError(
            f"If-Match {if_match} is stale; the current version is {current.version}",
            version=current.version,
        )
    if base is not None and base != current.version:
        raise VersionConflictError(
            f"base_version {base} is stale; the current version is {current.version}",
            version=current.version,
        )
    return current.version


async def write(
    pool: asyncpg.Pool,
    user: User,
    project_id: str,
    peer_did: str,
    data: ProjectMemoryWrite,
    *,
    if_match: int | None,
    via: str,
) -> tuple[ProjectMemoryPublic, bool]:
    """:func:`write_in` in its own transaction."""
    async with pool.acquire() as conn, conn.transaction():
        return await write_in(conn, user, project_id, peer_did, data, if_match=if_match, via=via)


async def history(
    pool: asyncpg.Pool, user: User, project_id: str, peer_did: str
) -> list[ProjectMemoryVersionPublic]:
    """Every version, newest first. Raises 404 as :func:`read`."""
    async with pool.acquire() as conn:
        peer_id = await contact_peer_id(conn, user, peer_did)
        row = await store.get_project_memory(
            conn, user_id=user.id, project_id=project_id, peer_id=peer_id
        )
        if row is None:
            raise ProjectMemoryNotFoundError(f"no project memory for {project_id} with {peer_did}")
        versions = await store.list_versions(conn, project_memory_id=row.id)
    return [ProjectMemoryVersionPublic.model_validate(v) for v in versions]
