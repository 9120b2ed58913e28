"""A forced replay through ``CeleryHandoff`` runs the worker's handlers again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service_webhooks import Event, MemoryStore, WebhookReceiver, sign
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
