"""The gunicorn ``pre_request`` hook, called as gunicorn calls it (in-process)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from service_webhooks import WebhookReceiver, parse_signature_header
from service_webhooks.adapters.gunicorn import (
    REPEATED_VALUE,
    pre_request,
    refuse_repeated_signature,
)


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def debug(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)


def test_two_partial_lines_become_one_refused_value(signed: Any) -> None:
    body, header = signed()
    o_t, v = header.rsplit(",", 1)
    headers = [
        ("HOST", "x"),
        ("SERVICE-SIGNATURE", o_t),
        ("ACCEPT", "*/*"),
        ("SERVICE-SIGNATURE", v),
    ]
    log = _Log()
    pre_request(
        SimpleNamespace(log=log), SimpleNamespace(headers=headers, method="POST", path="/w")
    )
    assert headers == [("HOST", "x"), ("SERVICE-SIGNATURE", REPEATED_VALUE), ("ACCEPT", "*/*")]
    assert log.lines == ["POST /w"]  # gunicorn's own default pre_request line
    receiver = WebhookReceiver(secrets="s" * 32, store="memory", inbox=False)
    outcome = receiver.process(body, REPEATED_VALUE)
    assert (outcome.status, outcome.reason) == (401, "format")


def test_one_line_or_none_is_left_alone(signed: Any) -> None:
    _, header = signed()
    one = [("SERVICE-SIGNATURE", header)]
    refuse_repeated_signature(one)
    assert one == [("SERVICE-SIGNATURE", header)]
    assert parse_signature_header(one[0][1]).organization_id
    none = [("HOST", "x")]
    refuse_repeated_signature(none)
    assert none == [("HOST", "x")]
