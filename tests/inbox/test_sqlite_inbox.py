"""The SQLite inbox's connections: opening one on a new file, closing them all."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from service_webhooks.inbox import SQLiteInbox


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
