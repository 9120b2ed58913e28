"""Recording and replay paths beside the plain ones: a tracer, a custom key, forced
replays that fail or run inside a unit of work."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from service_webhooks import Event, MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-recording-paths"
ORG = "o-PATHS"


def body_for(note_id: str) -> bytes:
    data = {"id": note_id, "author": "a@b.c", "text": "t"}
    return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()


class Tracer:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @contextlib.contextmanager
    def delivery(self) -> Iterator[None]:
        self.seen.append("delivery")
        yield

    @contextlib.contextmanager
    def handlers(self, event: Event[Any]) -> Iterator[None]:
        self.seen.append(f"handlers {event.name}")
        yield


def test_recorded_deliveries_still_go_through_the_tracer() -> None:
    tracer = Tracer()
    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox, tracer=tracer)
    receiver.on("note.created", lambda event: None)
    first, second = body_for("n-1"), body_for("n-2")
    assert receiver.process(first, sign(first, SECRET, ORG)).reason == "processed"
    outcome = asyncio.run(receiver.aprocess(second, sign(second, SECRET, ORG)))
    assert outcome.reason == "processed"
    assert tracer.seen == ["delivery", "handlers note.created"] * 2
    assert len(inbox.search().items) == 2


def test_replay_uses_the_custom_key_again() -> None:
    inbox = MemoryInbox()
    receiver = WebhookReceiver(
        SECRET, store=MemoryStore(), inbox=inbox, idempotency_key=lambda event: event.data.id
    )
    runs: list[str] = []
    receiver.on("note.created", lambda event: runs.append(event.idempotency_key))
    body = body_for("n-7")
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "processed"
    record = inbox.search().items[0]
    assert receiver.replay(record.id).reason == "duplicate"  # same custom key: done
    assert receiver.replay(record.id, force=True).reason == "processed"
    assert runs == [f"{ORG},n-7", f"{ORG},n-7"]


def test_a_failing_custom_key_is_recorded_under_its_event_and_so_is_its_replay() -> None:
    """500 before a plan existed: still the organization and the event, on the delivery
    and on its replay (the key function fails the same way again)."""
    inbox = MemoryInbox()
    receiver = WebhookReceiver(
        SECRET, store=MemoryStore(), inbox=inbox, idempotency_key=lambda event: event.data.nope
    )
    receiver.on("note.created", lambda event: None)
    body = body_for("n-6")
    outcome = receiver.process(body, sign(body, SECRET, ORG))
    assert (outcome.status, outcome.event_name, outcome.organization_id) == (
        500,
        "note.created",
        ORG,
    )
    record = inbox.search().items[0]
    assert (record.reason, record.event_name, record.version) == (
        "configuration",
        "note.created",
        1,
    )
    replayed = receiver.replay(record.id)
    assert (replayed.status, replayed.event_name, replayed.organization_id) == (
        500,
        "note.created",
        ORG,
    )


def test_a_schema_drift_replayed_before_the_fix_names_its_event() -> None:
    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)

    def handler(event: Event[Any]) -> None:
        pass

    receiver.on("note.created", handler)
    body = b'{"eventName":"note.created","version":1,"data":{"id":5}}'
    assert receiver.process(body, sign(body, SECRET, ORG)).status == 400
    record = inbox.search().items[0]
    replayed = receiver.replay(record.id)
    assert (replayed.status, replayed.reason) == (400, "malformed_envelope")
    receiver.router.remove(handler)
    unread = receiver.replay(record.id)  # no handler takes it any more: nothing to refuse
    assert (unread.status, unread.reason) == (200, "unhandled")
    assert (replayed.event_name, replayed.organization_id) == ("note.created", ORG)
    assert inbox.get(record.id).replays[0].reason == "malformed_envelope"  # type: ignore[union-attr]


def test_a_forced_replay_that_fails_is_answered_as_a_delivery() -> None:
    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)
    calls: list[int] = []

    def handler(event: Event[Any]) -> None:
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("broken after a deploy")

    receiver.on("note.created", handler)
    body = body_for("n-8")
    receiver.process(body, sign(body, SECRET, ORG))
    record = inbox.search().items[0]
    assert receiver.replay(record.id, force=True).status == 500
    assert asyncio.run(receiver.areplay(record.id, force=True)).status == 500
    assert len(calls) == 3


def test_forced_replays_run_inside_the_unit_of_work() -> None:
    seen: list[str] = []

    @contextlib.asynccontextmanager
    async def unit(event: Event[Any]) -> AsyncIterator[None]:
        seen.append("enter")
        yield
        seen.append("exit")

    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox, unit_of_work=unit)
    receiver.on("note.created", lambda event: seen.append("handler"))
    body = body_for("n-9")
    outcome = asyncio.run(receiver.aprocess(body, sign(body, SECRET, ORG)))
    assert outcome.reason == "processed"
    record = inbox.search().items[0]
    forced = asyncio.run(receiver.areplay(record.id, force=True))
    assert forced.reason == "processed"
    assert seen == ["enter", "handler", "exit"] * 2
