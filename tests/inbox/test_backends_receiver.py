"""Every backend records what the receiver hands it, odd inputs included (sync and async)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from service_webhooks import Event, MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import Inbox

SECRET = "whsec-backends"
ORG = "o-BACKENDS"


def envelope(event: str, version: int = 1, **data: Any) -> bytes:
    return json.dumps({"eventName": event, "version": version, "data": data}).encode()


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_each_outcome_lands_as_one_record_with_the_exact_body(
    make_inbox: Callable[..., Inbox], run_async: bool
) -> None:
    inbox = make_inbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)

    @receiver.on("note.created")
    def handler(event: Event[Any]) -> None:
        if event.data.text == "boom":
            raise ValueError("boom")

    note = b'{"eventName":"note.created","version":1,"data":{"id":"n","author":"a","text":"ok"}}'
    bodies = {
        "processed": note,
        "duplicate": note,
        "handler_failed": note.replace(b'"ok"', b'"boom"'),
        "unhandled": envelope("note.\x00odd\u2028é", 2**64, x="y"),
        "malformed_envelope": b"\xff\xfe not json",
    }
    for expected, body in bodies.items():
        signature = sign(body, SECRET, ORG)
        if run_async:
            outcome = await receiver.aprocess(body, signature)
        else:
            outcome = receiver.process(body, signature)
        assert outcome.reason == expected
    records = list(reversed(inbox.search().items))
    assert [(r.reason, r.body) for r in records] == list(bodies.items())
    assert [r.seen for r in records[:3]] == [1, 2, 1]
    assert records[3].event_name == "note.\ufffdodd\u2028é"
    assert records[3].version is None
    assert records[2].traceback is not None
    assert "ValueError: boom" in records[2].traceback
