"""The inbox contract: tests over an ``inbox`` fixture (and ``make_inbox(**options)``).

``tests/inbox/test_contract.py`` imports them to run against every backend in
``BACKENDS`` (``tests/inbox/conftest.py``); ``tests/frameworks/django/test_inbox_contract.py``
imports them to run against :class:`DjangoInbox` (SQLite and PostgreSQL).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable

import pytest

from service_webhooks import ConfigurationError
from service_webhooks.inbox import Inbox, InboxQuery, ReceivedDelivery, Replay

UTC = datetime.UTC
T0 = datetime.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def delivery(
    seconds: float = 0,
    *,
    reason: str = "processed",
    status: int = 200,
    event: str | None = "note.created",
    org: str = "o-1",
    key: str | None = None,
    body: bytes = b'{"eventName":"note.created","version":1,"data":{}}',
    handler_time: float | None = None,
    at: datetime.datetime | None = None,
    record_id: str | None = None,
) -> ReceivedDelivery:
    return ReceivedDelivery(
        id=record_id or uuid.uuid4().hex,
        received_at=at or T0 + datetime.timedelta(seconds=seconds),
        organization_id=org,
        event_name=event,
        version=1 if event else None,
        idempotency_key=key,
        body=body,
        content_type="application/json",
        user_agent="Service-Webhooks/1.0",
        status=status,
        reason=reason,
        handler_time=handler_time,
    )


def test_a_record_round_trips_exactly(inbox: Inbox) -> None:
    body = b'{"eventName":"note.created","version":1,"data":{"t":"\xc3\xa9\x00"}}\n'
    original = ReceivedDelivery(
        id=uuid.uuid4().hex,
        received_at=T0,
        organization_id="o-1",
        event_name="note.created",
        version=1,
        idempotency_key="k" * 64,
        body=body,
        content_type="application/json; charset=utf-8",
        user_agent="Service-Webhooks/1.0",
        status=500,
        reason="handler_failed",
        detail="",
        error_type="ValueError",
        error_message="boom",
        traceback="Traceback (most recent call last):\n  ...\nValueError: boom\n",
        handler_time=0.25,
    )
    assert inbox.record(original) == 1
    assert inbox.get(original.id) == original
    assert inbox.get(uuid.uuid4().hex) is None


def test_seen_counts_deliveries_per_key(inbox: Inbox) -> None:
    first, second = delivery(0, key="k1"), delivery(1, key="k1", reason="duplicate")
    other, keyless = delivery(2, key="k2"), delivery(3, key=None, reason="malformed_envelope")
    assert [inbox.record(d) for d in (first, second, other, keyless)] == [1, 2, 1, 1]
    assert [inbox.get(d.id).seen for d in (first, second, other, keyless)] == [1, 2, 1, 1]  # type: ignore[union-attr]


def test_replays_are_appended_in_order(inbox: Inbox) -> None:
    record = delivery()
    inbox.record(record)
    one = Replay(
        at=T0, status=500, reason="handler_failed", error_type="KeyError", handler_time=0.5
    )
    two = Replay(at=T0 + datetime.timedelta(seconds=5), status=200, reason="processed", forced=True)
    assert inbox.add_replay(record.id, one) is True
    assert inbox.add_replay(record.id, two) is True
    assert inbox.add_replay(uuid.uuid4().hex, one) is False
    stored = inbox.get(record.id)
    assert stored is not None
    assert stored.replays == (one, two)
    assert stored.current_reason == "processed"


def test_search_pages_newest_first_and_is_stable_while_new_ones_arrive(inbox: Inbox) -> None:
    records = [delivery(i) for i in range(7)]
    same_time = [delivery(at=T0 + datetime.timedelta(seconds=3)) for _ in range(2)]
    for record in (*records, *same_time):
        inbox.record(record)
    expected = sorted((*records, *same_time), key=lambda r: (r.received_at, r.id), reverse=True)
    first = inbox.search(limit=4)
    assert [r.id for r in first.items] == [r.id for r in expected[:4]]
    assert first.next_cursor is not None
    inbox.record(delivery(100))  # newer: must not shift the next pages
    second = inbox.search(limit=4, cursor=first.next_cursor)
    assert [r.id for r in second.items] == [r.id for r in expected[4:8]]
    third = inbox.search(limit=4, cursor=second.next_cursor)
    assert [r.id for r in third.items] == [r.id for r in expected[8:]]
    assert third.next_cursor is None


def test_search_filters(inbox: Inbox) -> None:
    a = delivery(0, reason="processed", status=200, event="note.created", org="o-1")
    b = delivery(10, reason="handler_failed", status=500, event="note.created", org="o-2")
    c = delivery(20, reason="unhandled", status=200, event="segment.trend_alert", org="o-1")
    d = delivery(30, reason="unprocessable", status=422, event=None, org="o-1")
    for record in (a, b, c, d):
        inbox.record(record)

    def ids(**filters: object) -> set[str]:
        return {r.id for r in inbox.search(InboxQuery(**filters)).items}  # type: ignore[arg-type]

    assert ids() == {a.id, b.id, c.id, d.id}
    assert ids(reasons=("processed", "unhandled")) == {a.id, c.id}
    assert ids(status_class=5) == {b.id}
    assert ids(status_class=4) == {d.id}
    assert ids(event_name="note.created") == {a.id, b.id}
    assert ids(organization_id="o-2") == {b.id}
    assert ids(since=T0 + datetime.timedelta(seconds=10)) == {b.id, c.id, d.id}
    assert ids(until=T0 + datetime.timedelta(seconds=10)) == {a.id}
    assert ids(id_prefix=c.id[:6]) == {c.id}
    assert ids(organization_id="o-1", status_class=2) == {a.id, c.id}


def test_id_prefix_is_exact_at_the_hex_digit_edges(inbox: Inbox) -> None:
    ids = ["9" + "f" * 31, "a" + "0" * 31, "f" * 32, "0" * 32, "9e" + "0" * 30]
    for i, record_id in enumerate(ids):
        inbox.record(delivery(i, record_id=record_id))

    def found(prefix: str) -> set[str]:
        return {r.id for r in inbox.search(InboxQuery(id_prefix=prefix)).items}

    assert found("9") == {ids[0], ids[4]}
    assert found("9f") == {ids[0]}
    assert found("a") == {ids[1]}
    assert found("f") == {ids[2]}
    assert found("f" * 32) == {ids[2]}
    assert found("0") == {ids[3]}
    assert found("9e0") == {ids[4]}
    assert found("b") == set()


def test_bad_arguments_are_refused(inbox: Inbox) -> None:
    with pytest.raises(ConfigurationError):
        inbox.search(limit=0)
    with pytest.raises(ConfigurationError):
        inbox.search(cursor="not a cursor")
    with pytest.raises(ConfigurationError):
        InboxQuery(since=datetime.datetime(2026, 1, 1))  # naive
    with pytest.raises(ConfigurationError):
        InboxQuery(id_prefix="%")


def test_counts_per_reason_over_a_window(inbox: Inbox) -> None:
    for i, reason in enumerate(["processed", "processed", "duplicate", "handler_failed"]):
        inbox.record(delivery(i * 10, reason=reason))
    assert inbox.counts() == {"processed": 2, "duplicate": 1, "handler_failed": 1}
    assert inbox.counts(since=T0 + datetime.timedelta(seconds=10)) == {
        "processed": 1,
        "duplicate": 1,
        "handler_failed": 1,
    }
    assert inbox.counts(until=T0 + datetime.timedelta(seconds=10)) == {"processed": 1}


def test_window_counts_are_counts_per_window(inbox: Inbox) -> None:
    for i, reason in enumerate(["processed", "processed", "duplicate", "handler_failed"]):
        inbox.record(delivery(i * 10, reason=reason))

    def at(seconds: float) -> datetime.datetime:
        return T0 + datetime.timedelta(seconds=seconds)

    windows: list[tuple[datetime.datetime | None, datetime.datetime | None]] = [
        (None, None),
        (at(10), None),
        (None, at(10)),
        (at(10), at(25)),
        (at(0), at(10)),
        (at(100), None),
        (at(10), at(10)),
    ]
    assert inbox.window_counts(windows) == [
        {"processed": 2, "duplicate": 1, "handler_failed": 1},
        {"processed": 1, "duplicate": 1, "handler_failed": 1},
        {"processed": 1},
        {"processed": 1, "duplicate": 1},
        {"processed": 1},
        {},
        {},
    ]
    assert inbox.window_counts(windows) == [inbox.counts(since=s, until=u) for s, u in windows]
    hours = [(at(3600 * h - 5), at(3600 * h + 25)) for h in range(3)]
    assert inbox.window_counts(hours) == [{"processed": 2, "duplicate": 1}, {}, {}]
    assert inbox.window_counts([]) == []
    with pytest.raises(ConfigurationError):
        inbox.window_counts([(datetime.datetime(2026, 1, 1), None)])  # naive


def test_slowest_handlers(inbox: Inbox) -> None:
    quick, slow, slower = (delivery(i, handler_time=t) for i, t in enumerate((0.1, 2.0, 3.5)))
    for record in (quick, slow, slower, delivery(9, reason="duplicate")):
        inbox.record(record)
    assert [r.id for r in inbox.slowest(limit=2)] == [slower.id, slow.id]
    assert [r.id for r in inbox.slowest(until=T0 + datetime.timedelta(seconds=1.5))] == [
        slow.id,
        quick.id,
    ]


def test_rejections_are_counted_not_stored(inbox: Inbox) -> None:
    inbox.count_rejected("signature")
    inbox.count_rejected("signature")
    inbox.count_rejected("timestamp")
    assert inbox.rejected() == {"signature": 2, "timestamp": 1}
    assert inbox.search().items == ()


def test_prune_drops_records_past_retention(make_inbox: Callable[..., Inbox]) -> None:
    now = datetime.datetime.now(UTC)
    inbox = make_inbox(retention=3600)
    old = delivery(at=now - datetime.timedelta(hours=2))
    recent = delivery(at=now - datetime.timedelta(minutes=5))
    inbox.record(old)
    inbox.record(recent)
    assert inbox.prune() == 1
    assert [r.id for r in inbox.search().items] == [recent.id]


def test_prune_keeps_the_newest_within_the_size_cap(make_inbox: Callable[..., Inbox]) -> None:
    now = datetime.datetime.now(UTC)
    inbox = make_inbox(max_bytes=250)
    records = [
        delivery(at=now - datetime.timedelta(minutes=10 - i), body=b"x" * 100) for i in range(4)
    ]
    for record in records:
        inbox.record(record)
    assert inbox.prune() == 2
    assert [r.id for r in inbox.search().items] == [records[3].id, records[2].id]


def test_purge_selected_or_all(inbox: Inbox) -> None:
    inbox.record(delivery(0, org="o-1"))
    kept = delivery(1, org="o-2")
    inbox.record(kept)
    inbox.record(delivery(2, org="o-1"))
    assert inbox.purge(InboxQuery(organization_id="o-1")) == 2
    assert [r.id for r in inbox.search().items] == [kept.id]
    assert inbox.purge() == 1
    assert inbox.search().items == ()


async def test_async_twins(inbox: Inbox) -> None:
    record = delivery(key="k", at=datetime.datetime.now(UTC))
    assert await inbox.arecord(record) == 1
    replay = Replay(at=T0, status=200, reason="processed")
    assert await inbox.aadd_replay(record.id, replay) is True
    stored = await inbox.aget(record.id)
    assert stored is not None
    assert stored.replays == (replay,)
    assert [r.id for r in (await inbox.asearch()).items] == [record.id]
    assert await inbox.acounts() == {"processed": 1}
    assert await inbox.awindow_counts([(None, None), (T0, T0)]) == [{"processed": 1}, {}]
    assert await inbox.aslowest() == []
    assert await inbox.aprune() == 0
    assert await inbox.apurge() == 1
