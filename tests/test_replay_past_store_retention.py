"""A delivery processed longer ago than the store's ``retention`` is still a duplicate
when replayed without ``force``: the inbox remembers it was processed."""

from __future__ import annotations

import json

from freezegun import freeze_time

from service_webhooks import MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-replay-proposed"
ORG = "o-REPLAY"
BODY = json.dumps(
    {
        "eventName": "note.created",
        "version": 1,
        "data": {"id": "n-1", "author": "a@b.c", "text": "t"},
    }
).encode()


def test_a_delivery_processed_before_the_stores_retention_stays_a_duplicate() -> None:
    runs: list[str] = []
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=MemoryInbox())
    receiver.on("note.created")(lambda event: runs.append(event.data.id))
    with freeze_time("2026-01-01 12:00:00"):
        assert receiver.process(BODY, sign(BODY, SECRET, ORG)).reason == "processed"
        [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    with freeze_time("2026-01-11 12:00:00"):  # ten days on: the store forgot the key
        assert receiver.replay(record.id).reason == "duplicate"
        assert runs == ["n-1"]
        assert receiver.replay(record.id, force=True).reason == "processed"
    assert runs == ["n-1", "n-1"]
