"""Logging configured the way docs/observability.md shows keeps the delivery lines."""

from __future__ import annotations

import io
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest

from service_webhooks import WebhookReceiver
from service_webhooks.testing.signer import Signer

LOGGER = logging.getLogger("service_webhooks")


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """dictConfig replaces handlers and levels process-wide: put them back."""
    root = logging.getLogger()
    saved: list[tuple[logging.Logger, list[logging.Handler], int, bool, bool]] = [
        (log, log.handlers[:], log.level, log.disabled, log.propagate) for log in (root, LOGGER)
    ]
    # as in a fresh process (an in-process `listen` test configures this logger too)
    LOGGER.handlers.clear()
    LOGGER.setLevel(logging.NOTSET)
    LOGGER.disabled, LOGGER.propagate = False, True
    yield
    for log, handlers, level, disabled, propagate in saved:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.disabled = disabled
        log.propagate = propagate


def _config(stream: io.StringIO, **overrides: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "formatters": {"plain": {"format": "%(levelname)s %(message)s"}},
        "handlers": {
            "mem": {"class": "logging.StreamHandler", "formatter": "plain", "stream": stream}
        },
        "root": {"level": "WARNING", "handlers": ["mem"]},
        **overrides,
    }


def _deliver_to_a_failing_handler() -> None:
    receiver = WebhookReceiver(secrets="s", store="memory")

    def fail(event: object) -> None:
        raise RuntimeError("bug")

    receiver.on("note.created", fail)
    body, headers = Signer("s").delivery("note.created", {"id": "1", "author": "a", "text": "t"})
    assert receiver.process(body, headers["Service-Signature"]).status == 500


@pytest.mark.usefixtures("restored_logging")
def test_the_documented_dict_config_keeps_the_delivery_line_and_the_failure() -> None:
    stream = io.StringIO()
    logging.config.dictConfig(
        _config(
            stream,
            disable_existing_loggers=False,
            loggers={"service_webhooks": {"level": "INFO"}},
        )
    )
    _deliver_to_a_failing_handler()
    text = stream.getvalue()
    assert "ERROR service_webhooks: handler for note.created failed" in text
    assert "INFO service_webhooks: 500 handler_failed event=note.created" in text


@pytest.mark.usefixtures("restored_logging")
def test_the_default_dict_config_silences_the_library_as_the_docs_warn() -> None:
    stream = io.StringIO()
    logging.config.dictConfig(_config(stream))  # disable_existing_loggers: True
    _deliver_to_a_failing_handler()
    assert LOGGER.disabled
    assert stream.getvalue() == ""
