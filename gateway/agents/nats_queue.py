"""The agent task queue over NATS JetStream (nats-py): ``agent.{agent_id}.tasks``.

One stream (``CONFER_AGENT_TASKS``: subjects ``agent.*.tasks``, work-queue retention, bounded
max age) and one durable pull consumer shared by every Confer process: a dispatch goes to one
process, not to all (queue semantics). Each message says which task is queued (JSON
``{"task_id", "conversation_id"}``) and carries ``Nats-Msg-Id: <task id>``, so JetStream drops
a second dispatch of the same task within its duplicate window (a re-pointed queued task keeps
its id).

A process fetches only when its worker has a free slot, claims that task in PostgreSQL and
acks. PostgreSQL stays the ledger: a dispatch that never arrives (publish failed, process died
between commit and publish, message aged out) is found by the worker's sweep of the ledger, so
no ``NOTIFY`` is needed; a dispatch for a task that is already running or done is acked and
dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError

from gateway.agents.queue import Delivery, TaskQueue
from gateway.backend_urls import connect_nats
from gateway.store.agent_tasks import Dispatch

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT_SECONDS = 2.0
ACK_WAIT_SECONDS = 30.0  # a fetched dispatch not acked by then goes to another process


def task_subject(agent_id: str, prefix: str = "") -> str:
    """``{prefix}agent.{agent_id}.tasks`` (data model, NATS subjects)."""
    return f"{prefix}agent.{agent_id}.tasks"


class NatsTaskQueue(TaskQueue):
    """Dispatches through a JetStream work queue; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        stream: str,
        consumer: str,
        subject_prefix: str = "",
        max_age_seconds: float = 3600.0,
        sweep_seconds: float = 30.0,
        connect_timeout: float = 15.0,
    ) -> None:
        self.url = url
        self.connect_timeout = connect_timeout  # seconds for the first connection
        self.stream = stream
        self.consumer = consumer
        self.subject_prefix = subject_prefix
        self.max_age_seconds = max_age_seconds
        self.sweep_seconds = sweep_seconds
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._sub: JetStreamContext.PullSubscription | None = None

    async def start(self) -> None:
        """Connect, create or update the stream, create the consumer if missing, and bind."""
        self._nc = await connect_nats(
            self.url, name="confer-agent-tasks", within=self.connect_timeout
        )
        self._js = self._nc.jetstream()
        await self._ensure_stream(self._js)
        await self._ensure_consumer(self._js)
        self._sub = await self._js.pull_subscribe_bind(durable=self.consumer, stream=self.stream)

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        config = StreamConfig(
            name=self.stream,
            subjects=[task_subject("*", self.subject_prefix)],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            max_age=self.max_age_seconds,
            duplicate_window=min(120.0, self.max_age_seconds),
        )
        try:
            await js.add_stream(config)  # the same config again is accepted as is
        except BadRequestError:
            await js.update_stream(config)  # created with other limits: bring it up to date

    async def _ensure_consumer(self, js: JetStreamContext) -> None:
        config = ConsumerConfig(
            name=self.consumer,
            durable_name=self.consumer,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT_SECONDS,
            deliver_policy=DeliverPolicy.ALL,
            max_deliver=-1,
        )
        try:
            await js.add_consumer(self.stream, config)
        except BadRequestError as exc:  # exists with another config: use it as it is
            log.warning("using the existing consumer %s: %s", self.consumer, exc)

    async def close(self) -> None:
        nc, self._nc = self._nc, None
        self._js = self._sub = None
        if nc is not None and not nc.is_closed:
            await nc.close()

    async def publish(self, dispatch: Dispatch) -> None:
        """Publish ``{prefix}agent.{agent_id}.tasks`` and wait for JetStream's ack; a failure
        is logged, never raised (the task is committed; the sweep runs it)."""
        payload = json.dumps(
            {"task_id": dispatch.task_id, "conversation_id": dispatch.conversation_id}
        ).encode()
        try:
            if self._js is None:
                raise RuntimeError("the NATS task queue is not started")
            await self._js.publish(
                task_subject(dispatch.agent_id, self.subject_prefix),
                payload,
                timeout=PUBLISH_TIMEOUT_SECONDS,
                stream=self.stream,
                headers={"Nats-Msg-Id": dispatch.task_id},
            )
        except Exception as exc:
            log.warning(
                "agent task %s not dispatched (%s); the sweep runs it", dispatch.task_id, exc
            )

    async def take(self, wait_seconds: float) -> Delivery | None:
        """One dispatch from the shared consumer (a pull of one message), or None."""
        if self._sub is None:
            raise RuntimeError("the NATS task queue is not started")
        try:
            [msg] = await self._sub.fetch(1, timeout=wait_seconds)
        except TimeoutError:
            return None
        except nats.errors.Error as exc:  # reconnecting, or the consumer is gone
            log.warning("agent task queue fetch failed: %s", exc)
            await asyncio.sleep(min(wait_seconds, 1.0))
            return None
        return self._delivery(msg)

    @staticmethod
    def _delivery(msg: Msg) -> Delivery:
        try:
            task_id = str(json.loads(msg.data)["task_id"])
        except (ValueError, KeyError, TypeError):
            log.warning("dropping a malformed agent task dispatch on %s", msg.subject)
            return Delivery(task_id=None, ack=msg.ack)
        return Delivery(task_id=task_id, ack=msg.ack, nak=msg.nak)
