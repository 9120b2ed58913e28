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
