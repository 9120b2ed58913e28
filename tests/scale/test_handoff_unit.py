"""``CeleryHandoff`` without a worker: Celery's in-memory broker and eager mode.

The real worker runs in ``test_celery.py``; here the task runs in the test process, so
the web-process side (``attach``, ``enqueue``) and the worker side (``run``) are
checked together: what is registered where, what runs, and what a failing handler
does to the worker-side claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("celery")
from celery import Celery

from service_webhooks import (
    ConfigurationError,
    Event,
    NoteCreated,
    StoreError,
    WebhookReceiver,
    default_idempotency_key,
    sign,
)
from service_webhooks.handoff import DEFAULT_TASK_NAME, CeleryHandoff, HandoffError
from service_webhooks.stores import ClaimState, MemoryStore

SECRET = "whsec-handoff-unit"
ORG = "o-HANDOFF-eu1"
NOTE = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a@b.c","text":"t"}}'
TREND = b'{"eventName":"segment.trend.alert","version":1,"data":{"duration":"DAILY"}}'
TIMESTAMP = 1_700_000_000


def eager_app(name: str = "eager") -> Celery:
    """Tasks run in-process as soon as they are sent (no worker, no broker I/O)."""
    app = Celery(name, broker="memory://")
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    return app


@contextlib.contextmanager
def in_a_worker(handoff: CeleryHandoff, request_id: str) -> Iterator[None]:
    """Run ``handoff``'s task body as a worker does (not called directly, not eager)."""
    handoff.task.push_request(called_directly=False, is_eager=False, id=request_id)
    try:
        yield
    finally:
        handoff.task.pop_request()


def assert_sent_again(app: Celery, queue: str, args: tuple[Any, ...]) -> None:
    """The task went back on ``queue`` with its arguments, to run one lease later."""
    with app.connection() as connection:
        message = connection.SimpleQueue(queue).get(timeout=1)
    assert message.headers["task"] == DEFAULT_TASK_NAME
    assert message.headers["eta"] is not None  # sent with countdown=lease
    assert list(message.decode()[0]) == list(args)


def args_for(body: bytes) -> tuple[str, str, int, str]:
    return body.decode(), ORG, TIMESTAMP, default_idempotency_key(ORG, body)


def test_a_celery_application_is_required() -> None:
    with pytest.raises(ConfigurationError, match=r"needs a celery\.Celery application"):
        CeleryHandoff(object())


def test_repr_names_the_task_and_queue() -> None:
    handoff = CeleryHandoff(eager_app(), task_name="hooks.run", queue="webhooks")
    assert repr(handoff) == "CeleryHandoff(task='hooks.run', queue='webhooks')"
    assert repr(CeleryHandoff(eager_app())) == (
        f"CeleryHandoff(task={DEFAULT_TASK_NAME!r}, queue=None)"
    )


def test_attach_for_one_event_enqueues_only_that_event() -> None:
    handoff = CeleryHandoff(eager_app())
    seen: list[Event[Any]] = []
    handoff.on("note.created")(seen.append)
    handoff.on("segment.trend.alert")(seen.append)
    receiver = WebhookReceiver(secrets=SECRET, store="memory")
    handoff.attach(receiver, "note.created", version=1)

    outcome = receiver.process(NOTE, sign(NOTE, SECRET, ORG, timestamp=None))
    assert outcome.status == 200
    [event] = seen  # the task ran (eagerly) with the rebuilt event
    assert event.name == "note.created"
    assert event.organization_id == ORG
    assert isinstance(event.data, NoteCreated)
    assert event.body == NOTE
    assert event.idempotency_key == default_idempotency_key(ORG, NOTE)

    # segment.trend.alert has a worker-side handler but was not attached on the receiver
    assert receiver.process(TREND, sign(TREND, SECRET, ORG)).status == 200
    assert len(seen) == 1


def test_the_task_runs_every_handler_sync_and_async_without_a_store() -> None:
    handoff = CeleryHandoff(eager_app())
    calls: list[str] = []

    @handoff.on("note.created")
    def first(event: Event[NoteCreated]) -> None:
        calls.append("sync:" + event.data.id)

    @handoff.on_any
    async def second(event: Event[Any]) -> None:
        await asyncio.sleep(0)
        calls.append("async:" + event.name)

    # the registered Celery task is the entry point the worker calls
    assert handoff.task(*args_for(NOTE)) == "processed"
    assert calls == ["sync:n-1", "async:note.created"]
    assert handoff.run(*args_for(NOTE)) == "processed"  # no store: no worker-side dedup
    assert len(calls) == 4


def test_the_task_converts_data_for_handlers_registered_with_a_model() -> None:
    handoff = CeleryHandoff(eager_app())
    seen: list[Any] = []
    handoff.on("note.*", lambda event: seen.append(event.data), model=dict[str, str])
    assert handoff.run(*args_for(NOTE)) == "processed"
    assert seen == [{"id": "n-1", "author": "a@b.c", "text": "t"}]


def test_an_event_without_handlers_is_unhandled_and_claims_nothing() -> None:
    store = MemoryStore()
    handoff = CeleryHandoff(eager_app(), store=store)
    handoff.on("note.created")(lambda event: None)
    body, org, timestamp, key = args_for(TREND)
    assert handoff.run(body, org, timestamp, key) == "unhandled"
    assert store.state("task:" + key) is None


def test_a_failing_handler_releases_the_worker_claim_and_raises() -> None:
    store = MemoryStore()
    handoff = CeleryHandoff(eager_app(), store=store, lease=60, retention=48 * 3600)
    attempts: list[int] = []

    @handoff.on("note.created")
    def flaky(event: Event[Any]) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("downstream is down")

    args = args_for(NOTE)
    key = "task:" + args[3]
    with pytest.raises(RuntimeError, match="downstream is down"):
        handoff.run(*args)
    assert store.state(key) is None  # released: Celery's retry may run it again
    assert handoff.run(*args) == "processed"
    assert store.claim(key, "another-worker", 60) is ClaimState.DONE
    assert handoff.run(*args) == "duplicate"
    assert len(attempts) == 2


def test_a_slow_handler_keeps_its_worker_claim_past_the_lease() -> None:
    """A broker re-delivery of a task whose handlers outlive the lease finds the
    claim in flight (it is renewed, as the receiver's is): the handlers run once."""
    store = MemoryStore()
    handoff = CeleryHandoff(eager_app(), store=store, lease=0.6)
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @handoff.on("note.created")
    def slow(event: Event[Any]) -> None:
        runs.append(1)
        started.set()
        release.wait(10)

    args = args_for(NOTE)
    first: list[str] = []
    worker = threading.Thread(target=lambda: first.append(handoff.run(*args)))
    worker.start()
    try:
        assert started.wait(5)
        time.sleep(1.5)  # two and a half leases: expired unless renewed
        with pytest.raises(HandoffError, match="running in another worker"):
            handoff.run(*args)  # the re-delivered task
    finally:
        release.set()
        worker.join(10)
    assert first == ["processed"]
    assert handoff.run(*args) == "duplicate"
    assert len(runs) == 1


@pytest.mark.parametrize("name", ["lease", "retention"])
@pytest.mark.parametrize("seconds", [0, -1, float("inf"), float("nan"), 10**400, True, "60"])
def test_lease_and_retention_must_be_finite_positive_seconds(name: str, seconds: Any) -> None:
    with pytest.raises(ConfigurationError, match=f"{name} must be a finite number of seconds"):
        CeleryHandoff(eager_app(), store=MemoryStore(), **{name: seconds})


@pytest.mark.parametrize("seconds", [60, 3600, 48 * 3600 - 1])
def test_retention_shorter_than_the_receivers_48_hours_is_refused(seconds: float) -> None:
    """A broker may hand a finished task's message out again hours later (a worker
    killed before its ack, a Redis visibility timeout): its done record must outlive that."""
    with pytest.raises(ConfigurationError, match=r"retention must be .* >= 172800 \(48 h\)"):
        CeleryHandoff(eager_app(), store=MemoryStore(), retention=seconds)
    assert CeleryHandoff(eager_app(), retention=48 * 3600).retention == 48 * 3600


def test_retention_past_what_a_store_can_expire_is_refused() -> None:
    # 1e308 s was accepted, then RedisStore.complete raised OverflowError on every event
    with pytest.raises(ConfigurationError, match=r"retention must be at most .* \(1000 years\)"):
        CeleryHandoff(eager_app(), store=MemoryStore(), retention=1e308)


def test_an_eager_handler_failure_is_answered_as_a_handler_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With ``task_always_eager`` (tests) no broker is involved: a handler that raises is
    the receiver's 500 ``handler_failed``, not a queue that refused the event (503)."""
    handoff = CeleryHandoff(eager_app(), store=MemoryStore())

    @handoff.on("note.created")
    def broken(event: Event[Any]) -> None:
        raise RuntimeError("bad data")

    receiver = WebhookReceiver(SECRET, store="memory")
    handoff.attach(receiver)
    outcome = receiver.process(NOTE, sign(NOTE, SECRET, ORG))
    assert (outcome.status, outcome.reason) == (500, "handler_failed")
    assert "enqueue to Celery failed" not in caplog.text


def test_a_failing_handler_without_a_store_raises() -> None:
    handoff = CeleryHandoff(eager_app())

    @handoff.on("note.created")
    async def broken(event: Event[Any]) -> None:
        raise ValueError("bad data")

    with pytest.raises(ValueError, match="bad data"):
        handoff.run(*args_for(NOTE))


def test_enqueue_sends_the_raw_body_and_signature_fields_to_the_queue() -> None:
    app = Celery("queued", broker="memory://")  # not eager: the message stays queued
    handoff = CeleryHandoff(app, queue="hooks-unit", retry_policy={"max_retries": 0})
    assert handoff.retry_policy == {"max_retries": 0}
    event: Event[Any] = Event("note.created", 1, None, ORG, TIMESTAMP, "k" * 64, NOTE)
    handoff.enqueue(event)
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue("hooks-unit")
        try:
            message = queue.get(timeout=5)
            message.ack()
        finally:
            queue.close()
    args = message.payload[0]
    assert args == [NOTE.decode(), ORG, TIMESTAMP, "k" * 64]
    assert message.headers["task"] == DEFAULT_TASK_NAME


def test_task_options_let_celery_run_a_failed_event_again() -> None:
    """By default a handler that raises in the worker is not run again (the delivery
    was answered 200); ``task_options`` turn on Celery's own retries."""
    store = MemoryStore()
    options = {"autoretry_for": (RuntimeError,), "max_retries": 3, "default_retry_delay": 0}
    app = eager_app()
    app.conf.task_eager_propagates = False  # an eager retry runs again only without it
    handoff = CeleryHandoff(app, store=store, task_options=options)
    attempts: list[int] = []

    @handoff.on("note.created")
    def flaky(event: Event[Any]) -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("downstream is down")

    args = args_for(NOTE)
    assert handoff.task.max_retries == 3
    assert handoff.task.delay(*args).get() == "processed"
    assert len(attempts) == 3
    assert store.claim("task:" + args[3], "another-worker", 60) is ClaimState.DONE


def test_task_options_cannot_rename_the_task() -> None:
    with pytest.raises(ConfigurationError, match="cannot set name or ignore_result"):
        CeleryHandoff(eager_app(), task_options={"name": "other"})


def test_in_a_worker_a_copy_finding_the_claim_in_flight_is_sent_again_one_lease_later() -> None:
    """The copy a broker re-delivers while another worker holds the claim (running, or
    killed with ``acks_late``) is not dropped: it goes back on the queue for one lease."""
    app = Celery("worker-side", broker="memory://")
    holder = MemoryStore()
    args = args_for(NOTE)
    holder.claim("task:" + args[3], "other-worker", 60)
    handoff = CeleryHandoff(app, store=holder, lease=7, queue="hooks")
    ran: list[Event[Any]] = []
    handoff.on("note.created")(ran.append)
    with in_a_worker(handoff, "t-1"):
        assert handoff.run(*args) == "in_flight"
    assert ran == []
    assert_sent_again(app, "hooks", args)


def test_in_a_worker_a_broker_refusing_the_copy_raises_handoff_error(free_port: int) -> None:
    app = Celery("refusing", broker=f"redis://127.0.0.1:{free_port}/0")
    app.conf.broker_connection_timeout = 1
    holder = MemoryStore()
    args = args_for(NOTE)
    holder.claim("task:" + args[3], "other-worker", 60)
    handoff = CeleryHandoff(app, store=holder)
    handoff.on("note.created")(lambda event: None)
    with (
        in_a_worker(handoff, "t-2"),
        pytest.raises(HandoffError, match="did not accept the event again"),
    ):
        handoff.run(*args)


def test_the_task_acks_late_and_requeues_when_its_worker_is_lost_unless_told_otherwise() -> None:
    """The delivery is answered 200 once queued: a worker killed mid-task (prefork's
    child, out of memory) must put the message back, not acknowledge it (Celery's
    defaults lose it: early ack, or late ack with WorkerLostError)."""
    task = CeleryHandoff(eager_app("defaults")).task
    assert (task.acks_late, task.reject_on_worker_lost) == (True, True)
    options = {"acks_late": False, "reject_on_worker_lost": False}
    task = CeleryHandoff(eager_app("at-most-once"), task_options=options).task
    assert (task.acks_late, task.reject_on_worker_lost) == (False, False)


class _DownStore(MemoryStore):
    """A worker-side store that is unreachable: every claim fails."""

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def test_in_a_worker_a_store_failing_the_claim_sends_the_task_again_one_lease_later() -> None:
    """The delivery was answered 200 once queued: a task that failed on the worker's
    store would be acknowledged by Celery and the event lost. It is sent again instead."""
    app = Celery("store-down", broker="memory://")
    handoff = CeleryHandoff(app, store=_DownStore(), lease=9, queue="hooks-down")
    ran: list[Event[Any]] = []
    handoff.on("note.created")(ran.append)
    args = args_for(NOTE)
    with in_a_worker(handoff, "t-3"):
        assert handoff.run(*args) == "store_unavailable"
    assert ran == []
    assert_sent_again(app, "hooks-down", args)


def test_outside_a_worker_a_store_failing_the_claim_raises_store_error() -> None:
    handoff = CeleryHandoff(eager_app(), store=_DownStore())
    handoff.on("note.created")(lambda event: None)
    with pytest.raises(StoreError):
        handoff.run(*args_for(NOTE))
