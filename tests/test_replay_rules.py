"""Replays by the inbox's rules: without ``force`` a processed delivery stays a duplicate
(even once the store has forgotten its key); with ``force`` its handlers run again,
wherever they run (here, or behind ``CeleryHandoff``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from freezegun import freeze_time

from service_webhooks import Event, MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-replay-rules"
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


def test_a_forced_replay_runs_the_celery_workers_handlers_again() -> None:
    celery = pytest.importorskip("celery")
    app = celery.Celery("replay-proposed", broker="memory://")
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    from service_webhooks.handoff import CeleryHandoff

    store = MemoryStore()
    handoff = CeleryHandoff(app, store=store)
    runs: list[str] = []

    @handoff.on("note.created")
    def index(event: Event[Any]) -> None:
        runs.append(event.data.id)

    receiver = WebhookReceiver(SECRET, store=store, inbox=MemoryInbox())
    handoff.attach(receiver)
    assert receiver.process(BODY, sign(BODY, SECRET, ORG)).reason == "processed"
    [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    assert receiver.replay(record.id).reason == "duplicate"
    assert runs == ["n-1"]
    outcome = receiver.replay(record.id, force=True)
    assert (outcome.reason, runs) == ("processed", ["n-1", "n-1"])


@pytest.mark.parametrize("force", [False, True])
def test_a_replay_is_reported_once_with_the_answer_it_returns(force: bool) -> None:
    """A forced replay of a processed delivery first meets its done key (``duplicate``),
    then runs the handlers: one log line and one observer call, of ``processed``."""
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=MemoryInbox())
    receiver.on("note.created")(lambda event: None)
    seen: list[str] = []
    receiver.on_outcome(lambda record: seen.append(record.reason))
    assert receiver.process(BODY, sign(BODY, SECRET, ORG)).reason == "processed"
    [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    seen.clear()
    outcome = receiver.replay(record.id, force=force)
    assert seen == [outcome.reason] == ["processed" if force else "duplicate"]


async def test_an_async_forced_replay_is_reported_once() -> None:
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=MemoryInbox())
    receiver.on("note.created")(lambda event: None)
    seen: list[str] = []
    receiver.on_outcome(lambda record: seen.append(record.reason))
    assert (await receiver.aprocess(BODY, sign(BODY, SECRET, ORG))).reason == "processed"
    [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    seen.clear()
    assert (await receiver.areplay(record.id, force=True)).reason == "processed"
    assert seen == ["processed"]
