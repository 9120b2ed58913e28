"""The receiver records every authenticated delivery in its inbox, and replays them."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import (
    SIGNATURE_HEADER,
    ConfigurationError,
    Event,
    MemoryStore,
    RetryLater,
    SQLiteStore,
    Unprocessable,
    WebhookReceiver,
    sign,
)
from service_webhooks.inbox import Inbox, InboxQuery, MemoryInbox, ReceivedDelivery, SQLiteInbox
from service_webhooks.stores import ClaimState

SECRET = "whsec-inbox-test"
ORG = "o-INBOX"


def body_for(text: str = "hi", event: str = "note.created", version: int = 1) -> bytes:
    data = {"id": f"n-{text}", "author": "a@b.c", "text": text}
    return json.dumps({"eventName": event, "version": version, "data": data}).encode()


def deliver(receiver: WebhookReceiver, body: bytes, **headers: str) -> Any:
    pairs = [
        (SIGNATURE_HEADER, sign(body, SECRET, ORG)),
        ("Content-Length", str(len(body))),
        *((name.replace("_", "-"), value) for name, value in headers.items()),
    ]
    chunks = [body, b""]
    return receiver.handle("POST", iter(pairs), lambda size: chunks.pop(0))


def only(inbox: Inbox) -> ReceivedDelivery:
    items = inbox.search().items
    assert len(items) == 1, items
    return items[0]


@pytest.fixture
def inbox() -> MemoryInbox:
    return MemoryInbox()


@pytest.fixture
def receiver(inbox: MemoryInbox) -> WebhookReceiver:
    return WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)


def test_a_processed_delivery_is_recorded_with_its_exact_body_and_headers(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    receiver.on("note.created")(lambda event: None)
    body = body_for("é \u2028 exact") + b"  \n"
    outcome = deliver(
        receiver, body, content_type="application/json; charset=utf-8", user_agent="Svc/1"
    )
    assert (outcome.status, outcome.reason) == (200, "processed")
    record = only(inbox)
    assert record.body == body
    assert (record.status, record.reason, record.seen) == (200, "processed", 1)
    assert record.organization_id == ORG
    assert (record.event_name, record.version) == ("note.created", 1)
    assert record.content_type == "application/json; charset=utf-8"
    assert record.user_agent == "Svc/1"
    assert record.handler_time is not None
    assert record.idempotency_key is not None
    assert len(record.idempotency_key) == 64
    assert record.received_at.tzinfo is not None
    assert SIGNATURE_HEADER not in repr(record)
    assert "v:" not in repr(record)  # no signature value anywhere


def test_duplicates_count_the_deliveries_seen_for_the_key(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    receiver.process(body, sign(body, SECRET, ORG))
    receiver.process(body, sign(body, SECRET, ORG))
    newest, oldest = inbox.search().items
    assert (oldest.reason, oldest.seen) == ("processed", 1)
    assert (newest.reason, newest.seen) == ("duplicate", 2)
    assert newest.idempotency_key == oldest.idempotency_key
    assert newest.handler_time is None


def test_a_handler_failure_keeps_type_message_and_traceback(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    @receiver.on("note.created")
    def broken(event: Event[Any]) -> None:
        raise ValueError("the handler broke")

    body = body_for()
    outcome = receiver.process(body, sign(body, SECRET, ORG))
    assert outcome.status == 500
    record = only(inbox)
    assert (record.status, record.reason) == (500, "handler_failed")
    assert record.error_type == "ValueError"
    assert record.error_message == "the handler broke"
    assert record.traceback is not None
    assert "in broken" in record.traceback
    assert record.traceback.rstrip().endswith("ValueError: the handler broke")
    assert record.handler_time is not None


@pytest.mark.parametrize(
    ("error", "status", "reason"),
    [(Unprocessable("bad data"), 422, "unprocessable"), (RetryLater("later"), 503, "retry_later")],
)
def test_refusals_by_a_handler_are_recorded(
    receiver: WebhookReceiver, inbox: MemoryInbox, error: Exception, status: int, reason: str
) -> None:
    @receiver.on("note.created")
    def refuse(event: Event[Any]) -> None:
        raise error

    body = body_for()
    assert receiver.process(body, sign(body, SECRET, ORG)).status == status
    record = only(inbox)
    assert (record.status, record.reason, record.body) == (status, reason, body)
    assert record.error_type == type(error).__name__


def test_unhandled_is_recorded_with_the_key_a_replay_will_claim(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    body = body_for(event="note.deleted")
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "unhandled"
    record = only(inbox)
    assert (record.status, record.reason, record.event_name) == (200, "unhandled", "note.deleted")
    assert record.idempotency_key is not None
    assert record.handler_time is None


def test_in_flight_is_recorded(receiver: WebhookReceiver, inbox: MemoryInbox) -> None:
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    event_key = __import__("service_webhooks").default_idempotency_key(ORG, body)
    assert receiver.store.claim(event_key, "someone-else", 60) is ClaimState.NEW
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "in_flight"
    assert (only(inbox).status, only(inbox).reason) == (503, "in_flight")


class DownStore(MemoryStore):
    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        raise ConnectionError("store down")


def test_store_down_is_recorded(inbox: MemoryInbox) -> None:
    receiver = WebhookReceiver(SECRET, store=DownStore(), inbox=inbox)
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    assert receiver.process(body, sign(body, SECRET, ORG)).status == 503
    record = only(inbox)
    assert (record.reason, record.error_type, record.body) == (
        "store_unavailable",
        "ConnectionError",
        body,
    )


def test_a_malformed_envelope_with_a_good_signature_is_recorded(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    body = b'{"eventName": 3}'
    assert receiver.process(body, sign(body, SECRET, ORG)).status == 400
    record = only(inbox)
    assert (record.status, record.reason, record.organization_id) == (
        400,
        "malformed_envelope",
        ORG,
    )
    assert (record.event_name, record.idempotency_key, record.body) == (None, None, body)


def test_a_schema_drift_is_recorded_under_its_event(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    """``data`` that does not fit the event's model: 400, filed under the event's name
    and version, so ``--event note.created`` finds it for a replay once fixed."""
    receiver.on("note.created", lambda event: None)
    body = b'{"eventName":"note.created","version":1,"data":{"id":5}}'
    assert receiver.process(body, sign(body, SECRET, ORG)).status == 400
    record = only(inbox)
    assert (record.event_name, record.version, record.reason) == (
        "note.created",
        1,
        "malformed_envelope",
    )
    assert "$.data.id" in (record.detail or "")
    assert inbox.search(InboxQuery(event_name="note.created")).items == (record,)


def test_unauthenticated_deliveries_are_counted_never_stored(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    body = body_for()
    assert receiver.process(body, sign(body, "wrong-secret", ORG)).status == 401
    assert receiver.process(body, None).status == 401
    assert receiver.process(body, sign(body, SECRET, ORG, timestamp=1)).status == 401
    assert receiver.process(body, sign(body, SECRET, ORG), method="GET").status == 405
    assert inbox.search().items == ()
    assert inbox.rejected() == {
        "signature": 1,
        "format": 1,
        "timestamp": 1,
        "method_not_allowed": 1,
    }


class BrokenInbox(MemoryInbox):
    def record(self, delivery: ReceivedDelivery) -> int:
        raise OSError("disk full")


def test_a_delivery_that_cannot_be_recorded_is_answered_503(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=BrokenInbox())
    receiver.on("note.created")(lambda event: ran.append(event.name))
    body = body_for()
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        outcome = receiver.process(body, sign(body, SECRET, ORG))
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert dict(outcome.headers)["Retry-After"]
    assert ran == ["note.created"]
    assert caplog.messages == [
        "service_webhooks: could not record a delivery answered processed in the inbox "
        "(OSError); answered 503"
    ]


async def test_async_a_delivery_that_cannot_be_recorded_is_answered_503() -> None:
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=BrokenInbox())
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    outcome = await receiver.aprocess(body, sign(body, SECRET, ORG))
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")


async def test_ahandle_records_with_headers(receiver: WebhookReceiver, inbox: MemoryInbox) -> None:
    @receiver.on("note.created")
    async def handler(event: Event[Any]) -> None:
        raise KeyError("async boom")

    body = body_for()
    headers = [
        (SIGNATURE_HEADER.lower().encode(), sign(body, SECRET, ORG).encode()),
        (b"content-type", b"application/json"),
        (b"user-agent", b"Svc/2"),
    ]
    chunks = [body, b""]

    async def read(size: int) -> bytes:
        return chunks.pop(0)

    outcome = await receiver.ahandle("POST", headers, read)
    assert outcome is not None
    assert outcome.status == 500
    record = only(inbox)
    assert (record.reason, record.content_type, record.user_agent) == (
        "handler_failed",
        "application/json",
        "Svc/2",
    )
    assert record.error_type == "KeyError"
    assert record.body == body


def test_process_without_headers_records_none(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    receiver.process(body, sign(body, SECRET, ORG))
    assert (only(inbox).content_type, only(inbox).user_agent) == (None, None)


# -- which inbox a receiver opens -----------------------------------------------------


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_default_store_gets_a_sqlite_inbox_in_its_file(in_tmp: Path) -> None:
    receiver = WebhookReceiver(SECRET)
    assert isinstance(receiver.inbox, SQLiteInbox)
    assert receiver.inbox.path == Path("service_webhooks.sqlite3")
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "processed"
    assert only(SQLiteInbox(in_tmp / "service_webhooks.sqlite3")).body == body


def test_a_sqlite_store_gets_its_inbox_in_the_same_file(in_tmp: Path) -> None:
    for store in ("sqlite:other.sqlite3", SQLiteStore("other.sqlite3")):
        receiver = WebhookReceiver(SECRET, store=store)
        assert isinstance(receiver.inbox, SQLiteInbox)
        assert receiver.inbox.path == Path("other.sqlite3")


def test_inbox_options(in_tmp: Path) -> None:
    assert WebhookReceiver(SECRET, store="memory").inbox is None
    assert WebhookReceiver(SECRET, inbox=False).inbox is None
    assert isinstance(WebhookReceiver(SECRET, store="memory", inbox="memory").inbox, MemoryInbox)
    given = MemoryInbox()
    assert WebhookReceiver(SECRET, store="memory", inbox=given).inbox is given
    with pytest.raises(ConfigurationError):
        WebhookReceiver(SECRET, store="memory", inbox=True)
    with pytest.raises(ConfigurationError):
        WebhookReceiver(SECRET, inbox=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        WebhookReceiver(SECRET, inbox="redis://127.0.0.1:6379/0")


def test_without_an_inbox_nothing_is_recorded_and_replay_refuses(in_tmp: Path) -> None:
    receiver = WebhookReceiver(SECRET, inbox=False)
    receiver.on("note.created")(lambda event: None)
    body = body_for()
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "processed"
    with pytest.raises(ConfigurationError):
        receiver.replay("0" * 32)


# -- replay ---------------------------------------------------------------------------


def test_a_failed_delivery_replayed_once_fixed_runs_exactly_once_more(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    runs: list[str] = []
    fixed = threading.Event()

    @receiver.on("note.created")
    def handler(event: Event[Any]) -> None:
        runs.append(event.data.text)
        if not fixed.is_set():
            raise RuntimeError("not yet")

    body = body_for("payload")
    assert receiver.process(body, sign(body, SECRET, ORG)).status == 500
    record = only(inbox)
    fixed.set()
    outcome = receiver.replay(record.id)
    assert (outcome.status, outcome.reason) == (200, "processed")
    assert runs == ["payload", "payload"]
    again = receiver.replay(record.id)
    assert again.reason == "duplicate"
    assert runs == ["payload", "payload"]
    stored = inbox.get(record.id)
    assert stored is not None
    assert [(r.reason, r.forced) for r in stored.replays] == [
        ("processed", False),
        ("duplicate", False),
    ]
    assert stored.replays[0].handler_time is not None
    assert stored.reason == "handler_failed"  # the answer sent stays as it was
    assert stored.current_reason == "duplicate"
    assert len(inbox.search().items) == 1  # a replay is not a new delivery


def test_force_reruns_a_processed_delivery(receiver: WebhookReceiver, inbox: MemoryInbox) -> None:
    runs: list[int] = []
    receiver.on("note.created")(lambda event: runs.append(1))
    body = body_for()
    receiver.process(body, sign(body, SECRET, ORG))
    record = only(inbox)
    assert receiver.replay(record.id).reason == "duplicate"
    assert runs == [1]
    forced = receiver.replay(record.id, force=True)
    assert (forced.status, forced.reason) == (200, "processed")
    assert runs == [1, 1]
    stored = inbox.get(record.id)
    assert stored is not None
    assert [(r.reason, r.forced) for r in stored.replays] == [
        ("duplicate", False),
        ("processed", True),
    ]
    key = record.idempotency_key
    assert key is not None
    assert receiver.store.claim(key, "later", 60) is ClaimState.DONE


def test_a_forced_replay_that_fails_is_recorded_as_failed(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    calls: list[int] = []

    @receiver.on("note.created")
    def handler(event: Event[Any]) -> None:
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("second run fails")

    body = body_for()
    receiver.process(body, sign(body, SECRET, ORG))
    record = only(inbox)
    outcome = receiver.replay(record.id, force=True)
    assert (outcome.status, outcome.reason) == (500, "handler_failed")
    stored = inbox.get(record.id)
    assert stored is not None
    assert stored.replays[-1].error_type == "ValueError"
    assert stored.replays[-1].forced is True


def test_an_unhandled_delivery_is_processed_by_replay_once_its_handler_exists(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    body = body_for(event="note.updated")
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "unhandled"
    record = only(inbox)
    assert receiver.replay(record.id).reason == "unhandled"
    seen: list[Event[Any]] = []
    receiver.on("note.updated")(seen.append)
    outcome = receiver.replay(record.id)
    assert (outcome.status, outcome.reason) == (200, "processed")
    assert [(e.name, e.organization_id, e.body) for e in seen] == [("note.updated", ORG, body)]
    assert seen[0].idempotency_key == record.idempotency_key
    stored = inbox.get(record.id)
    assert stored is not None
    assert [r.reason for r in stored.replays] == ["unhandled", "processed"]
    # the service's retry of the same event is now a duplicate
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "duplicate"


def test_replay_never_rechecks_the_timestamp(
    inbox: MemoryInbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_900_000_000.0]
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox, clock=lambda: now[0])
    body = body_for(event="note.other")
    receiver.process(body, sign(body, SECRET, ORG, timestamp=int(now[0])))
    now[0] += 86_400  # a day later: the signature would be far too old
    receiver.on("note.other")(lambda event: None)
    assert receiver.replay(only(inbox).id).reason == "processed"


def test_replay_of_an_unknown_id_raises_key_error(receiver: WebhookReceiver) -> None:
    with pytest.raises(KeyError):
        receiver.replay("f" * 32)


def test_replay_uses_a_custom_idempotency_key(inbox: MemoryInbox) -> None:
    receiver = WebhookReceiver(
        SECRET, store=MemoryStore(), inbox=inbox, idempotency_key=lambda e: e.data.id
    )
    body = body_for("k")
    receiver.on("note.created")(lambda event: None)
    receiver.process(body, sign(body, SECRET, ORG))
    record = only(inbox)
    assert record.idempotency_key == f"{ORG},n-k"
    assert receiver.replay(record.id).reason == "duplicate"


async def test_areplay(receiver: WebhookReceiver, inbox: MemoryInbox) -> None:
    runs: list[int] = []
    body = body_for(event="note.later")
    assert (await receiver.aprocess(body, sign(body, SECRET, ORG))).reason == "unhandled"
    record = only(inbox)

    @receiver.on("note.later")
    async def handler(event: Event[Any]) -> None:
        runs.append(1)

    assert (await receiver.areplay(record.id)).reason == "processed"
    assert (await receiver.areplay(record.id)).reason == "duplicate"
    assert (await receiver.areplay(record.id, force=True)).reason == "processed"
    assert runs == [1, 1]
    stored = await inbox.aget(record.id)
    assert stored is not None
    assert [(r.reason, r.forced) for r in stored.replays] == [
        ("processed", False),
        ("duplicate", False),
        ("processed", True),
    ]
    with pytest.raises(KeyError):
        await receiver.areplay("0" * 32)


def test_observers_and_a_tracer_still_see_the_delivery(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    seen: list[str] = []
    receiver.on_outcome(lambda record: seen.append(record.reason))
    body = body_for()
    receiver.process(body, sign(body, SECRET, ORG))
    assert seen == ["unhandled"]
    assert only(inbox).reason == "unhandled"


def test_refusals_before_the_body_is_read_are_counted(
    receiver: WebhookReceiver, inbox: MemoryInbox
) -> None:
    assert receiver.precheck("PUT") is not None
    assert receiver.precheck("POST", 10**9) is not None
    too_big = [(SIGNATURE_HEADER, "o:x,t:1,v:x"), ("Content-Length", str(10**9))]
    assert receiver.handle("POST", too_big, lambda size: b"").status == 413
    assert inbox.rejected() == {"method_not_allowed": 1, "payload_too_large": 2}
    assert inbox.search().items == ()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["handle", "ahandle"])
async def test_handle_goes_through_an_overridden_process_with_an_inbox(
    inbox: MemoryInbox, asynchronous: bool
) -> None:
    calls: list[str] = []

    class Wrapped(WebhookReceiver):
        def process(self, *args: Any, **kwargs: Any) -> Any:
            calls.append("process")
            return super().process(*args, **kwargs)

        async def aprocess(self, *args: Any, **kwargs: Any) -> Any:
            calls.append("aprocess")
            return await super().aprocess(*args, **kwargs)

    receiver = Wrapped(SECRET, store=MemoryStore(), inbox=inbox)
    body = body_for()
    pairs = [(SIGNATURE_HEADER, sign(body, SECRET, ORG)), ("User-Agent", "Svc/1")]
    chunks = [body, b""]
    if asynchronous:

        async def read(size: int) -> bytes:
            return chunks.pop(0)

        outcome = await receiver.ahandle("POST", pairs, read)
    else:
        outcome = receiver.handle("POST", pairs, lambda size: chunks.pop(0))
    assert outcome.reason == "unhandled"
    assert calls == ["aprocess" if asynchronous else "process"]
    assert only(inbox).user_agent == "Svc/1"


def test_record_ids_are_uuid7s_that_sort_by_received_time() -> None:
    import uuid

    from service_webhooks.inbox._base import new_record_id, to_micros

    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)
    receiver.on("note.created")(lambda event: None)
    for text in ("a", "b", "c"):
        assert deliver(receiver, body_for(text)).status == 200
    records = inbox.search().items  # newest first
    for record in records:
        parsed = uuid.UUID(record.id)
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        assert record.id == parsed.hex  # 32 lowercase hex digits
        millis = int(record.id[:12], 16)
        assert millis == to_micros(record.received_at) // 1000
    assert [r.id for r in records] == sorted((r.id for r in records), reverse=True)
    # the sub-millisecond fraction orders IDs within one millisecond (RFC 9562 §6.2)
    base = 1_763_884_800_000_000  # microseconds: 2025-11-23 08:00 UTC
    ids = [new_record_id(base + micros) for micros in range(0, 2000, 3)]
    assert ids == sorted(ids)
    assert len({new_record_id(base) for _ in range(1000)}) == 1000  # 62 random bits


@pytest.mark.parametrize("inbox", [False, None], ids=["inbox=False", "memory-store-default"])
def test_replay_without_an_inbox_says_why_whichever_way_it_has_none(inbox: Any) -> None:
    """A memory store with no ``inbox=`` keeps none either: the message said only
    ``inbox=False``, which the user never wrote."""
    receiver = WebhookReceiver("s" * 32, store=MemoryStore(), inbox=inbox)
    assert receiver.inbox is None
    with pytest.raises(ConfigurationError) as refused:
        receiver.replay("0" * 32)
    assert "or no inbox= beside a memory or Redis store" in str(refused.value)
