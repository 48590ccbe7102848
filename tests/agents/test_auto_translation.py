"""Automatic translation per conversation: new messages of others arrive translated."""

from __future__ import annotations

import asyncio

from tests.agents.test_translation import stored
from tests.gateway.harness import next_event, run_instance


async def test_new_messages_of_others_are_translated_and_announced(database_url: str) -> None:
    async with run_instance(database_url) as instance:
        alice = await instance.register("alice")
        bob = await instance.register("bob")
        carol = await instance.register("carol")
        conversation = (await alice.direct_with(bob.did))["id"]
        auto = f"/v1/conversations/{conversation}/auto-translation"
        await bob.send(conversation, "before the setting")

        assert (await alice.request("GET", auto)).json()["language"] is None
        put = await alice.request("PUT", auto, json={"to": "fr"})
        assert put.status_code == 200, put.text
        assert put.json()["language"] == "fr"
        assert (await alice.request("GET", auto)).json()["language"] == "fr"
        assert (await carol.request("PUT", auto, json={"to": "fr"})).status_code == 404
        assert (await alice.request("PUT", auto, json={"to": "French!"})).status_code == 422

        async with alice.websocket() as ws:
            sent = await bob.send(conversation, "the build is green")
            await alice.send(conversation, "my own words stay as they are")
            event = (await next_event(ws, "message.translated"))["data"]
        assert event["conversation_id"] == conversation
        assert event["message_id"] == sent["id"]
        assert event["translation"]["to"] == "fr"
        assert event["translation"]["text"].endswith("] the build is green")
        await asyncio.sleep(1.5)  # a poll later: nothing else was translated
        rows = await stored(database_url)
        assert [r["message_id"] for r in rows] == [sent["id"]]

        deleted = await alice.request("DELETE", auto)
        assert deleted.status_code == 204
        assert (await alice.request("GET", auto)).json()["language"] is None
        await bob.send(conversation, "after turning it off")
        await asyncio.sleep(1.5)
        assert len(await stored(database_url)) == 1
