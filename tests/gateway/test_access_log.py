"""The access log never writes on the event loop: off by default, else queued to a thread."""

from __future__ import annotations

import logging
import threading
from logging.handlers import QueueHandler

import pytest
from uvicorn.logging import AccessFormatter

from gateway.access_log import ACCESS_LOGGER, queued_access_log
from gateway.settings import Settings


class Lines(logging.Handler):
    """Formats with uvicorn's access formatter; remembers each line and its writing thread."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(AccessFormatter('%(client_addr)s "%(request_line)s" %(status_code)s'))
        self.lines: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((self.format(record), threading.current_thread().name))


@pytest.fixture
def lines() -> Lines:
    logger = logging.getLogger(ACCESS_LOGGER)
    saved = (logger.handlers, logger.level, logger.propagate)
    handler = Lines()
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.INFO)
    yield handler
    logger.handlers, logger.level, logger.propagate = saved


def _request(status: int, path: str = "/v1/me") -> None:
    """What uvicorn's HTTP protocol logs for one answered request."""
    logging.getLogger(ACCESS_LOGGER).info(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", path, "1.1", status
    )


def test_off_is_the_default() -> None:
    assert Settings().access_log == "off"


def test_on_writes_every_line_from_another_thread(lines: Lines) -> None:
    with queued_access_log("on"):
        for i in range(5):
            _request(200, f"/v1/m{i}")
    assert [line for line, _ in lines.lines] == [
        f'127.0.0.1:5000 "GET /v1/m{i} HTTP/1.1" 200 OK' for i in range(5)
    ]
    assert {thread for _, thread in lines.lines} != {threading.current_thread().name}
    assert isinstance(logging.getLogger(ACCESS_LOGGER).handlers[0], Lines)  # restored


def test_sampled_keeps_one_in_n_and_every_server_error(lines: Lines) -> None:
    with queued_access_log("sampled", sample_every=10):
        for i in range(30):
            _request(200, f"/v1/m{i}")
        _request(503, "/v1/broken")
    assert [line.split('"')[1] for line, _ in lines.lines] == [
        "GET /v1/m0 HTTP/1.1",
        "GET /v1/m10 HTTP/1.1",
        "GET /v1/m20 HTTP/1.1",
        "GET /v1/broken HTTP/1.1",
    ]


def test_off_leaves_the_handlers_alone(lines: Lines) -> None:
    with queued_access_log("off"):
        handlers = logging.getLogger(ACCESS_LOGGER).handlers
        assert handlers[0] is lines and not any(isinstance(h, QueueHandler) for h in handlers)
