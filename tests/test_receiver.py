"""The receive pipeline, every scenario through both drivers (process and aprocess)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from service_webhooks import (
    MAX_BODY_SIZE,
    ClaimState,
    ConfigurationError,
    DeliveryRecord,
    Event,
    MemoryStore,
    NoteCreated,
    Outcome,
    RetryLater,
    Secret,
    SegmentTrendAlert,
    Unprocessable,
    WebhookReceiver,
    default_idempotency_key,
)

Signed = Callable[..., tuple[bytes, str]]
Drive = Callable[..., Outcome]
ORG = "o-TEST-na1"  # what the signed fixture signs as


def wait_for(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_processed_delivery_reaches_the_handler_typed(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    seen: list[Event[Any]] = []
    receiver.on("note.created", seen.append)
    body, header = signed(org="o-42", timestamp=None)
    outcome = drive(receiver, body, header)
    assert (outcome.status, outcome.reason, outcome.ok) == (200, "processed", True)
    assert (outcome.event_name, outcome.organization_id) == ("note.created", "o-42")
    [event] = seen
    assert event.data == NoteCreated(id="n-1", author="ana@example.com", text="hello")
    assert (event.name, event.version, event.organization_id) == ("note.created", 1, "o-42")
    assert event.body is body
    assert event.idempotency_key == default_idempotency_key("o-42", body)


def test_duplicate_answers_200_without_running_the_handler(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    calls: list[int] = []
    receiver.on("note.created", lambda event: calls.append(1))
    body, header = signed()
    assert drive(receiver, body, header).reason == "processed"
    _, retry_header = signed(body, timestamp=None)  # a retry: same body, new t
    assert (drive(receiver, body, retry_header).status, calls) == (200, [1])
    assert drive(receiver, body, retry_header).reason == "duplicate"


def test_same_body_from_another_organization_is_not_a_duplicate(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    calls: list[str] = []
    receiver.on("note.created", lambda event: calls.append(event.organization_id))
    body, header = signed(org="o-a")
    drive(receiver, body, header)
    drive(receiver, *signed(body, org="o-b"))
    assert calls == ["o-a", "o-b"]


def test_unhandled_event_answers_200_by_default(
    receiver: WebhookReceiver, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    outcome = drive(receiver, *signed(make_body("session.exported", data={"id": "s"})))
    assert (outcome.status, outcome.reason) == (200, "unhandled")
    assert len(receiver.store) == 0  # type: ignore[arg-type]  # no claim for nothing to do


@pytest.mark.parametrize("status", [500, 404, 422])
def test_unhandled_status_is_configurable(
    secret: str, signed: Signed, drive: Drive, status: int
) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", unhandled_status=status)
    assert drive(receiver, *signed()).status == status


def test_a_catch_all_handler_takes_the_events_unhandled_status_would_answer(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    """docs/versions.md: with an ``on_any`` handler, a version no specific handler
    takes is processed by it alone; ``unhandled_status`` no longer applies."""
    receiver = WebhookReceiver(secrets=secret, store="memory", unhandled_status=500)
    receiver.on("note.created", lambda event: None, version=1)
    later = make_body("note.created", data={"noteId": "n-1"}, version=2)
    assert drive(receiver, *signed(later)).reason == "unhandled"
    audited: list[int] = []
    receiver.on_any(lambda event: audited.append(event.version))
    assert (drive(receiver, *signed(later)).status, audited) == (200, [2])


def test_every_answer_carries_its_json_reason_by_default(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    receiver.on("note.created", lambda event: None)
    body, header = signed()
    for expected in ("processed", "duplicate"):
        outcome = drive(receiver, body, header)
        assert outcome.body == b'{"status":200,"reason":"%s"}' % expected.encode()
    assert drive(receiver, body, "o:x,t:1,v:AAAA").body == b'{"status":401,"reason":"signature"}'


def test_success_body_false_empties_the_200_answers_and_nothing_else(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", success_body=False)
    runs: list[str] = []

    @receiver.on("note.created")
    def note(event: Event[NoteCreated]) -> None:
        runs.append(event.data.id)
        if event.data.id == "fails":
            raise RuntimeError("database is down")
        if event.data.id == "refused":
            raise Unprocessable("no such session")

    def note_body(note_id: str) -> bytes:
        return make_body(data={"id": note_id, "author": "ana@example.com", "text": "hi"})

    body, header = signed(note_body("n-1"))
    answers = [
        drive(receiver, body, header),
        drive(receiver, body, header),
        drive(receiver, *signed(make_body("session.exported", data={"id": "s"}))),
    ]
    assert [(a.status, a.reason, a.body, a.empty_body, a.ok) for a in answers] == [
        (200, "processed", b"", True, True),
        (200, "duplicate", b"", True, True),
        (200, "unhandled", b"", True, True),
    ]
    assert answers[0].event_name == "note.created"  # still named for logs and observers
    refusals = [
        drive(receiver, body, "o:x,t:1,v:AAAA"),
        drive(receiver, *signed(b"[]")),
        drive(receiver, *signed(note_body("fails"))),
        drive(receiver, *signed(note_body("refused"))),
    ]
    assert [(a.status, a.reason) for a in refusals] == [
        (401, "signature"),
        (400, "malformed_envelope"),
        (500, "handler_failed"),
        (422, "unprocessable"),
    ]
    for answer in refusals:
        assert not answer.empty_body
        assert json.loads(answer.body) == {"status": answer.status, "reason": answer.reason}
    assert runs == ["n-1", "fails", "refused"]


def test_success_body_false_keeps_the_body_of_an_unhandled_refusal(
    secret: str, signed: Signed, drive: Drive
) -> None:
    receiver = WebhookReceiver(
        secrets=secret, store="memory", success_body=False, unhandled_status=422
    )
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.body) == (422, b'{"status":422,"reason":"unhandled"}')


def test_success_body_false_holds_with_an_inbox_too(
    secret: str, signed: Signed, drive: Drive
) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", inbox="memory", success_body=False)
    receiver.on("note.created", lambda event: None)
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason, outcome.body) == (200, "processed", b"")
    assert receiver.inbox is not None


@pytest.mark.parametrize(
    ("failure", "answer"),
    [
        (RuntimeError("down"), (500, "handler_failed")),
        (Unprocessable("never"), (422, "unprocessable")),
    ],
)
def test_a_later_handler_failing_reruns_the_earlier_ones_on_the_retry(
    receiver: WebhookReceiver,
    signed: Signed,
    drive: Drive,
    failure: Exception,
    answer: tuple[int, str],
) -> None:
    """docs/idempotency.md, "Several handlers for one event": the claim covers the
    delivery, so a retry runs every handler again, the ones that had finished too."""
    calls: list[str] = []
    receiver.on("note.created", lambda event: calls.append("first"))

    @receiver.on("note.created")
    def second(event: Event[Any]) -> None:
        calls.append("second")
        if calls.count("second") == 1:
            raise failure

    receiver.on_any(lambda event: calls.append("any"))
    body, header = signed()
    outcome = drive(receiver, body, header)
    assert (outcome.status, outcome.reason) == answer
    assert calls == ["first", "second"]  # the ones after the failure did not run
    # a retry (after a 5xx), or a replay once fixed (after a 4xx: the service gives up)
    assert drive(receiver, *signed(body, timestamp=None)).reason == "processed"
    assert calls == ["first", "second", "first", "second", "any"]


def test_handler_failure_answers_500_releases_and_the_retry_runs(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    attempts: list[int] = []
    hooked: list[tuple[str, str]] = []

    @receiver.on("note.created")
    def flaky(event: Event[NoteCreated]) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("database is down")

    @receiver.on_error
    def hook(event: Event[Any], error: BaseException) -> None:
        hooked.append((event.name, str(error)))

    body, header = signed()
    with caplog.at_level(logging.ERROR, "service_webhooks"):
        outcome = drive(receiver, body, header)
    assert (outcome.status, outcome.reason) == (500, "handler_failed")
    assert hooked == [("note.created", "database is down")]
    assert "handler for note.created failed" in caplog.text
    assert drive(receiver, body, header).reason == "processed"
    assert len(attempts) == 2


def test_a_raising_error_hook_does_not_change_the_answer(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    receiver.on("note.created", lambda event: 1 / 0)
    receiver.on_error(lambda event, error: [][0])
    assert drive(receiver, *signed()).status == 500


@pytest.mark.parametrize("status", [422, 410, 400])
def test_unprocessable_is_a_permanent_4xx_and_leaves_the_key_free(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, status: int
) -> None:
    def refuse(event: Event[Any]) -> None:
        raise Unprocessable("note belongs to a deleted session", status=status)

    receiver.on("note.created", refuse)
    body, header = signed()
    outcome = drive(receiver, body, header)
    assert (outcome.status, outcome.reason) == (status, "unprocessable")
    assert (
        receiver.store.claim(default_idempotency_key("o-TEST-na1", body), "x", 5) is ClaimState.NEW
    )


@pytest.mark.parametrize("status", [200, 302, 429, 500, 399])
def test_unprocessable_refuses_statuses_the_service_would_retry_or_accept(status: int) -> None:
    with pytest.raises(ConfigurationError):
        Unprocessable(status=status)


def test_in_flight_duplicate_answers_503_with_retry_after(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    calls: list[int] = []
    receiver.on("note.created", lambda event: calls.append(1))
    body, header = signed()
    receiver.store.claim(default_idempotency_key("o-TEST-na1", body), "other-worker", 60)
    outcome = drive(receiver, body, header)
    assert (outcome.status, outcome.reason) == (503, "in_flight")
    assert dict(outcome.headers)["Retry-After"] == "60"
    assert calls == []


class BrokenStore(MemoryStore):
    """Fails the chosen operation, like a store whose server went away."""

    def __init__(self, fail: str) -> None:
        super().__init__()
        self.fail = fail

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        if self.fail == "claim":
            raise ConnectionError("store down")
        return super().claim(key, token, lease)

    def complete(self, key: str, token: str, retention: float) -> bool:
        if self.fail == "complete":
            raise ConnectionError("store down")
        return super().complete(key, token, retention)

    def release(self, key: str, token: str) -> bool:
        if self.fail == "release":
            raise ConnectionError("store down")
        return super().release(key, token)


@pytest.mark.parametrize(("fail", "ran"), [("claim", False), ("complete", True)])
def test_store_failure_answers_503_never_200(
    secret: str, signed: Signed, drive: Drive, fail: str, ran: bool
) -> None:
    records: list[DeliveryRecord] = []
    receiver = WebhookReceiver(secrets=secret, store=BrokenStore(fail), observers=[records.append])
    calls: list[int] = []
    receiver.on("note.created", lambda event: calls.append(1))
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert "Retry-After" in dict(outcome.headers)
    assert calls == ([1] if ran else [])
    # the record (log line, inbox) shows whether the handlers ran before the store
    # failed: a failed completion comes with their time, the retry runs them again
    assert (records[0].handler_duration is not None) is ran


def test_a_failed_completion_releases_the_claim_so_the_retry_runs_at_once(
    secret: str, signed: Signed, drive: Drive
) -> None:
    store = BrokenStore("complete")
    receiver = WebhookReceiver(secrets=secret, store=store)
    calls: list[int] = []
    receiver.on("note.created", lambda event: calls.append(1))
    body, header = signed()
    assert drive(receiver, body, header).reason == "store_unavailable"
    key = default_idempotency_key(ORG, body)
    assert wait_for(lambda: store.state(key) is None)  # released, after the answer
    store.fail = ""  # the store is back before the service's retry (a minute later)
    retry = drive(receiver, body, header)
    # before: 503 in_flight until the lease (120 s) ran out; at-least-once: runs again
    assert (retry.status, retry.reason, calls) == (200, "processed", [1, 1])


class HangingRelease(MemoryStore):
    """Completing fails, as on a store server that stopped answering; the release that
    follows hangs until ``gate`` opens (a second timeout, on such a server)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.released = threading.Event()

    def complete(self, key: str, token: str, retention: float) -> bool:
        raise TimeoutError("no answer from the store")

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        raise TimeoutError("no answer from the store")

    def release(self, key: str, token: str) -> bool:
        self.gate.wait(5)
        released = super().release(key, token)
        self.released.set()
        return released

    async def arelease(self, key: str, token: str) -> bool:
        await asyncio.to_thread(self.gate.wait, 5)
        released = super().release(key, token)
        self.released.set()
        return released


def test_the_answer_does_not_wait_for_the_release_after_a_failed_completion(
    secret: str, signed: Signed
) -> None:
    """Spec §8: the service waits 10 s. A store that stopped answering held the
    completion for its timeout (5 s), then the release for as long again."""
    store = HangingRelease()
    receiver = WebhookReceiver(secrets=secret, store=store)
    receiver.on("note.created", lambda event: None)
    outcome = receiver.process(*signed())
    answered_first = not store.released.is_set()
    store.gate.set()
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert answered_first  # was: the answer waited for the release
    assert store.released.wait(5)  # released all the same: the retry runs at once
    assert len(store) == 0


async def test_async_the_answer_does_not_wait_for_the_release_after_a_failed_completion(
    secret: str, signed: Signed
) -> None:
    store = HangingRelease()
    receiver = WebhookReceiver(secrets=secret, store=store)
    receiver.on("note.created", lambda event: None)
    outcome = await receiver.aprocess(*signed())
    answered_first = not store.released.is_set()
    store.gate.set()
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert answered_first
    assert await asyncio.to_thread(store.released.wait, 5)
    assert len(store) == 0


def test_a_release_never_undoes_a_completion_that_was_written(
    secret: str, signed: Signed, drive: Drive
) -> None:
    class LostAnswer(MemoryStore):  # the write landed; the answer to it was lost
        def complete(self, key: str, token: str, retention: float) -> bool:
            super().complete(key, token, retention)
            raise TimeoutError("no answer from the store")

    receiver = WebhookReceiver(secrets=secret, store=LostAnswer())
    calls: list[int] = []
    receiver.on("note.created", lambda event: calls.append(1))
    body, header = signed()
    assert drive(receiver, body, header).reason == "store_unavailable"
    assert drive(receiver, body, header).reason == "duplicate"
    assert calls == [1]


def test_release_failure_after_a_handler_failure_still_answers_500(
    secret: str, signed: Signed, drive: Drive
) -> None:
    receiver = WebhookReceiver(secrets=secret, store=BrokenStore("release"))
    receiver.on("note.created", lambda event: 1 / 0)
    assert drive(receiver, *signed()).status == 500


@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "OPTIONS", "DELETE"])
def test_other_methods_answer_405(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, method: str
) -> None:
    outcome = drive(receiver, *signed(), method=method)
    assert (outcome.status, outcome.reason) == (405, "method_not_allowed")
    assert dict(outcome.headers) == {"Allow": "POST"}
    assert receiver.precheck(method) == outcome


def test_oversized_body_answers_413_before_authentication(
    receiver: WebhookReceiver, drive: Drive
) -> None:
    outcome = drive(receiver, b"x" * (MAX_BODY_SIZE + 1), None)
    assert (outcome.status, outcome.reason) == (413, "payload_too_large")
    assert receiver.precheck("POST", MAX_BODY_SIZE + 1) == outcome
    assert receiver.precheck("POST", MAX_BODY_SIZE) is None
    assert receiver.precheck("post", None).status == 405  # methods are case-sensitive


def test_smaller_body_limit(secret: str, signed: Signed, drive: Drive) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", max_body_size=100)
    body, header = signed()
    assert drive(receiver, body + b" " * 100, header).status == 413


@pytest.mark.parametrize(
    ("header", "reason"),
    [(None, "format"), ("o:x,t:1", "format"), ("o:o-TEST-na1,t:1,v:AAAA", "signature")],
)
def test_unauthentic_deliveries_answer_401(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, header: str | None, reason: str
) -> None:
    calls: list[int] = []
    receiver.on_any(lambda event: calls.append(1))
    body, _ = signed()
    outcome = drive(receiver, body, header)
    assert (outcome.status, outcome.reason, calls) == (401, reason, [])


def test_stale_timestamp_answers_401(
    receiver: WebhookReceiver, signed: Signed, drive: Drive
) -> None:
    import time

    outcome = drive(receiver, *signed(timestamp=int(time.time()) - 301))
    assert (outcome.status, outcome.reason) == (401, "timestamp")


def test_injected_clock_decides_the_timestamp_check(
    secret: str, signed: Signed, drive: Drive
) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", clock=lambda: 1_000_000.0)
    assert drive(receiver, *signed(timestamp=1_000_300)).reason == "unhandled"
    assert drive(receiver, *signed(timestamp=1_000_301)).reason == "timestamp"


def test_handler_order_and_version_routing(
    receiver: WebhookReceiver, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    order: list[str] = []
    receiver.on_any(lambda event: order.append(f"any:{event.version}"))
    receiver.on("note.created", lambda event: order.append("all-versions"))
    receiver.on("note.created", lambda event: order.append("v2"), version=2)
    receiver.on("note.created", lambda event: order.append("v1"), version=1)
    drive(receiver, *signed())
    assert order == ["v1", "all-versions", "any:1"]
    order.clear()
    v2 = make_body("note.created", version=2, data={"renamed": True})
    seen: list[Any] = []
    receiver.on("note.created", lambda event: seen.append(event.data), version=2)
    drive(receiver, *signed(v2))
    assert order == ["v2", "all-versions", "any:2"]
    assert seen == [{"renamed": True}]  # no model for v2: plain JSON


def test_removed_handlers_no_longer_run(
    receiver: WebhookReceiver, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    calls: list[str] = []

    def handler(event: Event[Any]) -> None:
        calls.append("ran")

    receiver.on("note.created", handler)
    receiver.on_any(handler)
    assert receiver.remove(handler) == 2
    assert drive(receiver, *signed()).reason == "unhandled"
    assert calls == []


def test_async_and_sync_handlers_work_from_both_drivers(
    receiver: WebhookReceiver, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    seen: list[str] = []

    @receiver.on("segment.trend.alert")
    async def alert(event: Event[SegmentTrendAlert]) -> None:
        await asyncio.sleep(0)
        seen.append(f"async:{event.data.duration}")

    @receiver.on("segment.trend.alert")
    def also(event: Event[SegmentTrendAlert]) -> None:
        seen.append(f"sync:{event.data.known_duration}")

    body = make_body("segment.trend.alert", data={"duration": "WEEKLY", "new": 1})
    assert drive(receiver, *signed(body)).reason == "processed"
    assert seen == ["async:WEEKLY", "sync:WEEKLY"]


@pytest.mark.parametrize("in_thread", [True, False])
async def test_sync_handlers_under_aprocess_run_in_a_thread_when_asked(
    secret: str, signed: Signed, in_thread: bool
) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", sync_handlers_in_thread=in_thread)
    threads: list[int] = []
    receiver.on("note.created", lambda event: threads.append(threading.get_ident()))
    assert (await receiver.aprocess(*signed())).status == 200
    assert (threads[0] != threading.get_ident()) is in_thread


async def test_to_thread_runs_plain_handlers_and_the_secrets_callable_under_aprocess(
    secret: str, signed: Signed
) -> None:
    """A framework's own ``to_thread`` (Django: the request's thread) gets every blocking
    call ``aprocess`` makes off the event loop."""
    calls: list[str] = []

    async def to_thread(function: Callable[[Any], Any], argument: Any) -> Any:
        calls.append(getattr(function, "__name__", ""))
        return await asyncio.to_thread(function, argument)

    def note_created(event: Event[Any]) -> None:
        pass

    receiver = WebhookReceiver(secrets=lambda org: secret, store="memory", to_thread=to_thread)
    receiver.on("note.created", note_created)
    assert (await receiver.aprocess(*signed())).reason == "processed"
    assert len(calls) == 2  # the secrets lookup, then the handler
    assert calls[-1] == "note_created"
    with pytest.raises(ConfigurationError, match=r"to_thread must be a callable"):
        WebhookReceiver(secrets=secret, store="memory", to_thread=5)  # type: ignore[arg-type]


async def test_async_handler_from_sync_process_inside_a_loop_fails_retryably(
    receiver: WebhookReceiver, signed: Signed
) -> None:
    async def handler(event: Event[Any]) -> None:
        pass

    receiver.on("note.created", handler)
    body, header = signed()
    assert receiver.process(body, header).status == 500
    assert (await receiver.aprocess(body, header)).status == 200  # released: retry works


@pytest.mark.parametrize("error", [KeyboardInterrupt, asyncio.CancelledError])
def test_interrupted_handler_releases_its_claim_and_propagates(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, error: type[BaseException]
) -> None:
    def interrupted(event: Event[Any]) -> None:
        raise error

    receiver.on("note.created", interrupted)
    body, header = signed()
    with pytest.raises(error):
        drive(receiver, body, header)
    assert (
        receiver.store.claim(default_idempotency_key("o-TEST-na1", body), "x", 5) is ClaimState.NEW
    )


def test_custom_idempotency_key_is_namespaced_by_organization(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    receiver = WebhookReceiver(
        secrets=secret, store="memory", idempotency_key=lambda event: event.data.id
    )
    keys: list[str] = []
    receiver.on("note.created", lambda event: keys.append(event.idempotency_key))
    first = make_body(data={"id": "n-7", "author": "a", "text": "one"})
    edited = make_body(data={"id": "n-7", "author": "a", "text": "two"})
    assert drive(receiver, *signed(first)).reason == "processed"
    assert drive(receiver, *signed(edited)).reason == "duplicate"
    assert drive(receiver, *signed(edited, org="o-other")).reason == "processed"
    assert keys == ["o-TEST-na1,n-7", "o-other,n-7"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # an organization ID may hold ":" (never ","): "o-A" + "x:y" is not "o-A:x" + "y"
        (("o-A", "x:y"), ("o-A:x", "y")),
        # long keys agreeing on their first 300 characters are hashed whole, never cut
        (("o-A", "k" * 300 + "1"), ("o-A", "k" * 300 + "2")),
        (("o-A", "k" * 198), ("o-A", "k" * 198 + "2")),
    ],
)
def test_custom_idempotency_keys_never_collide(
    secret: str,
    signed: Signed,
    make_body: Callable[..., bytes],
    drive: Drive,
    first: tuple[str, str],
    second: tuple[str, str],
) -> None:
    receiver = WebhookReceiver(
        secrets={"o-A": secret, "o-A:x": secret},
        store="memory",
        idempotency_key=lambda event: event.data.id,
    )
    keys: list[str] = []
    receiver.on("note.created", lambda event: keys.append(event.idempotency_key))
    for org, custom in (first, second):
        body = make_body(data={"id": custom, "author": "a", "text": "t"})
        assert drive(receiver, *signed(body, org=org)).reason == "processed"
    assert len(set(keys)) == 2
    assert all(len(key) <= 200 for key in keys)


@pytest.mark.parametrize("custom", ["a\x00b", "a\udc80b"])
def test_a_custom_key_no_store_can_keep_as_it_is_is_hashed(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive, custom: str
) -> None:
    """A NUL (PostgreSQL text refuses it) or a lone surrogate (no UTF-8 form): hashed
    like a long key, so every store takes it, and still one key per value."""
    receiver = WebhookReceiver(
        secrets=secret, store="memory", idempotency_key=lambda event: custom + event.data.text
    )
    keys: list[str] = []
    receiver.on("note.created", lambda event: keys.append(event.idempotency_key))
    for text in ("1", "2", "1"):
        body = make_body(data={"id": "n-1", "author": "a", "text": text})
        drive(receiver, *signed(body))
    assert len(keys) == 2
    assert keys[0] != keys[1]
    assert all(key.startswith("sha256:") and key.isascii() for key in keys)


def test_failing_idempotency_key_function_is_a_retried_500(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    receiver = WebhookReceiver(
        secrets=secret, store="memory", idempotency_key=lambda event: event.data["missing"]
    )
    receiver.on_any(lambda event: None)
    outcome = drive(receiver, *signed(make_body("x.y", data={}), org="o-KEY-1"))
    assert (outcome.status, outcome.reason) == (500, "configuration")  # retried
    assert (outcome.event_name, outcome.organization_id) == ("x.y", "o-KEY-1")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tolerance": -1},
        {"max_body_size": 0},
        {"max_body_size": MAX_BODY_SIZE + 1},
        {"lease": 0},
        {"retention": 3600},
        {"unhandled_status": 302},
        {"unhandled_status": 429},
        {"unhandled_status": 204},
        {"store": object()},
        {"store": "sqlite:"},
    ],
)
def test_bad_configuration_is_refused(secret: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        WebhookReceiver(secrets=secret, **kwargs)


def test_default_store_is_sqlite_in_the_working_directory(
    secret: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service_webhooks import SQLiteStore

    monkeypatch.chdir(tmp_path)
    receiver = WebhookReceiver(secrets=secret)
    assert isinstance(receiver.store, SQLiteStore)
    assert str(receiver.store.path) == "service_webhooks.sqlite3"
    assert secret not in repr(receiver)


def test_secrets_never_reach_the_logs(
    secret: str, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory")
    receiver.on("note.created", lambda event: 1 / 0)
    with caplog.at_level(logging.DEBUG):
        for header in (signed()[1], None, "o:a,t:1,v:AAAA"):
            drive(receiver, signed()[0], header)
        drive(receiver, *signed(secret="wrong-" * 6))
    assert caplog.records
    assert secret not in caplog.text


def test_the_log_line_names_an_unknown_organization_and_a_retired_secret(
    secret: str, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    """What an operator needs from a 401 during a rotation or an umbrella set-up: which
    ``o`` has no secret, and whether the signature was made with the old secret after
    its stop date (the service's retries) rather than with a wrong one."""
    old = "old-secret-" * 4
    receiver = WebhookReceiver(
        secrets={ORG: [Secret(secret), Secret(old, not_after=time.time() - 1)]},
        store="memory",
        inbox=False,
    )
    with caplog.at_level(logging.INFO, "service_webhooks"):
        unknown = drive(receiver, *signed(org="o-NEW-eu1"))
        retired = drive(receiver, *signed(secret=old))
    assert (unknown.status, unknown.reason) == (401, "unknown_organization")
    assert (retired.status, retired.reason) == (401, "signature")
    assert "no secret is configured for organization 'o-NEW-eu1'" in caplog.text
    assert "made with a secret past its stop date (" in caplog.text
    assert secret not in caplog.text
    assert old not in caplog.text


def test_receivers_can_share_one_router(secret: str, signed: Signed, drive: Drive) -> None:
    first = WebhookReceiver(secrets=secret, store="memory")
    second = WebhookReceiver(secrets="another-secret-" * 3, store="memory", router=first.router)
    seen: list[str] = []
    first.on("note.created", lambda event: seen.append(event.organization_id))
    assert drive(second, *signed(secret="another-secret-" * 3, org="o-2")).reason == "processed"
    assert drive(first, *signed(org="o-1")).reason == "processed"
    assert seen == ["o-2", "o-1"]


def test_precheck_honours_a_smaller_framework_limit(receiver: WebhookReceiver) -> None:
    refused = receiver.precheck("POST", 101, max_body_size=100)
    assert refused is not None
    assert (refused.status, refused.reason) == (413, "payload_too_large")
    assert receiver.precheck("POST", 100, max_body_size=100) is None
    assert receiver.precheck("POST", MAX_BODY_SIZE, max_body_size=10 * MAX_BODY_SIZE) is None
    assert receiver.precheck("POST", MAX_BODY_SIZE + 1, max_body_size=10 * MAX_BODY_SIZE)


def test_retry_later_from_the_idempotency_key_function_is_a_503_with_retry_after(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    """A key function whose lookup is down says so as a handler would: it had been
    answered 500 ``configuration`` and logged at ERROR, as a bug in the function."""

    def key(event: Any) -> str:
        raise RetryLater("the key's lookup is down")

    ran: list[Any] = []
    receiver = WebhookReceiver(secrets=secret, store="memory", idempotency_key=key)
    receiver.on_any(ran.append)
    outcome = drive(receiver, *signed(make_body("x.y", data={}), org="o-KEY-2"))
    assert (outcome.status, outcome.reason) == (503, "retry_later")
    assert "retry-after" in {name.lower() for name, _ in outcome.headers}
    assert (outcome.event_name, outcome.organization_id) == ("x.y", "o-KEY-2")
    assert ran == []


def test_unprocessable_from_the_idempotency_key_function_is_a_422(
    secret: str, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    def key(event: Any) -> str:
        raise Unprocessable("no id in this event")

    receiver = WebhookReceiver(secrets=secret, store="memory", idempotency_key=key)
    receiver.on_any(lambda event: None)
    outcome = drive(receiver, *signed(make_body("x.y", data={}), org="o-KEY-3"))
    assert (outcome.status, outcome.reason) == (422, "unprocessable")
