"""End to end: the emulator delivers 5,000 events with duplicates and
shuffling over real sockets into the library's own receiver (``WebhookReceiver`` behind
``WebhookApp``, under uvicorn on 127.0.0.1 in its own process, see
``tests/helpers/sw_receiver_server.py``). Retry delays are compressed by a virtual
clock; signatures carry the real time, so the receiver's timestamp check applies."""

from __future__ import annotations

import collections
import hashlib
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sw_receiver_server
from freezegun import freeze_time

from service_webhooks import ConfigurationError
from service_webhooks.delivery import (
    Emulator,
    Endpoint,
    OutboundEvent,
    Result,
    Sender,
    VirtualClock,
    deliver_to_app,
)

SECRET = "whsec-e2e-7f3c9a1b5d2e4f6a8b0c1d2e3f4a5b6c"
ORG = "o-E2E-1"
EVENTS = 5000


Target = sw_receiver_server.Target


@pytest.fixture
def receiver_process(unused_port: int) -> Iterator[str]:
    """The receiver in its own process (one core for it, one for the emulator)."""
    script = Path(sw_receiver_server.__file__)
    process = subprocess.Popen([sys.executable, str(script), str(unused_port), SECRET, "5"])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", unused_port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the receiver process did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{unused_port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def notes(count: int) -> list[OutboundEvent]:
    return [
        OutboundEvent(
            "note.created", {"id": f"n-{n}", "author": "e2e@example.com", "text": "t"}, ORG
        )
        for n in range(count)
    ]


@pytest.mark.e2e
async def test_five_thousand_events_processed_exactly_once(receiver_process: str) -> None:
    events = notes(EVENTS)
    async with Sender(allow_private_destinations=True, max_connections=8) as sender:
        emulator = Emulator(
            sender,
            clock=VirtualClock(),
            duplicates=0.10,
            shuffle=True,
            seed=20,
            concurrency=8,
        )
        endpoint = emulator.add_endpoint(
            Endpoint(f"{receiver_process}/webhooks", SECRET, {"note.created"}, organization_id=ORG)
        )
        emulator.publish(events)
        summary = await emulator.run()
        stats = httpx.get(f"{receiver_process}/__stats", timeout=30).json()
    processed: dict[str, int] = stats["processed"]
    seen = [(digest, status) for digest, status in stats["seen"]]

    # Every event processed exactly once, none dead.
    assert len(processed) == EVENTS
    assert set(processed.values()) == {1}
    assert summary.dead == 0
    assert summary.failed == 0
    assert summary.delivered == summary.deliveries == EVENTS + summary.duplicates
    assert 400 <= summary.duplicates <= 600
    assert len(stats["failed_once"]) == EVENTS // 5  # 20 % of first attempts failed

    # The audit log agrees with what the receiver saw, request for request.
    entries = emulator.audit.entries(endpoint.id)
    assert len(entries) == summary.attempts == len(seen)
    audited = collections.Counter(
        (hashlib.sha256(e.payload).hexdigest(), e.status) for e in entries
    )
    assert audited == collections.Counter(seen)
    statuses = collections.Counter(e.status for e in entries)
    assert statuses[500] == EVENTS // 5  # each injected failure once, then retried
    assert set(statuses) <= {200, 500, 503}  # 503: a duplicate arrived while in flight
    assert statuses[200] == summary.deliveries
    assert {e.result for e in entries if e.status != 200} == {Result.TEMPORARY_FAILURE}
    # Retried deliveries are exactly the ones whose first answer was not 200.
    assert summary.retried == len({e.delivery_id for e in entries if e.status != 200})
    # Shuffled: the first attempts did not go out in publishing order.
    by_digest = {hashlib.sha256(event.body).hexdigest(): n for n, event in enumerate(events)}
    first = [by_digest[digest] for digest, _ in seen[:500]]
    assert first != sorted(first)


async def test_deliver_to_app_in_process(caplog: pytest.LogCaptureFixture) -> None:
    """The helper for users' own test suites: no socket, virtual clock, same receiver."""
    caplog.set_level(logging.CRITICAL, logger="service_webhooks")
    target = Target(SECRET, 5)
    emulator = await deliver_to_app(
        target, notes(50), secret=SECRET, organization_id=ORG, duplicates=0.2, seed=1
    )
    summary = emulator.summary()
    assert set(target.processed.values()) == {1}
    assert len(target.processed) == 50
    assert summary.delivered == summary.deliveries
    assert summary.retried == 10 + sum(
        1 for d in emulator.deliveries if d.duplicate and len(d.attempts) > 1
    )
    assert len({digest for digest, _ in target.seen}) == 50


async def test_wrong_secret_is_a_permanent_failure(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="service_webhooks")
    target = Target(SECRET, 5)
    emulator = await deliver_to_app(target, notes(1), secret="whsec-wrong", organization_id=ORG)
    (delivery,) = emulator.deliveries
    assert [e.status for e in delivery.attempts] == [401]
    assert delivery.attempts[0].result is Result.PERMANENT_FAILURE
    assert target.processed == {}


async def _answer_200(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def test_deliver_to_app_signs_with_a_frozen_clock(caplog: pytest.LogCaptureFixture) -> None:
    """Under freezegun, the signed ``t`` is the frozen time the receiver checks against.

    It used to be the real time (``signing_clock=time.time`` bound at import, out of
    freezegun's reach): every delivery was answered 401 ``timestamp``, a permanent failure.
    """
    caplog.set_level(logging.CRITICAL, logger="service_webhooks")
    target = Target(SECRET, 0)
    with freeze_time("2020-01-01 12:00:00"):
        emulator = await deliver_to_app(target, notes(2), secret=SECRET, organization_id=ORG)
    assert [e.status for d in emulator.deliveries for e in d.attempts] == [200, 200]
    assert {e.timestamp for d in emulator.deliveries for e in d.attempts} == {1577880000}


async def test_deliver_to_app_delivers_every_subcategory_and_version() -> None:
    # It used to configure one endpoint for the first subcategory and version 1 only:
    # the other events were silently not sent, and delivered == deliveries still held.
    events = [
        OutboundEvent("segment.trend.alert", {"duration": "DAILY"}, ORG, subcategory="c2VnLTE"),
        OutboundEvent("segment.trend.alert", {"duration": "WEEKLY"}, ORG, subcategory="c2VnLTI"),
        OutboundEvent("note.created", {"id": "n-1"}, ORG),
        OutboundEvent("note.created", {"id": "n-2"}, ORG, version=2),
    ]
    emulator = await deliver_to_app(_answer_200, events, secret=SECRET, organization_id=ORG)
    assert sorted(d.event.id for d in emulator.deliveries) == sorted(e.id for e in events)
    assert emulator.summary().delivered == 4


async def test_deliver_to_app_refuses_an_event_of_another_organization() -> None:
    # The default organization of an OutboundEvent is not ORG: such an event reached no
    # endpoint, and the run "succeeded" with zero deliveries.
    with pytest.raises(ConfigurationError, match="organization_id"):
        await deliver_to_app(
            _answer_200, [OutboundEvent("note.created", {})], secret=SECRET, organization_id=ORG
        )
