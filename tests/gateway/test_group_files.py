"""A file posted in a group by a member of a third instance reaches every instance live: the
home fetches it from the author's instance, relays the post once it holds the bytes, and the
other member instances fetch the home's copy (signed GET, size and SHA-256 checked)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from tests.gateway.test_group_history import served
from tests.gateway.test_three_instances import (
    _downloaded,
    eventually,
    messages,
    register,
    the_group,
)


async def test_a_file_from_a_third_instance_reaches_every_member(make_database: Any) -> None:
    async with served(make_database, 3) as (on_a, on_b, on_c):
        alice = await register(on_a, str(on_a.base_url), "alice")
        bob = await register(on_b, str(on_b.base_url), "bob")
        carol = await register(on_c, str(on_c.base_url), "carol")
        created = await alice.ok(
            "POST", "/v1/conversations", 201,
            json={"type": "group", "name": "Files", "participant_dids": [bob.did, carol.did]},
        )  # fmt: skip
        g, gb, gc = created["id"], await the_group(bob), await the_group(carol)
        payload = os.urandom(40_000)
        upload = await carol.ok(
            "POST", "/v1/attachments", 201,
            files={"file": ("from-c.bin", payload, "application/octet-stream")},
        )  # fmt: skip
        await carol.ok(
            "POST", f"/v1/conversations/{gc}/messages", 201,
            json={
                "content_type": "file",
                "content_json": {
                    "attachment_id": upload["id"],
                    "filename": "from-c.bin",
                    "mime_type": "application/octet-stream",
                    "size_bytes": len(payload),
                },
            },
        )  # fmt: skip
        digest = hashlib.sha256(payload).hexdigest()
        for person, cid in ((alice, g), (bob, gb)):

            async def file_message(person: Any = person, cid: str = cid) -> Any:
                found = [m for m in await messages(person, cid) if m["content_type"] == "file"]
                return found[0] if found else None

            copy = await eventually(file_message, f"carol's file message for {person.did}")
            assert copy["sender_did"] == carol.did
            local = copy["content_json"]["attachment_id"]
            download = await eventually(
                lambda person=person, local=local: _downloaded(person, local),
                f"carol's file on {person.base_url}",
            )
            assert hashlib.sha256(download.content).hexdigest() == digest
