"""Request-derived text never forges a log line (control characters are escaped).

An ``eventName`` such as ``"a\\nFORGED b"`` or an ANSI escape is logged as one line with
the escape visible, in the per-delivery line, in the handler-failure lines and in what
``service-webhooks listen`` prints, checked both with ``caplog`` and on the stderr and
stdout of a real uvicorn server (``listen``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from service_webhooks import (
    SIGNATURE_HEADER,
    Event,
    MemoryStore,
    Unprocessable,
    WebhookReceiver,
    sign,
)

SECRET = "whsec-escape-0123456789abcdef"
ORG = "o-ESCAPE-eu1"
NAMES = {"newline": ("a\nFORGED b", "a\\nFORGED b"), "ansi": ("\x1b[31m", "\\x1b[31m")}


def delivery(name: str, data: Any = 1) -> tuple[bytes, str]:
    body = json.dumps({"eventName": name, "version": 1, "data": data}).encode()
    return body, sign(body, SECRET, ORG)


def assert_one_line(text: str) -> None:
    for forbidden in ("\n", "\r", "\x1b"):
        assert forbidden not in text, repr(text)


@pytest.mark.parametrize(("raw", "shown"), NAMES.values(), ids=NAMES.keys())
def test_the_delivery_line_shows_the_escape(
    raw: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = WebhookReceiver(SECRET, store=MemoryStore())
    caplog.clear()  # registering an unknown name warned already; count the delivery's lines
    with caplog.at_level(logging.INFO, logger="service_webhooks"):
        outcome = receiver.process(*delivery(raw))
    assert (outcome.status, outcome.reason) == (200, "unhandled")
    [record] = caplog.records
    message = record.getMessage()
    assert_one_line(message)
    assert f"event={shown} " in message
    assert record.webhook_event == shown  # type: ignore[attr-defined]


@pytest.mark.parametrize(("raw", "shown"), NAMES.values(), ids=NAMES.keys())
@pytest.mark.parametrize("failure", ["crash", "refuse"])
def test_handler_failure_lines_show_the_escape(
    raw: str, shown: str, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = WebhookReceiver(SECRET, store=MemoryStore())

    @receiver.on(raw)
    def handler(event: Event[Any]) -> None:
        if failure == "refuse":
            raise Unprocessable(f"bad {event.name}")
        raise RuntimeError("boom")

    caplog.clear()  # registering an unknown name warned already; count the delivery's lines
    with caplog.at_level(logging.INFO, logger="service_webhooks"):
        outcome = receiver.process(*delivery(raw))
    assert outcome.status == (422 if failure == "refuse" else 500)
    assert len(caplog.records) == 2  # the failure, then the delivery line
    for record in caplog.records:
        assert_one_line(record.getMessage())
        assert shown in record.getMessage()


@pytest.mark.parametrize("failure", ["none", "crash", "refuse", "retry"])
def test_a_huge_event_name_or_message_makes_no_huge_log_line(
    failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A signed ``eventName`` may fill the whole 1 MiB body and a handler's message may be
    any size: each value is cut to LOG_TEXT_CHARS in the log lines (the count of the rest
    is written), while the outcome observers still get the whole detail."""
    from service_webhooks import RetryLater
    from service_webhooks._reporting import LOG_TEXT_CHARS

    name = "n" * 300_000
    message = "m" * 500_000
    receiver = WebhookReceiver(SECRET, store=MemoryStore())
    details: list[str] = []
    receiver.on_outcome(lambda record: details.append(record.detail))
    if failure != "none":

        @receiver.on(name)
        def handler(event: Event[Any]) -> None:
            if failure == "refuse":
                raise Unprocessable(message)
            if failure == "retry":
                raise RetryLater(message)
            raise RuntimeError("boom")

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="service_webhooks"):
        outcome = receiver.process(*delivery(name))
    assert outcome.status == {"none": 200, "crash": 500, "refuse": 422, "retry": 503}[failure]
    assert caplog.records
    for record in caplog.records:
        line = record.getMessage()
        assert len(line) < 3 * LOG_TEXT_CHARS, (failure, len(line))
        assert f"… ({300_000 - LOG_TEXT_CHARS} more characters)" in line
    [delivery_line] = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(delivery_line.webhook_event) < 2 * LOG_TEXT_CHARS  # type: ignore[attr-defined]
    if failure in ("refuse", "retry"):
        assert details == [message]  # observers: the whole detail


KEYS = {"newline": ("a\nFORGED b", "o-K,a\\nFORGED"), "ansi": ("\x1b[31m", "o-K,\\x1b[31m")}


@pytest.mark.parametrize(("raw", "shown"), KEYS.values(), ids=KEYS.keys())
def test_a_custom_idempotency_key_prefix_shows_the_escape(
    raw: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``idempotency_key=``, the logged key prefix is ``o + "," + key``: request data."""
    receiver = WebhookReceiver(
        SECRET, store=MemoryStore(), idempotency_key=lambda event: event.data["id"]
    )
    receiver.on_any(lambda event: None)
    body = json.dumps({"eventName": "note.updated", "version": 1, "data": {"id": raw}}).encode()
    with caplog.at_level(logging.INFO, logger="service_webhooks"):
        outcome = receiver.process(body, sign(body, SECRET, "o-K"))
    assert (outcome.status, outcome.reason) == (200, "processed")
    [record] = caplog.records
    message = record.getMessage()
    assert_one_line(message)
    assert f" key={shown} " in message
    assert record.webhook_key_prefix == shown  # type: ignore[attr-defined]


@pytest.mark.e2e
def test_listen_logs_and_prints_one_line_per_forged_delivery(tmp_path: Path) -> None:
    """Through a real uvicorn (``service-webhooks listen``): stderr and stdout."""
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    command = str(Path(sys.executable).with_name("service-webhooks"))
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [command, "listen", "--port", "0", "--secret", SECRET],
            stdout=out,
            stderr=err,
            env={**os.environ, "COLUMNS": "200"},
        )
    try:
        deadline = time.monotonic() + 15
        while not (match := re.search(r"listening on (http://\S+)", stderr.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"listen did not start:\n{stderr.read_text()}")
            time.sleep(0.05)
        for raw, _ in NAMES.values():
            body, header = delivery(raw, {"note": "x\ny"})
            answer = httpx.post(
                match.group(1), content=body, headers={SIGNATURE_HEADER: header}, timeout=10
            )
            assert answer.status_code == 200, answer.text
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    logged = stderr.read_text("utf-8").splitlines()
    printed = stdout.read_text("utf-8").splitlines()
    assert not any(line.startswith("FORGED") for line in logged + printed), logged + printed
    assert "\x1b" not in stderr.read_text("utf-8") + stdout.read_text("utf-8")
    for _, shown in NAMES.values():
        [log_line] = [line for line in logged if f"event={shown} " in line]
        assert "200 processed" in log_line
        [print_line] = [line for line in printed if f"  {shown} v1  " in line]
        assert '{"note":"x\\ny"}' in print_line
    assert len(printed) == 2
