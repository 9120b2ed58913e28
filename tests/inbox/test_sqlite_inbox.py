"""The SQLite inbox's connections (opening one on a new file, closing them all) and what its
pages read."""

from __future__ import annotations

import datetime
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from service_webhooks.inbox import InboxQuery, ReceivedDelivery, SQLiteInbox
from service_webhooks.inbox._base import new_record_id, to_micros


def test_an_inbox_opened_while_the_write_lock_is_held_waits_for_wal(tmp_path: Path) -> None:
    """A new file's switch to WAL is refused at once while another connection holds
    the write lock: the inbox retries it within its timeout."""
    path = tmp_path / "inbox.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
    timer.start()
    inbox = SQLiteInbox(path)
    assert inbox.search().items == ()  # opened once the lock was released
    timer.join()
    holder.close()
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    inbox.close()


def test_close_lets_a_statement_at_work_in_another_thread_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    inbox.search()  # the file and the table exist
    started = threading.Event()
    opened = inbox._connection

    class Slow:
        """The worker thread's connection, slow to run its statement."""

        def __init__(self, connection: sqlite3.Connection) -> None:
            self.connection = connection

        def execute(self, statement: str, params: Any = ()) -> sqlite3.Cursor:
            started.set()
            time.sleep(0.05)
            return self.connection.execute(statement, params)

    results: list[Any] = []

    def page() -> None:
        monkeypatch.setattr(inbox, "_connection", lambda: Slow(opened()))
        try:
            results.append(inbox.search().items)
        except Exception as error:  # what a closed connection raises
            results.append(error)

    worker = threading.Thread(target=page)
    worker.start()
    started.wait()
    inbox.close()  # while the worker's statement runs: it waits for it
    worker.join()
    assert results == [()]  # the statement ran to its end, not on a closed connection
    assert inbox._connections == []


def test_has_table_asks_without_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE other (x)")
        connection.commit()
    before = path.read_bytes()
    assert SQLiteInbox(path).has_table() is False
    assert path.read_bytes() == before  # opened read-only: nothing was created
    inbox = SQLiteInbox(path)
    assert inbox.get("0") is None  # any other method makes the table
    assert inbox.has_table() is True
    inbox.close()
    with pytest.raises(sqlite3.OperationalError):
        SQLiteInbox(tmp_path / "missing.sqlite3").has_table()


def _top_level_reads(inbox: SQLiteInbox, run: Callable[[], object]) -> list[str]:
    """What the statements ``run`` makes do at their top level (not in a subquery), from
    SQLite's query plans."""
    statements: list[str] = []
    connection = inbox._connection()
    connection.set_trace_callback(statements.append)
    try:
        run()
    finally:
        connection.set_trace_callback(None)
    reads = []
    for statement in statements:
        if not statement.lstrip().startswith("SELECT"):
            continue
        plan = connection.execute("EXPLAIN QUERY PLAN " + statement).fetchall()
        reads += [detail for _, parent, _, detail in plan if parent == 0]
    return reads


def test_a_page_by_id_prefix_and_the_slowest_handlers_read_only_their_rows_bodies(
    tmp_path: Path,
) -> None:
    """SQLite has no index per filter in the inbox: an ID prefix's page reads the ID
    index's range and sorts it by time, and the slowest handlers sort the last day by
    handler time. The rows are chosen by their keys, then only those are read whole
    (by rowid), and put in order in Python: sorting whole records read every body of
    the range, so that a short prefix cost the size of the inbox (2.7 s over 1M
    records)."""
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3", prune_every=0)
    now = datetime.datetime.now(datetime.UTC)
    for index in range(20):
        moment = now - datetime.timedelta(seconds=index)
        body = b'{"eventName": "note.created", "version": 1, "data": "' + b"x" * 100_000 + b'"}'
        inbox.record(
            ReceivedDelivery(
                id=new_record_id(to_micros(moment)),
                received_at=moment,
                organization_id="o-1",
                event_name="note.created",
                version=1,
                idempotency_key=f"k-{index}",
                body=body,
                content_type="application/json",
                user_agent=None,
                status=200,
                reason="processed",
                handler_time=index / 1000,
            )
        )
    newest = inbox.search(limit=1).items[0]
    page = inbox.search(InboxQuery(id_prefix=newest.id[:4]), limit=5)
    assert [r.id for r in page.items] == [r.id for r in inbox.search(limit=5).items]
    assert [r.handler_time for r in inbox.slowest(limit=3)] == [0.019, 0.018, 0.017]
    for run in (
        lambda: inbox.search(InboxQuery(id_prefix=newest.id[:4]), limit=5),
        lambda: inbox.search(InboxQuery(id_prefix=newest.id[:4]), cursor=page.next_cursor),
        lambda: inbox.slowest(limit=3, since=now - datetime.timedelta(days=1)),
    ):
        reads = _top_level_reads(inbox, run)
        tables = [read for read in reads if inbox.table in read]
        assert tables
        assert all("INTEGER PRIMARY KEY (rowid=?)" in read for read in tables), reads
        assert not [read for read in reads if "TEMP B-TREE" in read], reads  # no whole rows
