"""Versioned project memory: ETag/If-Match over HTTP, history, and ``confer memory sync``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from gateway.cli import app as cli
from gateway.memory_sync import SyncReport, sync
from tests.gateway.fakepeer import FakePeer, run_fake_peer
from tests.gateway.harness import Instance, User, run_instance

PATH = "/v1/project-memory/confer"


@pytest.fixture
async def setup(database_url: str) -> AsyncIterator[tuple[Instance, User, FakePeer]]:
    async with run_fake_peer() as peer, run_instance(database_url) as instance:
        alice = await instance.register("alice")
        added = await alice.request("POST", "/v1/contacts", json={"did": peer.did})
        assert added.status_code == 201, added.text
        yield instance, alice, peer


async def test_versions_etags_and_stale_writes(setup: tuple[Instance, User, FakePeer]) -> None:
    instance, alice, peer = setup
    q = {"peer": peer.did}
    missing = await alice.request("GET", PATH, params=q)
    assert missing.status_code == 404 and missing.json()["code"] == "project_memory_not_found"

    created = await alice.request("PUT", PATH, params=q, json={"facts_md": "# Facts\n- v1\n"})
    assert created.status_code == 201, created.text
    assert created.headers["etag"] == '"1"' and created.json()["version"] == 1

    read = await alice.request("GET", PATH, params=q)
    assert read.headers["etag"] == '"1"' and read.json()["facts_md"] == "# Facts\n- v1\n"

    blind = await alice.request("PUT", PATH, params=q, json={"facts_md": "blind"})
    assert blind.status_code == 428 and blind.json()["code"] == "precondition_required"

    second = await alice.request(
        "PUT",
        PATH,
        params=q,
        json={"facts_md": "v2", "decisions_md": "d2"},
        headers={"If-Match": '"1"'},
    )
    assert second.status_code == 200 and second.headers["etag"] == '"2"'

    stale = await alice.request(
        "PUT", PATH, params=q, json={"facts_md": "lost"}, headers={"If-Match": '"1"'}
    )
    assert stale.status_code == 412 and stale.json()["version"] == 2
    stale_body = await alice.request(
        "PUT", PATH, params=q, json={"facts_md": "lost", "base_version": 1}
    )
    assert stale_body.status_code == 409 and stale_body.json()["code"] == "version_conflict"
    garbage = await alice.request(
        "PUT", PATH, params=q, json={"facts_md": "x"}, headers={"If-Match": "yesterday"}
    )
    assert garbage.status_code == 400
    unquoted = await alice.request(
        "PUT", PATH, params=q, json={"facts_md": "x"}, headers={"If-Match": "2"}
    )
    assert unquoted.status_code == 400
    weak = await alice.request(  # RFC 9110 §13.1.1: strong comparison, weak tags never match
        "PUT", PATH, params=q, json={"facts_md": "x"}, headers={"If-Match": 'W/"2"'}
    )
    assert weak.status_code == 412 and weak.json()["code"] == "precondition_failed"
    assert (await alice.request("GET", PATH, params=q)).json()["facts_md"] == "v2"

    history = (await alice.request("GET", f"{PATH}/versions", params=q)).json()
    assert [(v["version"], v["facts_md"]) for v in history] == [(2, "v2"), (1, "# Facts\n- v1\n")]

    bob = await instance.register("bob")
    outsider = await bob.request("GET", PATH, params=q)
    assert outsider.status_code == 404 and outsider.json()["code"] == "contact_not_found"
    bad_project = await alice.request("GET", "/v1/project-memory/..%2Fetc", params=q)
    assert bad_project.status_code in (404, 422)


async def test_concurrent_writers_one_wins(setup: tuple[Instance, User, FakePeer]) -> None:
    _, alice, peer = setup
    q = {"peer": peer.did}
    await alice.request("PUT", PATH, params=q, json={"facts_md": "base"})
    results = await asyncio.gather(
        *(
            alice.request(
                "PUT", PATH, params=q, json={"facts_md": f"writer {i}"}, headers={"If-Match": '"1"'}
            )
            for i in range(5)
        )
    )
    codes = sorted(r.status_code for r in results)
    assert codes == [200, 412, 412, 412, 412]
    history = (await alice.request("GET", f"{PATH}/versions", params=q)).json()
    assert [v["version"] for v in history] == [2, 1]


def _sync(
    instance: Instance, user: User, peer: FakePeer, root: Path, via_env: bool = False
) -> tuple[int, str]:
    args = ["memory", "sync", "--project", "confer", "--peer", peer.did]
    args += ["--name", "mallory", "--root", str(root)]
    if via_env:  # the documented way: server and token from the environment
        env = {"CONFER_SERVER": instance.base_url, "CONFER_TOKEN": user.token}
        result = CliRunner().invoke(cli, args, env=env)
    else:
        result = CliRunner().invoke(
            cli, [*args, "--server", instance.base_url, "--token", user.token]
        )
    return result.exit_code, result.output


async def test_cli_sync_both_ways_and_conflicts(
    setup: tuple[Instance, User, FakePeer], tmp_path: Path
) -> None:
    instance, alice, peer = setup
    q = {"peer": peer.did}
    folder = tmp_path / ".claude" / "peers" / "mallory"
    folder.mkdir(parents=True)
    (folder / "facts.md").write_text("local fact\n")

    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0, output
    assert "pushed facts_md" in output
    assert (await alice.request("GET", PATH, params=q)).json()["facts_md"] == "local fact\n"

    # Server side changes decisions; local changes facts: both merge without conflict.
    await alice.request(
        "PUT",
        PATH,
        params=q,
        json={"facts_md": "local fact\n", "decisions_md": "use ULIDs\n"},
        headers={"If-Match": '"1"'},
    )
    (folder / "facts.md").write_text("local fact\nsecond fact\n")
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0, output
    assert (folder / "decisions.md").read_text() == "use ULIDs\n"
    server = (await alice.request("GET", PATH, params=q)).json()
    assert server["facts_md"] == "local fact\nsecond fact\n" and server["version"] == 3
    assert json.loads((folder / ".confer-sync.json").read_text())["version"] == 3

    # Nothing changed: nothing written.
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0 and "in sync at version 3" in output

    # Both sides change facts differently: a conflict, and neither side is overwritten.
    await alice.request(
        "PUT",
        PATH,
        params=q,
        json={"facts_md": "server edit\n", "decisions_md": "use ULIDs\n"},
        headers={"If-Match": '"3"'},
    )
    (folder / "facts.md").write_text("local edit\n")
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 1 and "CONFLICT facts_md" in output
    assert (folder / "facts.md").read_text() == "local edit\n"
    assert (folder / "facts.md.server").read_text() == "server edit\n"
    assert (await alice.request("GET", PATH, params=q)).json()["facts_md"] == "server edit\n"

    # Resolving by taking the server's text makes the next sync clean.
    (folder / "facts.md").write_text("server edit\n")
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0, output


async def _put(user: User, peer: FakePeer, body: dict[str, str], version: int) -> None:
    response = await user.request(
        "PUT", PATH, params={"peer": peer.did}, json=body, headers={"If-Match": f'"{version}"'}
    )
    assert response.status_code == 200, response.text


async def _server(user: User, peer: FakePeer) -> dict[str, object]:
    return dict((await user.request("GET", PATH, params={"peer": peer.did})).json())


async def test_cli_sync_a_merged_conflict_is_pushed_and_other_files_still_sync(
    setup: tuple[Instance, User, FakePeer], tmp_path: Path
) -> None:
    instance, alice, peer = setup
    folder = tmp_path / ".claude" / "peers" / "mallory"
    folder.mkdir(parents=True)
    (folder / "facts.md").write_text("base\n")
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0, output

    # Local adds a line; the server changes facts differently and adds decisions.
    (folder / "facts.md").write_text("base\nlocal line\n")
    await _put(alice, peer, {"facts_md": "base\nserver line\n", "decisions_md": "use ULIDs\n"}, 1)
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 1 and "CONFLICT facts_md" in output
    assert "pulled decisions_md" in output
    assert (folder / "decisions.md").read_text() == "use ULIDs\n"  # one side only: copied
    assert (folder / "facts.md").read_text() == "base\nlocal line\n"
    assert (folder / "facts.md.server").read_text() == "base\nserver line\n"
    assert (await _server(alice, peer))["facts_md"] == "base\nserver line\n"

    # Syncing again without resolving changes nothing on either side.
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 1 and "CONFLICT facts_md" in output
    assert (await _server(alice, peer))["version"] == 2

    # The user merges both texts into facts.md: the next sync pushes the merge.
    merged = "base\nlocal line\nserver line\n"
    (folder / "facts.md").write_text(merged)
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0, output
    assert "pushed facts_md" in output and "in sync at version 3" in output
    server = await _server(alice, peer)
    assert server["facts_md"] == merged and server["decisions_md"] == "use ULIDs\n"
    assert not (folder / "facts.md.server").exists()
    state = json.loads((folder / ".confer-sync.json").read_text())
    assert state["version"] == 3 and not state.get("conflicts")

    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path, True)
    assert code == 0 and "in sync at version 3" in output and "pushed" not in output


async def test_cli_sync_conflict_resolutions_keep_mine_take_theirs_and_server_moving_on(
    setup: tuple[Instance, User, FakePeer], tmp_path: Path
) -> None:
    instance, alice, peer = setup
    folder = tmp_path / ".claude" / "peers" / "mallory"
    folder.mkdir(parents=True)
    (folder / "facts.md").write_text("base\n")
    (folder / "decisions.md").write_text("d\n")
    assert (await asyncio.to_thread(_sync, instance, alice, peer, tmp_path))[0] == 0

    # Keep mine: delete the .server copy without editing the local file.
    (folder / "facts.md").write_text("mine\n")
    await _put(alice, peer, {"facts_md": "theirs\n", "decisions_md": "d\n"}, 1)
    assert (await asyncio.to_thread(_sync, instance, alice, peer, tmp_path))[0] == 1
    (folder / "facts.md.server").unlink()
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0 and "pushed facts_md" in output, output
    assert (await _server(alice, peer))["facts_md"] == "mine\n"

    # The server moves on after the conflict was reported: still a conflict, fresh .server copy,
    # even though the local file was edited against the older server text.
    (folder / "facts.md").write_text("mine 2\n")
    await _put(alice, peer, {"facts_md": "theirs 2\n", "decisions_md": "d\n"}, 3)
    assert (await asyncio.to_thread(_sync, instance, alice, peer, tmp_path))[0] == 1
    await _put(alice, peer, {"facts_md": "theirs 3\n", "decisions_md": "d\n"}, 4)
    (folder / "facts.md").write_text("mine 2 + theirs 2\n")
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 1 and "CONFLICT facts_md" in output
    assert (folder / "facts.md.server").read_text() == "theirs 3\n"
    assert (await _server(alice, peer))["facts_md"] == "theirs 3\n"

    # Take theirs: copy the server text; the .server copy goes away.
    (folder / "facts.md").write_text("theirs 3\n")
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0 and "pushed" not in output, output
    assert not (folder / "facts.md.server").exists()
    assert (await _server(alice, peer))["version"] == 5

    # A field emptied on the server (local unchanged) removes the local file.
    await _put(alice, peer, {"facts_md": "theirs 3\n"}, 5)
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0 and "pulled decisions_md" in output, output
    assert not (folder / "decisions.md").exists()
    code, output = await asyncio.to_thread(_sync, instance, alice, peer, tmp_path)
    assert code == 0 and "pushed" not in output and "in sync at version 6" in output


async def test_sync_that_loses_a_race_reports_it_and_overwrites_nothing(
    setup: tuple[Instance, User, FakePeer], tmp_path: Path
) -> None:
    instance, alice, peer = setup
    folder = tmp_path / "peer"
    folder.mkdir()
    (folder / "facts.md").write_text("base\n")
    headers = {"Authorization": f"Bearer {alice.token}"}

    def run(hook: object = None) -> SyncReport:
        hooks = {"request": [hook]} if hook else {}
        with httpx.Client(base_url=instance.base_url, headers=headers, event_hooks=hooks) as c:
            return sync(c, project="confer", peer=peer.did, folder=folder)

    assert (await asyncio.to_thread(run)).pushed == ["facts_md"]
    state_before = (folder / ".confer-sync.json").read_text()

    def rival(request: httpx.Request) -> None:
        if request.method == "PUT":  # another writer gets in between our GET and our PUT
            with httpx.Client(base_url=instance.base_url, headers=headers) as other:
                response = other.put(
                    PATH,
                    params={"peer": peer.did},
                    json={"facts_md": "base\n", "decisions_md": "rival\n"},
                    headers={"If-Match": '"1"'},
                )
                assert response.status_code == 200, response.text

    (folder / "facts.md").write_text("base\nmine\n")
    report = await asyncio.to_thread(run, rival)
    assert report.raced and not report.ok and report.pushed == []
    server = await _server(alice, peer)
    assert (server["facts_md"], server["decisions_md"]) == ("base\n", "rival\n")
    assert (folder / "facts.md").read_text() == "base\nmine\n"
    assert (folder / ".confer-sync.json").read_text() == state_before

    report = await asyncio.to_thread(run)  # the next sync merges both
    assert report.ok and report.pushed == ["facts_md"] and report.pulled == ["decisions_md"]
    server = await _server(alice, peer)
    assert (server["facts_md"], server["decisions_md"]) == ("base\nmine\n", "rival\n")
