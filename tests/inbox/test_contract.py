"""The inbox contract (``tests/helpers/sw_inbox_contract.py``) over every backend in
``BACKENDS`` (``tests/inbox/conftest.py`` provides the ``inbox`` and ``make_inbox`` fixtures),
and the backends' own extras."""

from __future__ import annotations

import pytest
from sw_inbox_contract import (
    delivery,
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

from service_webhooks import ConfigurationError

__all__ = [
    "delivery",
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


def test_memory_inbox_is_bounded() -> None:
    from service_webhooks.inbox import MemoryInbox

    inbox = MemoryInbox(max_records=3)
    records = [delivery(i) for i in range(5)]
    for record in records:
        inbox.record(record)
    assert [r.id for r in inbox.search().items] == [r.id for r in reversed(records[2:])]


def test_memory_inbox_drops_the_first_received_even_when_recorded_late() -> None:
    """Bounded by received time, not by the order of recording; records pruned or
    purged meanwhile are not counted twice."""
    from service_webhooks.inbox import InboxQuery, MemoryInbox

    inbox = MemoryInbox(max_records=3)
    late, *others = [delivery(0), delivery(1), delivery(2), delivery(3, org="o-2")]
    for record in others:
        inbox.record(record)
    inbox.record(late)  # received first, recorded last: the one dropped
    assert {r.id for r in inbox.search().items} == {r.id for r in others}
    assert inbox.purge(InboxQuery(organization_id="o-2")) == 1
    inbox.record(delivery(4))  # room for it: nothing else is dropped
    assert len(inbox) == 3
    inbox.record(delivery(5))  # full again: the oldest still there goes
    assert others[0].id not in {r.id for r in inbox.search().items}
    assert len(inbox) == 3


def test_memory_inbox_stays_small_when_records_are_purged_as_they_come() -> None:
    from service_webhooks.inbox import MemoryInbox

    inbox = MemoryInbox(max_records=10)
    for index in range(1000):
        inbox.record(delivery(index))
        inbox.purge()
    assert len(inbox) == 0
    assert len(inbox._by_age) <= 64 + 1


def test_postgres_schema_sql_is_the_ddl() -> None:
    pytest.importorskip("psycopg")
    from service_webhooks.inbox import PostgresInbox

    ddl = PostgresInbox.schema_sql("app.inbox")
    assert ddl.startswith("CREATE TABLE IF NOT EXISTS app.inbox (")
    assert (
        "CREATE INDEX IF NOT EXISTS inbox_received ON app.inbox (received_at DESC, id DESC)" in ddl
    )
    with pytest.raises(ConfigurationError):
        PostgresInbox.schema_sql("bad name; drop")
