"""A verified delivery whose JSON is too deep for Python's parser, or whose indented
text would be huge, is shown as received by ``inbox show``, ``--json`` and the Django
admin (the dashboard has its own test), never an error."""

from __future__ import annotations

import json

import pytest

from service_webhooks import MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox
from service_webhooks.inbox.commands import PRETTY_MIN, json_line, pretty_body, show_lines

SECRET = "whsec-deep-0123456789abcdef0123456789abcdef"
DEEP = b"[" * 100_000 + b"]" * 100_000  # past json's recursion limit on 3.11-3.13 (C frames)
WIDE = b"[" + b",".join([b"[" * 400 + b"]" * 400] * 60) + b"]"  # 48 KB -> ~19 MB indented


@pytest.mark.parametrize("body", [DEEP, WIDE], ids=["deep", "wide"])
def test_inbox_commands_show_a_deep_payload_as_received(body: bytes) -> None:
    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)
    outcome = receiver.process(body, sign(body, SECRET, "o-DEEP"))
    assert outcome.reason == "malformed_envelope"  # authenticated: recorded
    [record] = inbox.search().items
    lines = show_lines(record)
    assert lines[-2:] == ["payload:", body.decode()]
    line = json.loads(json_line(record, full=True))
    assert line["bodyBase64"]
    assert line["payload"] == (None if body is DEEP else json.loads(body))


def test_pretty_body_indents_ordinary_json_and_caps_the_rest() -> None:
    assert pretty_body(b'{"a":[1]}') == ('{\n  "a": [\n    1\n  ]\n}', "JSON, indented for reading")
    # a body that is not UTF-8 was "not JSON: shown as UTF-8 text", its bytes U+FFFD
    assert pretty_body(b"\xff") == (
        "\N{REPLACEMENT CHARACTER}",
        "not UTF-8: invalid bytes shown as \N{REPLACEMENT CHARACTER} (the download has them)",
    )
    assert pretty_body("café".encode()) == ("café", "not JSON: shown as UTF-8 text")
    assert pretty_body(b"") == ("", "empty body: the delivery had no payload")
    text, note = pretty_body(WIDE)
    assert (text, note) == (WIDE.decode(), "JSON too nested to indent: shown as received")
    assert len(pretty_body(DEEP)[0]) <= max(8 * len(DEEP), PRETTY_MIN)


def test_pretty_body_keeps_every_member_as_received() -> None:
    """A repeated name is shown twice, in the order sent: a dict would keep the last."""
    text, note = pretty_body(b'{"id":"a","data":{"n":1,"n":2},"id":"b"}')
    assert note == "JSON, indented for reading"
    assert text == ('{\n  "id": "a",\n  "data": {\n    "n": 1,\n    "n": 2\n  },\n  "id": "b"\n}')
    assert pretty_body(b"{}")[0] == "{}"
