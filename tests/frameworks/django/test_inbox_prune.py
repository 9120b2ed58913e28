"""The automatic prune of :class:`DjangoInbox`, on SQLite and PostgreSQL: every 1000
records it deletes a few batches of the oldest expired records (a backlog of 500,000
went in one ``DELETE`` inside a delivery: 4 s, SQLite's write lock held meanwhile, the
other deliveries waiting), and a step that fails is logged, not the delivery's 503."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections, transaction
from sw_inbox_contract import T0, delivery

from service_webhooks.adapters.django import inbox as django_inbox
from service_webhooks.adapters.django.inbox import DjangoInbox
from service_webhooks.adapters.django.models import ReceivedDeliveryRecord

DAY = 86400.0


def _inbox(alias: str, prune_every: int) -> DjangoInbox:
    inbox = DjangoInbox(using=alias, retention=DAY, clock=lambda: T0.timestamp() + 2 * DAY)
    inbox._prune_every = prune_every
    return inbox


def _deletes(alias: str, run: Callable[[], object]) -> list[str]:
    """The ``DELETE`` statements ``run()`` sent to ``alias``."""
    statements: list[str] = []

    def wrapper(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if sql.lstrip().upper().startswith("DELETE"):
            statements.append(sql)
        return execute(sql, *args)

    with connections[alias].execute_wrapper(wrapper):
        run()
    return statements


def test_the_automatic_step_deletes_a_few_batches_oldest_first(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(django_inbox, "_PRUNE_BATCH", 2)
    monkeypatch.setattr(django_inbox, "_STEP_BATCHES", 2)
    inbox = _inbox(alias, prune_every=11)
    expired = [delivery(second) for second in range(10)]  # all past retention
    for record in expired:
        inbox.record(record)
    fresh = delivery(2 * DAY - 10)
    deletes = _deletes(alias, lambda: inbox.record(fresh))  # the 11th: the step
    assert len(deletes) == 2
    kept = set(ReceivedDeliveryRecord.objects.using(alias).values_list("id", flat=True))
    assert kept == {record.id for record in [*expired[4:], fresh]}
    deletes = _deletes(alias, lambda: inbox.prune())  # the rest, two at a time
    assert len(deletes) == 3
    assert [record.id for record in inbox.search().items] == [fresh.id]


def test_a_step_that_fails_is_logged_not_raised(
    alias: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = _inbox(alias, prune_every=1)

    def failing(batches: int | None) -> int:
        with connections[alias].cursor() as cursor:  # PostgreSQL aborts the transaction
            cursor.execute("DELETE FROM no_such_table")
        return 0

    monkeypatch.setattr(inbox, "_prune_expired", failing)
    with caplog.at_level(logging.WARNING, "service_webhooks"):
        assert inbox.record(delivery(2 * DAY)) == 1
        with transaction.atomic(using=alias):  # the caller's transaction stays usable
            later = delivery(2 * DAY + 1)
            assert inbox.record(later) == 1
            assert inbox.get(later.id) is not None
    assert caplog.text.count("inbox prune step failed: ") == 2
