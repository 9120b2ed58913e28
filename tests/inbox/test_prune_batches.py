"""The inbox prunes in batches of ``PRUNE_BATCH`` records, oldest first: a prune of a
large backlog never holds the table in one statement, and the automatic step on a
delivery's path deletes one batch and never fails the delivery."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from sw_inbox_contract import T0, delivery

from service_webhooks.inbox import Inbox, InboxQuery, SQLiteInbox, inbox_from_url
from service_webhooks.inbox import _sql as sql_inbox

DAY = 86400.0


def _inbox(tmp_path: Path, now: float) -> SQLiteInbox:
    return SQLiteInbox(tmp_path / "inbox.sqlite3", retention=DAY, clock=lambda: now)


def test_prune_deletes_a_backlog_larger_than_a_batch_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)
    later = T0.timestamp() + 2 * DAY
    inbox = _inbox(tmp_path, later)
    for second in range(10):  # all past retention
        inbox.record(delivery(second))
    fresh = delivery(2 * DAY - 10)
    inbox.record(fresh)
    assert inbox.prune() == 10
    assert [record.id for record in inbox.search().items] == [fresh.id]


def test_the_automatic_step_deletes_one_batch_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)
    inbox = _inbox(tmp_path, T0.timestamp() + 2 * DAY)
    old = [delivery(second) for second in range(10)]
    for record in old:
        inbox.record(record)
    inbox._prune_step()
    kept = {record.id for record in inbox.search().items}
    assert kept == {record.id for record in old[3:]}


def test_an_automatic_step_that_fails_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = _inbox(tmp_path, T0.timestamp())

    def locked(execute: object) -> int:
        raise TimeoutError("the table is locked")

    monkeypatch.setattr(inbox, "_prune_batch", locked)
    with caplog.at_level(logging.WARNING, "service_webhooks"):
        inbox._prune_step()
    assert "inbox prune step failed: TimeoutError" in caplog.text


def test_a_postgresql_inbox_url_takes_its_timeout() -> None:
    inbox = inbox_from_url(
        "postgresql://127.0.0.1:5432/test?timeout=2&inbox_table=t_inbox", create_schema=False
    )
    assert inbox._timeout == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("make_inbox", ["postgres", "sqlite"], indirect=True)
def test_purge_deletes_in_batches_of_the_keyset_order(
    make_inbox: Callable[..., Inbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge deletes ``PRUNE_BATCH`` records per statement (one ``DELETE`` of the whole
    inbox held SQLite's write lock 3.4 s over 1,000,000 records, every delivery waiting),
    each batch a range after the last: the records of one organization among others,
    some received at the same microsecond (their IDs order them), all go and no other."""
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)
    inbox = make_inbox()
    records = [delivery(second // 2, org=f"o-{second % 3}") for second in range(20)]
    for record in records:
        inbox.record(record)
    deleted: list[int] = []
    execute = inbox._execute  # type: ignore[attr-defined]

    def counted(statement: str, params: Sequence[Any]) -> int:
        rows: int = execute(statement, params)
        if statement.startswith("DELETE"):
            deleted.append(rows)
        return rows

    monkeypatch.setattr(inbox, "_execute", counted)
    assert inbox.purge(InboxQuery(organization_id="o-1")) == 7
    assert max(deleted) <= 3
    assert len(deleted) == 3
    kept = {record.id for record in records if record.organization_id != "o-1"}
    assert {record.id for record in inbox.search(limit=100).items} == kept
    deleted.clear()
    assert inbox.purge() == 13
    assert max(deleted) <= 3
    assert len(deleted) == 5
    assert inbox.search().items == ()
