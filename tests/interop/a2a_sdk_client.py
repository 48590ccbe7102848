# ruff: noqa: I001  (the `a2a` imported here is the a2a-sdk package, not Confer's)
"""Run by the interop test with the a2a-sdk venv's python (never Confer's).

Usage: a2a_sdk_client.py <agent base URL> <API key> [--stream]
Fetches the Agent Card, sends one message, reads the task back, prints one JSON object.
"""

import asyncio
import json
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict


async def main(base_url: str, api_key: str, stream: bool) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=stream)
        client = await create_client(card, client_config=config)
        message = Message(
            message_id="interop-1", role=Role.ROLE_USER, parts=[Part(text="hello from a2a-sdk")]
        )
        events = []
        async for event in client.send_message(SendMessageRequest(message=message)):
            events.append(MessageToDict(event))
        task_id = next(e["task"]["id"] for e in events if "task" in e)
        task = await client.get_task(GetTaskRequest(id=task_id))
        print(
            json.dumps(
                {
                    "card": MessageToDict(card),
                    "events": events,
                    "task": MessageToDict(task),
                }
            )
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], "--stream" in sys.argv))
