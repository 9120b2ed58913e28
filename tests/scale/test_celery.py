"""Celery hand-off: answered in well under a second however slow the handler, run once.

A real Celery worker (``--pool=solo``, Redis broker, a queue private to this run) runs
the handlers of ``celery_app.py``; uvicorn serves the receiver, which only enqueues.
The slow handler sleeps 30 s: the test does not wait for it, it kills that worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")
from celery import Celery

from service_webhooks import Event, NoteCreated, WebhookReceiver, default_idempotency_key, sign
from service_webhooks.handoff import CeleryHandoff, HandoffError
from service_webhooks.stores import ClaimState, MemoryStore

HERE = Path(__file__).parent
SECRET = "whsec-test-0123456789abcdef0123456789abcdef"
BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a@b.c","text":"t"}}'


@pytest.fixture
def celery_env(backend: Any) -> Iterator[dict[str, str]]:
    import redis

    queue = f"service_webhooks_test_{uuid.uuid4().hex[:12]}"
    broker = backend.count_target.partition("#")[0]
    yield {
        "SW_CELERY_BROKER": broker,
        "SW_CELERY_QUEUE": queue,
        "SW_SCALE_STORE": backend.store_url,
        "SW_SCALE_COUNT": backend.count_target,
    }
    client = redis.Redis.from_url(broker)
    client.delete(queue, f"_kombu.binding.{queue}")
    client.close()


@pytest.fixture
def worker(celery_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    process = _start_worker(celery_env)
    yield process
    _kill(process)


def _start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "celery_app:celery_app",
        "worker",
        "--pool=solo",
    ]
    command += ["-Q", env["SW_CELERY_QUEUE"], "--without-gossip", "--without-mingle"]
    command += ["--without-heartbeat", "--loglevel=warning", "--prefetch-multiplier=1"]
    return subprocess.Popen(command, cwd=HERE, env={**os.environ, **env}, stdout=subprocess.DEVNULL)


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)  # its task sleeps 30 s; a warm stop would wait
        process.wait(10)


def _wait_for(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.e2e
@pytest.mark.services
@pytest.mark.parametrize("backend", ["redis"], indirect=True)  # Redis: broker and store
def test_slow_handler_answered_fast_and_duplicates_enqueued_once(
    backend: Any, celery_env: dict[str, str], worker: Any, serve: Any, deliver: Any
) -> None:
    server = serve(celery_env, app="celery_app:web")

    # a duplicated delivery (3 at once, then a late retry) is enqueued and run once
    first = deliver(server.url, ["fast-1"] * 3, 3) + deliver(server.url, ["fast-1"])
    reasons = Counter(a.reason for a in first)
    assert reasons["processed"] == 1
    assert set(reasons) <= {"processed", "duplicate", "in_flight"}
    assert _wait_for(lambda: backend.counts().get("fast-1") == 1, 30), "worker never ran it"
    time.sleep(1.0)
    assert backend.counts() == {"fast-1": 1}

    # a handler that takes 30 s: the deliveries are answered in well under a second
    slow = deliver(server.url, ["slow-1"] * 2, 2)
    assert sorted(a.reason for a in slow) in (
        ["duplicate", "processed"],
        ["in_flight", "processed"],
    )
    assert all(a.status in (200, 503) for a in slow)
    answer_time = max(a.seconds for a in slow)
    assert answer_time < 1.0
    assert _wait_for(lambda: backend.counts().get("slow-1") == 1, 10)
    assert worker.poll() is None  # still inside the 30 s handler
    print(f"\n[celery] slow handler (30 s) deliveries answered in {answer_time * 1000:.0f} ms")


@pytest.mark.e2e
@pytest.mark.services
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_a_worker_killed_mid_handler_with_acks_late_loses_nothing(
    backend: Any, celery_env: dict[str, str], serve: Any, deliver: Any
) -> None:
    """Redis hands the killed worker's unacknowledged task to the next worker while the
    dead worker's claim still holds: that copy waits one lease and then runs the event
    (before, it raised HandoffError and the event, already answered 200, was lost)."""
    from kombu.transport.redis import Channel

    if not hasattr(Channel, "unacked_restore_interval"):
        pytest.skip("this kombu restores unacknowledged messages only every 100 s")
    env = {
        **celery_env,
        "SW_CELERY_LEASE": "8",
        "SW_CELERY_ACKS_LATE": "1",
        "SW_CELERY_VISIBILITY": "1",
    }
    server = serve(env, app="celery_app:web")
    first = _start_worker(env)
    try:
        [answer] = deliver(server.url, ["slow-killed"])
        assert answer.status == 200
        assert _wait_for(lambda: backend.counts().get("slow-killed") == 1, 15)
    finally:
        _kill(first)  # mid-handler: its claim holds until one lease after its last renewal
    killed_at = time.monotonic()
    second = _start_worker(env)
    try:
        assert _wait_for(lambda: backend.counts().get("slow-killed") == 2, 40), (
            "the killed worker's event never ran again"
        )
        waited = time.monotonic() - killed_at
    finally:
        _kill(second)
    print(f"\n[celery] killed worker's event ran again after {waited:.1f} s (lease 8 s)")


def test_a_broker_that_does_not_accept_fails_the_delivery_and_releases_the_claim(
    free_port: int,
) -> None:
    app = Celery("dead", broker=f"redis://127.0.0.1:{free_port}/0")
    app.conf.broker_connection_timeout = 1
    store = MemoryStore()
    handoff = CeleryHandoff(app, store=store)
    receiver = WebhookReceiver(secrets=SECRET, store=store)
    handoff.attach(receiver)
    started = time.monotonic()
    outcome = receiver.process(BODY, sign(BODY, SECRET, "o-1"))
    assert (outcome.status, outcome.reason) == (503, "handoff_failed")  # retried, never 2xx
    assert "Retry-After" in dict(outcome.headers)
    assert time.monotonic() - started < 5
    # the claim was released: the service's retry enqueues again
    assert store.state(default_idempotency_key("o-1", BODY)) is None


async def test_the_worker_rebuilds_the_same_event_and_dedups(tmp_path: Path) -> None:
    app = Celery("local", broker="memory://")
    store = MemoryStore()
    handoff = CeleryHandoff(app, store=store)
    seen: list[Event[Any]] = []

    @handoff.on("note.created")
    async def handler(event: Event[NoteCreated]) -> None:
        await asyncio.sleep(0)
        seen.append(event)

    receiver = WebhookReceiver(secrets=SECRET, store="memory")
    built: list[Event[Any]] = []
    receiver.on("note.created")(built.append)
    assert (await receiver.aprocess(BODY, sign(BODY, SECRET, "o-1"))).status == 200
    event = built[0]
    args = (BODY.decode(), event.organization_id, event.timestamp, event.idempotency_key)
    assert await asyncio.to_thread(handoff.run, *args) == "processed"
    assert seen == [event]
    assert isinstance(seen[0].data, NoteCreated)
    assert await asyncio.to_thread(handoff.run, *args) == "duplicate"  # broker re-delivery
    assert len(seen) == 1
    assert store.claim("task:" + event.idempotency_key, "x", 60) is ClaimState.DONE
    holder = MemoryStore()  # another worker is running this event right now
    holder.claim("task:" + event.idempotency_key, "other-worker", 60)
    busy = CeleryHandoff(Celery("x", broker="memory://"), store=holder)
    busy.on("note.created")(seen.append)
    with pytest.raises(HandoffError):
        busy.run(*args)
    assert len(seen) == 1


@pytest.mark.e2e
@pytest.mark.services
@pytest.mark.parametrize("backend", ["redis"], indirect=True)  # broker and counter
def test_a_store_down_when_the_worker_claims_delays_the_event_instead_of_losing_it(
    backend: Any, celery_env: dict[str, str], throwaway_redis: Any, serve: Any, deliver: Any
) -> None:
    """The delivery is answered 200 once queued; the store (a private Redis) then goes
    down before the worker claims the task. The task goes back on the queue for one
    lease and runs once the store is back (before, it failed and Celery dropped it)."""
    env = {**celery_env, "SW_SCALE_STORE": f"{throwaway_redis.url}?timeout=1"}
    env["SW_CELERY_LEASE"] = "3"
    server = serve(env, app="celery_app:web")
    [answer] = deliver(server.url, ["store-down"])  # no worker yet: the task waits queued
    assert (answer.status, answer.reason) == (200, "processed")
    throwaway_redis.stop()
    process = _start_worker(env)
    try:
        time.sleep(4)  # the worker takes the task while the store is down
        assert backend.counts() == {}
        throwaway_redis.start()
        assert _wait_for(lambda: backend.counts().get("store-down") == 1, 30), (
            "the event answered 200 never ran"
        )
    finally:
        _kill(process)
