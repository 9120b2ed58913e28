"""The shared inbox contract (``tests/helpers/sw_inbox_contract.py``) over
:class:`DjangoInbox` on SQLite and on PostgreSQL (the test project's two databases).

The contract's tests are imported, not copied: Django is configured once per process and
only this folder configures it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.db import connections
from sw_inbox_contract import (
    test_a_record_round_trips_exactly,
    test_async_twins,
    test_bad_arguments_are_refused,
    test_counts_per_reason_over_a_window,
    test_id_prefix_is_exact_at_the_hex_digit_edges,
    test_prune_drops_records_past_retention,
    test_prune_keeps_the_newest_within_the_size_cap,
    test_purge_selected_or_all,
    test_rejections_are_counted_not_stored,
    test_replays_are_appended_in_order,
    test_search_filters,
    test_search_pages_newest_first_and_is_stable_while_new_ones_arrive,
    test_seen_counts_deliveries_per_key,
    test_slowest_handlers,
    test_window_counts_are_counts_per_window,
)

from service_webhooks.adapters.django.inbox import DjangoInbox
from service_webhooks.adapters.django.models import ReceivedDeliveryRecord
from service_webhooks.inbox import Inbox

__all__ = [
    "test_a_record_round_trips_exactly",
    "test_async_twins",
    "test_bad_arguments_are_refused",
    "test_counts_per_reason_over_a_window",
    "test_id_prefix_is_exact_at_the_hex_digit_edges",
    "test_prune_drops_records_past_retention",
    "test_prune_keeps_the_newest_within_the_size_cap",
    "test_purge_selected_or_all",
    "test_rejections_are_counted_not_stored",
    "test_replays_are_appended_in_order",
    "test_search_filters",
    "test_search_pages_newest_first_and_is_stable_while_new_ones_arrive",
    "test_seen_counts_deliveries_per_key",
    "test_slowest_handlers",
    "test_window_counts_are_counts_per_window",
]


@pytest.fixture(params=["sqlite", "postgresql"])
def make_inbox(request: pytest.FixtureRequest) -> Iterator[Callable[..., Inbox]]:
    """``make_inbox(**options)``: a :class:`DjangoInbox` on an emptied table."""
    alias = "default" if request.param == "sqlite" else request.getfixturevalue("pg")
    ReceivedDeliveryRecord.objects.using(alias).all().delete()
    yield lambda **options: DjangoInbox(using=alias, **options)
    ReceivedDeliveryRecord.objects.using(alias).all().delete()
    connections.close_all()


@pytest.fixture
def inbox(make_inbox: Callable[..., Inbox]) -> Inbox:
    return make_inbox()


def test_the_contract_was_loaded() -> None:
    loaded = [n for n in globals() if n.startswith("test_") and n != "test_the_contract_was_loaded"]
    assert len(loaded) >= 10


def test_it_is_an_inbox() -> None:
    assert isinstance(DjangoInbox(), Inbox)
    assert repr(DjangoInbox(using="pg")) == "DjangoInbox(using='pg')"


def test_a_record_waits_for_another_sqlite_writer_instead_of_failing() -> None:
    """SQLite refuses at once (``database is locked``, no busy wait) a transaction that
    read and then writes while another connection writes; a record read its ``seen``
    count first, so concurrent deliveries were answered 503. It is one ``INSERT`` now:
    it waits for the other writer (the database's ``timeout``) like any write."""
    import sqlite3
    import threading

    from django.conf import settings
    from sw_inbox_contract import delivery

    ReceivedDeliveryRecord.objects.using("default").all().delete()
    inbox = DjangoInbox(using="default")
    inbox.record(delivery(0, key="k1"))
    writer = sqlite3.connect(settings.DATABASES["default"]["NAME"], check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # another process's write transaction, under way
    done = threading.Timer(0.5, writer.commit)
    done.start()
    try:
        seen = inbox.record(delivery(1, key="k1", reason="duplicate"))
    finally:
        done.join()
        writer.close()
        ReceivedDeliveryRecord.objects.using("default").all().delete()
        connections.close_all()
    assert seen == 2
