# ruff: noqa: I001  (the `a2a` imported here is the a2a-sdk package, not Confer's)
"""Run by the interop test with the a2a-sdk venv's python (never Confer's).

Usage:
  a2a_sdk_client.py <agent base URL> <API key> [--stream] [--push <webhook URL>]
      Fetches the Agent Card, sends one message (with ``--push``, through a client whose
      ``ClientConfig.push_notification_config`` names the webhook with a token), reads the task
      back; with ``--push`` also creates a second config with Bearer authentication through
      ``create_task_push_notification_config``, gets it and lists both. Prints one JSON object.
  a2a_sdk_client.py --parse
      Reads push-notification bodies (a JSON list) on stdin, parses each strictly (unknown
      fields are errors) as the SDK's ``StreamResponse``, prints them as the SDK renders them.
"""

import asyncio
import json
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
)
from google.protobuf.json_format import MessageToDict, Parse

PUSH_TOKEN = "sdk-token-1"
PUSH_CREDENTIALS = "sdk-credentials-2"


async def main(base_url: str, api_key: str, stream: bool, webhook: str | None) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        push = TaskPushNotificationConfig(url=webhook, token=PUSH_TOKEN) if webhook else None
        config = ClientConfig(httpx_client=http, streaming=stream, push_notification_config=push)
        client = await create_client(card, client_config=config)
        message = Message(
            message_id="interop-1", role=Role.ROLE_USER, parts=[Part(text="hello from a2a-sdk")]
        )
        events = []
        async for event in client.send_message(SendMessageRequest(message=message)):
            events.append(MessageToDict(event))
        task_id = next(e["task"]["id"] for e in events if "task" in e)
        task = await client.get_task(GetTaskRequest(id=task_id))
        out = {"card": MessageToDict(card), "events": events, "task": MessageToDict(task)}
        if webhook:
            second = TaskPushNotificationConfig(
                task_id=task_id,
                id="sdk-second",
                url=webhook + "/second",
                authentication=AuthenticationInfo(scheme="Bearer", credentials=PUSH_CREDENTIALS),
            )
            created = await client.create_task_push_notification_config(second)
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            out["push"] = {
                "created": MessageToDict(created),
                "got": MessageToDict(got),
                "listed": MessageToDict(listed),
            }
        print(json.dumps(out))


def parse(bodies: list[str]) -> None:
    parsed = []
    for body in bodies:
        response = Parse(body, StreamResponse())  # strict: an unknown field raises
        parsed.append({"payload": response.WhichOneof("payload"), **MessageToDict(response)})
    print(json.dumps(parsed))


if __name__ == "__main__":
    if sys.argv[1] == "--parse":
        parse(json.loads(sys.stdin.read()))
    else:
        webhook = sys.argv[sys.argv.index("--push") + 1] if "--push" in sys.argv else None
        asyncio.run(main(sys.argv[1], sys.argv[2], "--stream" in sys.argv, webhook))
