"""The ``max_bytes`` cap of :class:`DjangoInbox` on SQLite and PostgreSQL: ``prune()``
keeps exactly the newest records that total at most the cap (ties in ``received_at``
by ID), and reads only a batch of records past those it deletes."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest
from django.db import connections, transaction
from sw_inbox_contract import delivery

from service_webhooks.adapters.django import inbox as django_inbox
from service_webhooks.adapters.django.inbox import DjangoInbox
from service_webhooks.adapters.django.models import ReceivedDeliveryRecord
from service_webhooks.inbox import ReceivedDelivery

UTC = datetime.UTC


def varied(count: int, seed: int = 7) -> list[ReceivedDelivery]:
    """``count`` records of varied sizes received in the last minutes, every fourth pair
    at the same microsecond (their IDs order them), some with tracebacks."""
    chance = random.Random(seed)
    now = datetime.datetime.now(UTC).replace(microsecond=0)
    records = []
    for index in range(count):
        tick = index - 1 if index % 4 == 1 else index
        record = delivery(
            at=now - datetime.timedelta(seconds=count - tick),
            body=b"x" * chance.randrange(1, 120),
        )
        if chance.random() < 0.3:
            record = msgspec.structs.replace(record, traceback="t" * chance.randrange(1, 80))
        records.append(record)
    return records


def newest_first(records: list[ReceivedDelivery]) -> list[ReceivedDelivery]:
    return sorted(records, key=lambda r: (r.received_at, r.id), reverse=True)


def newest_within(records: list[ReceivedDelivery], cap: int) -> set[str]:
    """IDs of the newest records that total at most ``cap`` bytes."""
    kept, total = set(), 0
    for record in newest_first(records):
        total += record.size
        if total > cap:
            break
        kept.add(record.id)
    return kept


def record_all(inbox: DjangoInbox, records: list[ReceivedDelivery]) -> None:
    with transaction.atomic(using=inbox.using):  # one commit (SQLite syncs each one)
        for record in records:
            inbox.record(record)


def stored_ids(alias: str) -> set[str]:
    return set(ReceivedDeliveryRecord.objects.using(alias).values_list("id", flat=True))


def test_prune_keeps_exactly_the_newest_records_within_the_cap(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(django_inbox, "_PRUNE_BATCH", 3)  # several batches for one prune()
    records = varied(30)
    ordered = newest_first(records)
    # the 13 newest fill the cap exactly: the 13th was received with the 14th, ranked
    # after it by ID
    assert ordered[12].received_at == ordered[13].received_at
    exact = sum(record.size for record in ordered[:13])
    assert ordered[0].size > 1  # a cap below it keeps nothing
    for cap in (exact, exact - 1, exact + 1, ordered[0].size - 1):
        inbox = DjangoInbox(using=alias, max_bytes=cap)
        record_all(inbox, random.Random(cap).sample(records, len(records)))  # any order
        kept = newest_within(records, cap)
        assert inbox.prune() == len(records) - len(kept)
        assert stored_ids(alias) == kept
        assert len(kept) == {exact: 13, exact + 1: 13, exact - 1: 12}.get(cap, 0)
        assert inbox.prune() == 0
        inbox.purge()


@contextmanager
def rows_fetched(alias: str) -> Iterator[list[int]]:
    """The number of rows each fetch from ``alias`` returned while inside."""
    counts: list[int] = []

    def counted(fetch: Callable[..., Any]) -> Callable[..., Any]:
        def fetch_and_count(*args: Any) -> Any:
            rows = fetch(*args)
            counts.append(len(rows) if isinstance(rows, list | tuple) else int(rows is not None))
            return rows

        return fetch_and_count

    def wrapper(execute: Callable[..., Any], *args: Any) -> Any:
        cursor = args[-1]["cursor"]  # the ORM fetches its rows from it
        for name in ("fetchone", "fetchmany", "fetchall"):
            setattr(cursor, name, counted(getattr(cursor, name)))
        return execute(*args)

    with connections[alias].execute_wrapper(wrapper):
        yield counts


def test_prune_reads_the_records_it_deletes_not_every_record(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database sums the sizes; prune then reads the oldest records a batch at a
    time until the rest fits: of 300 records of which 295 are kept, it reads the sum
    and two batches of 4, not every record's size (the old prune read all 300)."""
    monkeypatch.setattr(django_inbox, "_PRUNE_BATCH", 4)
    records = varied(300)
    cap = sum(record.size for record in newest_first(records)[:295])
    inbox = DjangoInbox(using=alias, max_bytes=cap)
    record_all(inbox, records)
    with rows_fetched(alias) as counts:
        assert inbox.prune() == 5
    assert stored_ids(alias) == newest_within(records, cap)
    assert sum(counts) <= 1 + 2 * 4
