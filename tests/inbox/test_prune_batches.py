"""The inbox prunes in batches of ``PRUNE_BATCH`` records, oldest first: a prune of a
large backlog never holds the table in one statement, and the automatic step on a
delivery's path deletes one batch and never fails the delivery."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sw_inbox_contract import T0, delivery

from service_webhooks.inbox import SQLiteInbox, inbox_from_url
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
