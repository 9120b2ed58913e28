"""The request entry points (handle/ahandle), the unit of work, claim renewal, RetryLater
and a failing secrets lookup: the contracts adapters and integrations build on."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from service_webhooks import (
    MAX_BODY_SIZE,
    ClaimState,
    Event,
    MemoryStore,
    Outcome,
    RetryLater,
    Router,
    WebhookReceiver,
    default_idempotency_key,
)

Signed = Callable[..., tuple[bytes, str]]
ORG = "o-TEST-na1"


class CountingReader:
    """A body stream that records how many bytes were asked of it."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)
        self.taken = 0

    def read(self, size: int) -> bytes:
        chunk = self.stream.read(size)
        self.taken += len(chunk)
        return chunk


def handle(
    receiver: WebhookReceiver,
    body: bytes,
    headers: list[tuple[str, str]],
    *,
    mode: str,
    method: str = "POST",
) -> tuple[Outcome | None, int]:
    reader = CountingReader(body)
    if mode == "sync":
        return receiver.handle(method, headers, reader.read), reader.taken

    async def aread(size: int) -> bytes:
        return reader.read(size)

    return asyncio.run(receiver.ahandle(method, headers, aread)), reader.taken


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def receiver(secret: str) -> WebhookReceiver:
    receiver = WebhookReceiver(secrets=secret, store=MemoryStore())
    receiver.on("note.created", lambda event: None)
    return receiver


# -- handle / ahandle ---------------------------------------------------------------------


def test_handle_processes_a_delivery(receiver: WebhookReceiver, signed: Signed, mode: str) -> None:
    body, header = signed()
    outcome, taken = handle(receiver, body, [("service-signature", header)], mode=mode)
    assert outcome is not None
    assert (outcome.status, outcome.reason) == (200, "processed")
    assert taken == len(body)


def test_handle_takes_raw_asgi_header_bytes(receiver: WebhookReceiver, signed: Signed) -> None:
    body, header = signed()
    headers = [
        (b"content-length", str(len(body)).encode()),
        (b"service-signature", header.encode()),
    ]

    async def aread(size: int) -> bytes:
        return body if size else b""

    reads = iter([body, b""])

    async def once(size: int) -> bytes:
        return next(reads)

    outcome = asyncio.run(receiver.ahandle("POST", headers, once))
    assert outcome is not None
    assert outcome.reason == "processed"


def test_two_signature_header_lines_are_refused(
    receiver: WebhookReceiver, signed: Signed, mode: str
) -> None:
    body, header = signed()
    o_t, v = header.rsplit(",", 1)  # each line alone is malformed; joined they would verify
    lines = [("Service-Signature", o_t), ("Service-Signature", v)]
    outcome, _ = handle(receiver, body, lines, mode=mode)
    assert outcome is not None
    assert (outcome.status, outcome.reason) == (401, "format")
    twice = [("Service-Signature", header), ("service-signature", header)]
    outcome, _ = handle(receiver, body, twice, mode=mode)
    assert outcome is not None
    assert (outcome.status, outcome.reason) == (401, "format")


def test_a_declared_length_over_the_cap_is_413_before_reading(
    receiver: WebhookReceiver, mode: str
) -> None:
    headers = [("Content-Length", str(MAX_BODY_SIZE + 1))]
    outcome, taken = handle(receiver, b"x" * (MAX_BODY_SIZE + 1), headers, mode=mode)
    assert outcome is not None
    assert (outcome.status, outcome.reason) == (413, "payload_too_large")
    assert taken == 0


def test_an_undeclared_long_body_is_read_only_to_the_cap_plus_one(
    receiver: WebhookReceiver, mode: str
) -> None:
    outcome, taken = handle(receiver, b"x" * (3 * MAX_BODY_SIZE), [], mode=mode)
    assert outcome is not None
    assert outcome.status == 413
    assert taken == MAX_BODY_SIZE + 1


def test_a_body_of_the_declared_length_is_complete_without_another_read(
    receiver: WebhookReceiver, signed: Signed, mode: str
) -> None:
    body, header = signed()
    halves = [body[:10], body[10:]]
    asked: list[int] = []

    def read(size: int) -> bytes:
        asked.append(size)
        assert halves, "read past the declared Content-Length"
        return halves.pop(0)

    headers = [("Content-Length", str(len(body))), ("Service-Signature", header)]
    if mode == "sync":
        outcome: Outcome | None = receiver.handle("POST", headers, read)
    else:

        async def aread(size: int) -> bytes:
            return read(size)

        outcome = asyncio.run(receiver.ahandle("POST", headers, aread))
    assert outcome is not None
    assert outcome.reason == "processed"
    assert asked == [len(body), len(body) - 10]


def test_a_declared_length_is_never_read_past(
    receiver: WebhookReceiver, signed: Signed, mode: str
) -> None:
    # A raw WSGI input (wsgiref) or socket file: the next request follows the body, and
    # reading past it would take its bytes into the signed body (401) or block.
    body, header = signed()
    reader = CountingReader(body + b"POST /webhooks HTTP/1.1\r\nHost: next\r\n\r\n")
    headers = [("Content-Length", str(len(body))), ("Service-Signature", header)]
    if mode == "sync":
        outcome: Outcome | None = receiver.handle("POST", headers, reader.read)
    else:

        async def aread(size: int) -> bytes:
            return reader.read(size)

        outcome = asyncio.run(receiver.ahandle("POST", headers, aread))
    assert outcome is not None
    assert (outcome.status, outcome.reason) == (200, "processed")
    assert reader.taken == len(body)


@pytest.mark.parametrize("length", ["\xb2", "1e3", "-1", " 12", ""])
def test_a_content_length_that_is_not_ascii_digits_counts_as_undeclared(
    receiver: WebhookReceiver, signed: Signed, mode: str, length: str
) -> None:
    body, header = signed()
    headers = [("Content-Length", length), ("Service-Signature", header)]
    outcome, taken = handle(receiver, body, headers, mode=mode)
    assert outcome is not None
    assert outcome.reason == "processed"
    assert taken == len(body)


def test_transfer_encoding_overrides_content_length(
    receiver: WebhookReceiver, signed: Signed, mode: str
) -> None:
    body, header = signed()
    headers = [
        ("Content-Length", str(MAX_BODY_SIZE * 4)),  # a proxy's stale value: not the length
        ("Transfer-Encoding", "chunked"),
        ("Service-Signature", header),
    ]
    outcome, _ = handle(receiver, body, headers, mode=mode)
    assert outcome is not None
    assert outcome.reason == "processed"


def test_a_smaller_framework_cap_applies(receiver: WebhookReceiver, mode: str) -> None:
    reader = CountingReader(b"x" * 500)
    if mode == "sync":
        outcome: Outcome | None = receiver.handle("POST", [], reader.read, max_body_size=100)
    else:

        async def aread(size: int) -> bytes:
            return reader.read(size)

        outcome = asyncio.run(receiver.ahandle("POST", [], aread, max_body_size=100))
    assert outcome is not None
    assert outcome.status == 413
    assert reader.taken == 101


@pytest.mark.parametrize("method", ["post", "Post", "GET", ""])
def test_methods_are_case_sensitive(receiver: WebhookReceiver, mode: str, method: str) -> None:
    outcome, taken = handle(receiver, b"{}", [], mode=mode, method=method)
    assert outcome is not None
    assert (outcome.status, dict(outcome.headers)) == (
        405,
        {"Allow": "POST"},
    )
    assert taken == 0


def test_a_client_that_disconnects_gets_no_answer_and_nothing_runs(
    receiver: WebhookReceiver, signed: Signed
) -> None:
    runs: list[Event[Any]] = []
    receiver.on("note.created", runs.append)

    async def gone(size: int) -> None:
        return None

    assert asyncio.run(receiver.ahandle("POST", [], gone)) is None
    assert runs == []


# -- a failing secrets lookup --------------------------------------------------------------


def test_a_secrets_callable_that_raises_answers_503(signed: Signed, drive: Any) -> None:
    def lookup(organization_id: str) -> str:
        raise ConnectionError("vault is down")

    receiver = WebhookReceiver(secrets=lookup, store=MemoryStore())
    receiver.on("note.created", lambda event: None)
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason) == (503, "secrets_unavailable")
    assert dict(outcome.headers)["Retry-After"]


def test_a_secrets_lookup_error_logs_its_type_not_its_message(
    signed: Signed, drive: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A secret manager's error may quote a credential: at ERROR only its type."""

    def lookup(organization_id: str) -> str:
        raise PermissionError("token hvs.SECRET-TOKEN-123 is not allowed")

    receiver = WebhookReceiver(secrets=lookup, store=MemoryStore())
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        assert drive(receiver, *signed()).reason == "secrets_unavailable"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("the secrets lookup failed: PermissionError" in line for line in errors)
    assert not any("SECRET-TOKEN" in line for line in errors)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="service_webhooks"):
        drive(receiver, *signed())
    assert any("SECRET-TOKEN" in r.getMessage() for r in caplog.records if r.levelno == 10)


@pytest.mark.parametrize("returned", [5, "", [], [b""]])
def test_a_secrets_callable_returning_no_secret_is_logged_as_an_error(
    signed: Signed, drive: Any, caplog: pytest.LogCaptureFixture, returned: object
) -> None:
    """Answered 500 ``configuration`` (retried), and said at ERROR: before, only the
    per-delivery INFO line showed it, so with default logging nothing did."""
    receiver = WebhookReceiver(secrets=lambda organization_id: returned, store=MemoryStore())
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason) == (500, "configuration")
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "the secrets lookup for " in error.getMessage()
    assert "returned no valid secret" in error.getMessage()


def test_under_aprocess_the_secrets_callable_runs_off_the_event_loop(
    secret: str, signed: Signed
) -> None:
    threads: list[int] = []

    def lookup(organization_id: str) -> str:
        threads.append(threading.get_ident())
        return secret

    receiver = WebhookReceiver(secrets=lookup, store=MemoryStore())
    receiver.on("note.created", lambda event: None)

    async def main() -> tuple[Outcome, int]:
        return await receiver.aprocess(*signed()), threading.get_ident()

    outcome, loop_thread = asyncio.run(main())
    assert outcome.reason == "processed"
    assert threads
    assert threads[0] != loop_thread


@pytest.mark.parametrize("form", ["secret", "list", "mapping"])
def test_under_aprocess_configured_secrets_are_looked_up_on_the_event_loop(
    secret: str, signed: Signed, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a static secret or an organization table is a dict lookup: no worker-thread hop
    import service_webhooks._receiver as receiver_module

    hops: list[Any] = []
    real = receiver_module.run_in_thread

    async def counting(function: Callable[[Any], Any], argument: Any) -> Any:
        hops.append(function)
        return await real(function, argument)

    monkeypatch.setattr(receiver_module, "run_in_thread", counting)
    config: Any = {"secret": secret, "list": [secret], "mapping": {ORG: secret}}[form]
    receiver = WebhookReceiver(secrets=config, store=MemoryStore())

    async def handler(event: Event[Any]) -> None:
        return None

    receiver.on("note.created", handler)
    outcome = asyncio.run(receiver.aprocess(*signed(org=ORG)))
    assert outcome.reason == "processed"
    assert hops == []


# -- RetryLater ----------------------------------------------------------------------------


def test_retry_later_answers_503_and_releases_the_claim(
    receiver: WebhookReceiver, signed: Signed, drive: Any
) -> None:
    attempts: list[int] = []

    def busy(event: Event[Any]) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RetryLater("the warehouse is busy")

    receiver.on("note.created", busy)
    body, header = signed()
    first = drive(receiver, body, header)
    assert (first.status, first.reason) == (503, "retry_later")
    assert "Retry-After" in dict(first.headers)
    assert drive(receiver, body, header).reason == "processed"  # the retry runs it
    assert len(attempts) == 2


@pytest.mark.parametrize("reason", ['bad "input"', "réessayer", "a\\b\nc"])
def test_a_subclass_reason_that_needs_escaping_still_answers_a_json_body(
    receiver: WebhookReceiver, signed: Signed, drive: Any, reason: str
) -> None:
    """The body is ``{"status": ..., "reason": ...}`` as JSON whatever the reason of a
    user's own ``RetryLater`` subclass: a quote, an accent or a control character once
    made it invalid JSON, or made ``Outcome.body`` raise while the adapter wrote it."""

    class Busy(RetryLater):
        pass

    Busy.reason = reason

    def busy(event: Event[Any]) -> None:
        raise Busy("the warehouse is busy")

    receiver.on("note.created", busy)
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason) == (503, reason)
    assert json.loads(outcome.body) == {"status": 503, "reason": reason}


# -- the unit of work ----------------------------------------------------------------------


class Unit:
    """A context manager recording what it saw: the completed key must be inside it."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.seen: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def __call__(self, event: Event[Any]) -> Iterator[None]:
        self.seen.append(("enter", event.name))
        try:
            yield
        except BaseException as error:
            self.seen.append(("rollback", type(error).__name__))
            raise
        key = event.idempotency_key
        done = self.store.claim(key, "probe", 1) is ClaimState.DONE
        self.seen.append(("commit", "done" if done else "not done"))


def test_the_unit_of_work_wraps_handlers_and_completion(secret: str, signed: Signed) -> None:
    store = MemoryStore()
    unit = Unit(store)
    receiver = WebhookReceiver(secrets=secret, store=store, unit_of_work=unit)
    receiver.on("note.created", lambda event: unit.seen.append(("handler", event.name)))
    assert receiver.process(*signed()).reason == "processed"
    assert unit.seen == [
        ("enter", "note.created"),
        ("handler", "note.created"),
        ("commit", "done"),  # the key was recorded as done before the unit's exit
    ]


def test_a_handler_failure_rolls_the_unit_back_and_releases(secret: str, signed: Signed) -> None:
    store = MemoryStore()
    unit = Unit(store)
    receiver = WebhookReceiver(secrets=secret, store=store, unit_of_work=unit)
    receiver.on("note.created", lambda event: 1 / 0)
    body, header = signed()
    assert receiver.process(body, header).status == 500
    assert unit.seen == [("enter", "note.created"), ("rollback", "ZeroDivisionError")]
    key = default_idempotency_key(ORG, body)
    assert store.claim(key, "retry", 5) is ClaimState.NEW  # released: the retry runs it


def test_a_lost_claim_rolls_the_unit_back(secret: str, signed: Signed) -> None:
    class Stolen(MemoryStore):
        def complete(self, key: str, token: str, retention: float) -> bool:
            return False  # another delivery holds the key now

        async def acomplete(self, key: str, token: str, retention: float) -> bool:
            return False

    store = Stolen()
    unit = Unit(store)
    receiver = WebhookReceiver(secrets=secret, store=store, unit_of_work=unit)
    receiver.on("note.created", lambda event: None)
    outcome = receiver.process(*signed())
    assert (outcome.status, outcome.reason) == (503, "in_flight")
    assert unit.seen[-1] == ("rollback", "_ClaimLost")


def test_an_async_unit_of_work_under_aprocess(secret: str, signed: Signed) -> None:
    seen: list[str] = []

    @contextlib.asynccontextmanager
    async def unit(event: Event[Any]) -> AsyncIterator[None]:
        seen.append("enter")
        yield
        seen.append("exit")

    receiver = WebhookReceiver(secrets=secret, store=MemoryStore(), unit_of_work=unit)
    receiver.on("note.created", lambda event: seen.append("handler"))
    assert asyncio.run(receiver.aprocess(*signed())).reason == "processed"
    assert seen == ["enter", "handler", "exit"]
    other = json.dumps(
        {
            "eventName": "note.created",
            "version": 1,
            "data": {"id": "n-2", "author": "a", "text": "t"},
        }
    )
    sync_outcome = receiver.process(*signed(other.encode()))
    assert sync_outcome.status == 500  # an async unit cannot run under process()


def test_unit_of_work_must_be_callable(secret: str) -> None:
    from service_webhooks import ConfigurationError

    with pytest.raises(ConfigurationError, match="unit_of_work"):
        WebhookReceiver(secrets=secret, store="memory", unit_of_work=42)  # type: ignore[arg-type]


# -- Router.dispatch -----------------------------------------------------------------------


def test_router_dispatch_and_adispatch_run_the_handlers_in_order() -> None:
    router = Router()
    seen: list[str] = []
    router.on("note.created", lambda event: seen.append("specific"))

    async def catch_all(event: Event[Any]) -> None:
        seen.append("any")

    router.on_any(catch_all)
    event: Event[Any] = Event("note.created", 1, {}, ORG, 0, "k")
    assert router.dispatch(event) == 2
    assert asyncio.run(router.adispatch(event)) == 2
    assert seen == ["specific", "any", "specific", "any"]
    assert Router().dispatch(event) == 0


# -- claim renewal -------------------------------------------------------------------------


def test_a_slow_handler_keeps_its_claim_past_the_lease(secret: str, signed: Signed) -> None:
    """A handler running three leases long is not taken over by the service's retry."""
    store = MemoryStore()
    receiver = WebhookReceiver(secrets=secret, store=store, lease=0.3)
    started = threading.Event()
    runs: list[int] = []

    def slow(event: Event[Any]) -> None:
        runs.append(1)
        started.set()
        time.sleep(1.0)

    receiver.on("note.created", slow)
    body, header = signed()
    first: list[Outcome] = []
    worker = threading.Thread(target=lambda: first.append(receiver.process(body, header)))
    worker.start()
    assert started.wait(5)
    retries = []
    for _ in range(4):  # retries arriving over ~2.5 leases while the first still runs
        time.sleep(0.2)
        retries.append(receiver.process(*signed(body)).reason)
    worker.join(10)
    assert first[0].reason == "processed"
    assert set(retries) == {"in_flight"}
    assert runs == [1]


def test_store_failures_are_logged_with_their_message_and_no_password(
    secret: str, signed: Signed, caplog: pytest.LogCaptureFixture
) -> None:
    class Down(MemoryStore):
        def claim(self, key: str, token: str, lease: float) -> ClaimState:
            raise ConnectionError("cannot reach redis://:hunter2@10.0.0.9:6379/0\nretry")

    receiver = WebhookReceiver(secrets=secret, store=Down())
    receiver.on("note.created", lambda event: None)
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        assert receiver.process(*signed()).reason == "store_unavailable"
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "ConnectionError: cannot reach redis://:***@10.0.0.9:6379/0\\nretry" in text
    assert "hunter2" not in text


def test_a_large_body_gets_the_same_default_key(
    receiver: WebhookReceiver, signed: Signed, drive: Any
) -> None:
    """From OVERLAP_FROM bytes the key is hashed on another thread: the same key."""
    from service_webhooks._idempotency import OVERLAP_FROM

    keys: list[str] = []
    receiver.on("note.created", lambda event: keys.append(event.idempotency_key))
    text = "x" * OVERLAP_FROM
    data = {"id": "n-big", "author": "a@example.com", "text": text}
    body = json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()
    assert len(body) >= OVERLAP_FROM
    assert drive(receiver, *signed(body)).reason == "processed"
    assert keys == [default_idempotency_key(ORG, body)]
    forged = drive(receiver, body, signed(body, secret="another-secret")[1])
    assert forged.status == 401  # the key computed beside a failing HMAC is dropped


def _large_body(note_id: str) -> bytes:
    from service_webhooks._idempotency import OVERLAP_FROM

    data = {"id": note_id, "author": "a@example.com", "text": "x" * OVERLAP_FROM}
    return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()


def test_forged_large_bodies_queue_nothing_behind_a_busy_hashing_thread(
    receiver: WebhookReceiver, signed: Signed, drive: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key of a large body is hashed on one thread, started before the signature
    is checked: while that thread is busy, further bodies are hashed by their caller
    (only once verified), so a flood of forged ones holds no queue of bodies there, and
    a real delivery's key does not wait behind them."""
    from service_webhooks import _idempotency

    hashed = _idempotency._key_and_ascii
    gate, done = threading.Event(), threading.Event()
    calls: list[str] = []

    def held(organization_id: str, body: bytes) -> tuple[str, bool]:
        calls.append(organization_id)
        gate.wait()
        try:
            return hashed(organization_id, body)
        finally:
            done.set()

    monkeypatch.setattr(_idempotency, "_key_and_ascii", held)
    keys: list[str] = []
    receiver.on("note.created", lambda event: keys.append(event.idempotency_key))
    forged = _large_body("n-forged")
    header = signed(forged, secret="another-secret")[1]
    try:
        statuses = {drive(receiver, forged, header).status for _ in range(50)}
        real = _large_body("n-real")
        answer: list[Outcome] = []  # answered while the hashing thread is still held
        worker = threading.Thread(target=lambda: answer.append(drive(receiver, *signed(real))))
        worker.start()
        worker.join(30)  # a guard against a hang, not a measure
    finally:
        gate.set()
    assert statuses == {401}
    assert [outcome.reason for outcome in answer] == ["processed"]
    assert keys == [default_idempotency_key(ORG, real)]
    assert done.wait(30)  # the held body is hashed: the thread is free again
    again = _idempotency.OverlappedKey.start(ORG, real)
    assert again is not None
    assert again.key() == default_idempotency_key(ORG, real)
    assert len(calls) == 2  # the first forged body, and this last one; not one per body


def test_a_forked_child_processes_large_bodies(receiver: WebhookReceiver, signed: Signed) -> None:
    """A process that forks after hashing a large body on its hashing thread: the
    child, which has no such thread, still gets its large deliveries' keys."""
    from sw_forking import beside_a_child

    assert receiver.process(*signed(_large_body("n-before"))).reason == "processed"

    def work() -> tuple[list[str], set[int]]:
        return [receiver.process(*signed(_large_body("n-after"))).reason], set()

    parent, child = beside_a_child(work)  # the child is killed after 30 s if it hangs
    assert parent == child == (["processed"], set())


@pytest.mark.parametrize(
    ("insert", "reason"),
    [("é".encode(), "processed"), (b"\xc0\xaf", "malformed_envelope")],
    ids=["utf-8", "overlong"],
)
def test_a_large_body_is_checked_for_utf8_beside_the_hmac(
    receiver: WebhookReceiver, signed: Signed, drive: Any, insert: bytes, reason: str
) -> None:
    """From OVERLAP_FROM bytes the ASCII scan runs on the hashing thread; a non-ASCII
    body still gets the strict UTF-8 check, even in a skipped field."""
    from service_webhooks._idempotency import OVERLAP_FROM

    receiver.on("note.created", lambda event: None)
    head = b'{"eventName":"note.created","version":1,"skipped":"'
    tail = b'","data":{"id":"n-big","author":"a@example.com","text":"t"}}'
    body = head + b"x" * OVERLAP_FROM + insert + tail
    assert drive(receiver, *signed(body)).reason == reason


def test_sync_handlers_under_aprocess_run_off_the_loop_with_the_callers_context(
    receiver: WebhookReceiver, signed: Signed
) -> None:
    """Plain handlers run on pool threads: never the loop's, context variables copied,
    exceptions re-raised in the task, and a blocked handler does not hold up another."""
    import contextvars

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    seen: list[tuple[int, str]] = []
    release = threading.Event()

    def blocking(event: Event[Any]) -> None:
        if event.data.id == "n-slow":
            release.wait(10)
        seen.append((threading.get_ident(), marker.get()))

    receiver.on("note.created", blocking)

    def body(note_id: str) -> bytes:
        data = {"id": note_id, "author": "a", "text": "t"}
        return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()

    async def main() -> tuple[list[Outcome], int]:
        marker.set("from-the-task")
        slow = asyncio.create_task(receiver.aprocess(*signed(body("n-slow"))))
        await asyncio.sleep(0.05)
        fast = await receiver.aprocess(*signed(body("n-fast")))  # not stuck behind slow
        release.set()
        return [fast, await slow], threading.get_ident()

    outcomes, loop_thread = asyncio.run(main())
    assert [o.reason for o in outcomes] == ["processed", "processed"]
    assert all(ident != loop_thread for ident, _ in seen)
    assert [value for _, value in seen] == ["from-the-task", "from-the-task"]

    receiver.on("note.created", lambda event: 1 / 0)
    failed = asyncio.run(receiver.aprocess(*signed(body("n-fail"))))
    assert (failed.status, failed.reason) == (500, "handler_failed")


def test_a_plain_unit_of_work_under_aprocess_and_failures_inside_it(
    secret: str, signed: Signed
) -> None:
    """Under aprocess a plain context manager is entered from the loop; a completion that
    fails inside the unit rolls it back (503) and releases; a lost claim is in_flight."""

    class Failing(MemoryStore):
        mode = "ok"

        async def acomplete(self, key: str, token: str, retention: float) -> bool:
            if self.mode == "down":
                raise ConnectionError("store gone")
            if self.mode == "lost":
                return False
            return await super().acomplete(key, token, retention)

    store = Failing()
    unit = Unit(store)
    receiver = WebhookReceiver(secrets=secret, store=store, unit_of_work=unit)
    receiver.on("note.created", lambda event: None)

    def body(note_id: str) -> bytes:
        data = {"id": note_id, "author": "a", "text": "t"}
        return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()

    assert asyncio.run(receiver.aprocess(*signed(body("n-a")))).reason == "processed"
    assert unit.seen[-1] == ("commit", "done")
    store.mode = "down"
    down = asyncio.run(receiver.aprocess(*signed(body("n-b"))))
    assert (down.status, down.reason) == (503, "store_unavailable")
    assert unit.seen[-1] == ("rollback", "_CompletionFailed")
    assert store.claim(default_idempotency_key(ORG, body("n-b")), "x", 5) is ClaimState.NEW
    store.mode = "lost"
    lost = asyncio.run(receiver.aprocess(*signed(body("n-c"))))
    assert (lost.status, lost.reason) == (503, "in_flight")


def test_a_unit_of_work_that_returns_no_context_manager_fails_the_delivery(
    secret: str, signed: Signed, drive: Any
) -> None:
    receiver = WebhookReceiver(secrets=secret, store=MemoryStore(), unit_of_work=lambda e: 42)
    receiver.on("note.created", lambda event: None)
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason) == (500, "handler_failed")


def test_a_secrets_callable_may_refuse_with_the_librarys_own_error(
    signed: Signed, drive: Any
) -> None:
    from service_webhooks import UnknownOrganizationError

    def lookup(organization_id: str) -> str:
        raise UnknownOrganizationError("this account was closed")

    receiver = WebhookReceiver(secrets=lookup, store=MemoryStore())
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason) == (401, "unknown_organization")


def test_a_pool_thread_survives_a_loop_that_closed_while_its_handler_ran() -> None:
    """The loop is gone when the handler returns: the thread goes back to the pool."""
    from service_webhooks._threads import run_in_thread

    started, release = threading.Event(), threading.Event()

    def slow(argument: int) -> int:
        started.set()
        release.wait(5)
        return argument

    async def abandon() -> None:
        task = asyncio.ensure_future(run_in_thread(slow, 1))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        task.cancel()

    asyncio.run(abandon())  # the loop closes with the handler still running
    release.set()

    async def again() -> int:
        return await run_in_thread(lambda argument: argument * 2, 21)

    assert asyncio.run(again()) == 42


def test_results_that_finish_together_share_one_wake_up_of_the_loop() -> None:
    """Ten handlers finish while the loop is busy: every result arrives, with fewer
    wake-ups of the loop than results."""
    from service_webhooks._threads import run_in_thread

    go = threading.Event()
    finished = threading.Semaphore(0)

    def handler(argument: int) -> int:
        go.wait(5)
        finished.release()
        return argument * 2

    async def main() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        wake_ups = 0
        real = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wake_ups
            wake_ups += 1
            return real(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        tasks = [asyncio.ensure_future(run_in_thread(handler, n)) for n in range(10)]
        await asyncio.sleep(0.05)  # every call is on its thread, waiting for go
        go.set()
        for _ in range(10):  # the loop stays busy until all ten have returned
            assert finished.acquire(timeout=5)
        time.sleep(0.05)  # and their results are handed over
        results = await asyncio.gather(*tasks)
        return results, wake_ups

    results, wake_ups = asyncio.run(main())
    assert results == [n * 2 for n in range(10)]
    assert 1 <= wake_ups < 10


def test_results_of_a_loop_that_closed_before_draining_them_are_let_go() -> None:
    from service_webhooks._threads import _Pool, _succeed

    pool = _Pool(2)
    closed = asyncio.new_event_loop()
    pool._settle(closed, _succeed, closed.create_future(), 1)  # its drain never runs
    closed.close()
    assert closed in pool._pending

    async def another_loop() -> int:
        return int(await pool.run(lambda number: number + 1, 1))

    assert asyncio.run(another_loop()) == 2
    assert closed not in pool._pending


def test_a_forked_child_never_claims_with_its_parents_token(
    tmp_path: Any, signed: Signed, secret: str
) -> None:
    """Workers forked from one parent (gunicorn ``--preload``, a prefork pool) share the
    store: the same event delivered to two of them at once runs once. Each process
    makes its own claim tokens, so one worker's claim is never taken for the other's
    renewal of it."""
    from sw_forking import beside_a_child

    from service_webhooks import SQLiteStore

    runs = tmp_path / "runs"
    receiver = WebhookReceiver(secret, store=SQLiteStore(str(tmp_path / "keys.db")))

    @receiver.on("note.created")
    def note_created(event: Event[Any]) -> None:
        with open(runs, "a") as out:
            out.write(f"{os.getpid()}\n")
        time.sleep(1.0)  # both processes are in flight together

    before = b'{"eventName":"note.created","version":1,"data":{"id":"n-0","author":"a","text":"t"}}'
    assert receiver.process(*signed(before)).ok  # the parent has used tokens before it forks
    body, header = signed(
        b'{"eventName":"note.created","version":1,"data":'
        b'{"id":"n-1","author":"a@example.com","text":"t"}}'
    )

    def work() -> tuple[list[str], set[int]]:
        return [receiver.process(body, header).reason], set()

    parent, child = beside_a_child(work)
    assert sorted([parent[0][0], child[0][0]]) == ["in_flight", "processed"]
    assert len(runs.read_text().split()) == 2  # n-0 once, n-1 once
    receiver.close()


def test_a_forked_child_renews_its_claims(tmp_path: Any, signed: Signed, secret: str) -> None:
    """A receiver that renewed claims before the process forked: the child, which has
    no renewer thread, starts its own, so a handler that outlasts the lease keeps its
    claim there too, and a twin arriving after one lease is answered ``in_flight``
    instead of running the handler again."""
    from sw_forking import beside_a_child

    from service_webhooks import SQLiteStore

    receiver = WebhookReceiver(secret, store=SQLiteStore(str(tmp_path / "keys.db")), lease=0.6)

    @receiver.on("note.created")
    def note_created(event: Event[Any]) -> None:
        time.sleep(float(event.data.text))

    def note(text: str) -> bytes:
        data = {"id": f"n-{os.getpid()}-{time.time()}", "author": "a@example.com", "text": text}
        return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()

    assert receiver.process(*signed(note("0.5"))).ok  # the parent's renewer thread runs

    def work() -> tuple[list[str], set[int]]:
        delivery = signed(note("1.6"))  # outlasts the lease
        first: list[str] = []
        running = threading.Thread(target=lambda: first.append(receiver.process(*delivery).reason))
        running.start()
        time.sleep(1.1)  # past one lease: only a renewal holds the claim
        twin = receiver.process(*delivery).reason
        running.join()
        return [*first, twin], set()

    parent, child = beside_a_child(work)
    assert parent == child == (["processed", "in_flight"], set())
    receiver.close()
