"""uvicorn's access log, kept off the event loop (``CONFER_ACCESS_LOG``).

- ``off`` (the default): uvicorn logs no access line at all.
- ``sampled``: one request in ``CONFER_ACCESS_LOG_SAMPLE_EVERY``, plus every 5xx answer.
- ``on``: every request.

Whenever lines are logged, the ``uvicorn.access`` handlers run in a
:class:`logging.handlers.QueueListener` thread: the event loop only puts the record on a
queue, so a slow terminal, pipe or disk never stalls request handling (a synchronous
``write()`` per request was a sixth of a loaded server's samples).
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Iterator
from logging.handlers import QueueHandler, QueueListener
from typing import Literal

AccessLogMode = Literal["off", "sampled", "on"]
ACCESS_LOGGER = "uvicorn.access"


class SampleFilter(logging.Filter):
    """Pass the first of every ``every`` access records, and every 5xx answer.

    uvicorn's access records carry ``(client, method, path, http_version, status)`` as args.
    """

    def __init__(self, every: int) -> None:
        super().__init__()
        self._every = every
        self._seen = 0

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[4], int):
            if args[4] >= 500:
                return True
        self._seen += 1
        return (self._seen - 1) % self._every == 0


class _RecordQueueHandler(QueueHandler):
    """Queue the record as it is: uvicorn's ``AccessFormatter`` (on the listener's handlers)
    needs the original args, which :meth:`QueueHandler.prepare` would merge into the message.
    Access records hold only strings and ints, so they are safe to hand to another thread."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


@contextlib.contextmanager
def queued_access_log(mode: AccessLogMode, sample_every: int = 100) -> Iterator[None]:
    """While inside, ``uvicorn.access``'s handlers run in a listener thread (``mode`` ``on``
    or ``sampled``); ``off`` changes nothing (uvicorn is then started with
    ``access_log=False``). Call after uvicorn configured its logging (``uvicorn.Config``)."""
    if mode == "off":
        yield
        return
    logger = logging.getLogger(ACCESS_LOGGER)
    handlers = list(logger.handlers)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    handler = _RecordQueueHandler(records)
    if mode == "sampled":
        handler.addFilter(SampleFilter(sample_every))
    listener = QueueListener(records, *handlers, respect_handler_level=True)
    logger.handlers = [handler]
    listener.start()
    try:
        yield
    finally:
        listener.stop()  # writes what is still queued
        logger.handlers = handlers
