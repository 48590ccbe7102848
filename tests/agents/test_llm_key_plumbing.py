"""The user's stored, encrypted provider key reaches the provider, decrypted only for the call."""

from __future__ import annotations

import asyncpg

from gateway.services.encryption import generate_key_entry
from tests.agents.conftest import LLMServer
from tests.agents.helpers import set_model, talk_to_agent, wait_for_reply
from tests.gateway.harness import run_instance

K1 = generate_key_entry("k1")


async def test_stored_keys_reach_the_loopback_provider_as_auth_headers(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {
        "openai": {"base_url": llm_server.base_url, "wire": "openai"},
        "anthropic": {"base_url": llm_server.base_url, "wire": "anthropic"},
    }
    async with run_instance(database_url, llm_providers=providers, encryption_keys=K1) as inst:
        alice = await inst.register("alice")
        bob = await inst.register("bob")
        for provider, key in (("openai", "sk-alice-openai"), ("anthropic", "sk-alice-claude")):
            put = await alice.request("PUT", f"/v1/me/llm-keys/{provider}", json={"api_key": key})
            assert put.status_code == 200, put.text
        await set_model(database_url, alice, "brain", "openai", "gpt-test")
        await set_model(database_url, bob, "brain", "openai", "gpt-test")
        conversation = await talk_to_agent(alice)
        await alice.send(conversation, "hello over openai")
        [reply] = await wait_for_reply(alice, conversation)
        assert reply["content"] == "echo: hello over openai"

        await set_model(database_url, alice, "brain", "anthropic", "claude-test")
        await alice.send(conversation, "hello over anthropic")
        replies = await wait_for_reply(alice, conversation, count=2)
        assert replies[-1]["content"] == "echo: hello over anthropic"

        bobs = await talk_to_agent(bob)
        await bob.send(bobs, "no key here")
        await wait_for_reply(bob, bobs)
    calls = [(r["_path"], r["_auth"]) for r in llm_server.fake.requests]
    assert calls == [
        ("/v1/chat/completions", "Bearer sk-alice-openai"),
        ("/v1/messages", "sk-alice-claude"),
        ("/v1/chat/completions", None),  # bob stored no key: none is sent
    ]


async def test_an_undecryptable_key_becomes_a_system_notice(
    database_url: str, llm_server: LLMServer
) -> None:
    providers = {"openai": {"base_url": llm_server.base_url, "wire": "openai"}}
    async with run_instance(database_url, llm_providers=providers, encryption_keys=K1) as inst:
        alice = await inst.register("alice")
        put = await alice.request("PUT", "/v1/me/llm-keys/openai", json={"api_key": "sk-secret"})
        assert put.status_code == 200, put.text
        mallory = await inst.register("mallory")
        conn = await asyncpg.connect(database_url)
        try:  # alice's envelope under mallory's id: authenticated decryption must refuse it
            await conn.execute(
                """UPDATE users SET llm_keys_json = (SELECT llm_keys_json FROM users
                                                     WHERE username = 'alice')
                   WHERE username = 'mallory'"""
            )
        finally:
            await conn.close()
        await set_model(database_url, mallory, "brain", "openai", "gpt-test")
        conversation = await talk_to_agent(mallory)
        await mallory.send(conversation, "use alice's key")
        [notice] = await wait_for_reply(mallory, conversation)
    assert notice["content_type"] == "system_notice"
    assert notice["content_json"]["error"] == "key_unavailable"
    assert "sk-secret" not in notice["content"]
    assert llm_server.fake.requests == []  # nothing was sent with a key that is not mallory's
