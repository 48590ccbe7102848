"""Translations: linked variants made by the requester's agent, reused, never edits."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.agents.conftest import LLMServer
from tests.agents.helpers import set_model
from tests.gateway.harness import User, run_instance


def path(conversation_id: str, message_id: str) -> str:
    return f"/v1/conversations/{conversation_id}/messages/{message_id}/translation"


async def stored(database_url: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(database_url)
    try:
        return [
            dict(r)
            for r in await conn.fetch(
                "SELECT message_id, target_language, translation_json FROM message_translations"
            )
        ]
    finally:
        await conn.close()


async def conversation_with_message(alice: User, bob: User, text: str) -> tuple[str, str]:
    conversation = await alice.direct_with(bob.did)
    message = await bob.send(conversation["id"], text)
    return conversation["id"], message["id"]


async def test_offline_translation_is_deterministic_stored_and_reused(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        conversation_id, message_id = await conversation_with_message(
            alice, bob, "The deploy is on Friday"
        )
        first = await alice.request("POST", path(conversation_id, message_id), json={"to": "de"})
        assert first.status_code == 201, first.text
        body = first.json()
        assert body["reused"] is False and body["message_id"] == message_id
        assert body["translation"] == {
            "from": "und",
            "to": "de",
            "provider": "offline",
            "model": "confer-offline",
            "text": "[Confer's offline provider cannot translate into de; the original text "
            "follows] The deploy is on Friday",
        }
        again = await bob.request("POST", path(conversation_id, message_id), json={"to": "de"})
        assert again.status_code == 200
        assert again.json()["id"] == body["id"] and again.json()["reused"] is True
        upper = await bob.request("POST", path(conversation_id, message_id), json={"to": "DE"})
        assert upper.status_code == 200 and upper.json()["id"] == body["id"]  # one language

        page = (await alice.request("GET", f"/v1/conversations/{conversation_id}/messages")).json()
        [original] = [m for m in page["items"] if m["id"] == message_id]
        assert original["content"] == "The deploy is on Friday"
        assert original["translation"] is None

        outsider = await carol.request("POST", path(conversation_id, message_id), json={"to": "de"})
        assert outsider.status_code == 404
        unknown = await alice.request(
            "POST", path(conversation_id, "01J00000000000000000000000"), json={"to": "de"}
        )
        assert unknown.status_code == 404 and unknown.json()["code"] == "message_not_found"
        for bad in ({"to": "deutsch please"}, {"to": ""}, {}):
            refused = await alice.request("POST", path(conversation_id, message_id), json=bad)
            assert refused.status_code == 422
            assert refused.headers["content-type"].startswith("application/problem+json")
    assert len(await stored(database_url)) == 1


async def test_the_requesters_model_is_called_once_and_edits_translate_afresh(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    async with run_instance(database_url, llm_providers=providers) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        await set_model(database_url, alice, "translation", "loop", "loop-translate")
        conversation_id, message_id = await conversation_with_message(alice, bob, "Hallo Welt")
        for expected in (201, 200, 200):
            response = await alice.request(
                "POST", path(conversation_id, message_id), json={"to": "en"}
            )
            assert response.status_code == expected, response.text
            assert response.json()["translation"]["text"] == "echo: Hallo Welt"
            assert response.json()["translation"]["model"] == "loop-translate"
        calls = [r for r in llm_server.fake.requests if r["_path"] == "/v1/chat/completions"]
        assert len(calls) == 1
        assert "'en'" in calls[0]["messages"][0]["content"]
        assert calls[0]["messages"][-1] == {"role": "user", "content": "Hallo Welt"}

        message_path = f"/v1/conversations/{conversation_id}/messages/{message_id}"
        edited = await bob.request("PATCH", message_path, json={"version": 1, "content": "Tschüss"})
        assert edited.status_code == 200, edited.text
        fresh = await alice.request("POST", path(conversation_id, message_id), json={"to": "en"})
        assert fresh.status_code == 201
        assert fresh.json()["translation"]["text"] == "echo: Tschüss"
    assert len([r for r in llm_server.fake.requests if r["_path"] == "/v1/chat/completions"]) == 2
    assert len(await stored(database_url)) == 2


async def test_provider_failure_is_a_502_and_stores_nothing(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"loop": {"base_url": llm_server.base_url, "wire": "openai"}}
    async with run_instance(database_url, llm_providers=providers) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        await set_model(database_url, alice, "translation", "loop", "m")
        conversation_id, message_id = await conversation_with_message(alice, bob, "Bonjour")
        llm_server.fake.fail_with = 429
        failed = await alice.request("POST", path(conversation_id, message_id), json={"to": "en"})
        assert failed.status_code == 502
        assert failed.json()["code"] == "translation_failed"
        assert failed.json()["kind"] == "rate_limited"
        assert await stored(database_url) == []
        llm_server.fake.fail_with = None
        retried = await alice.request("POST", path(conversation_id, message_id), json={"to": "en"})
        assert retried.status_code == 201
    assert len(await stored(database_url)) == 1
