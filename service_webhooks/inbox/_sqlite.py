"""SQLite inbox: the default, in the same file as the default SQLite idempotency store.

One connection per thread (closed when the thread ends), WAL journal, a busy timeout;
every write is one autocommitted statement, durable once it returns (a process killed
right after still has it). A file this process may not write is read through a
connection closed after each statement (see :func:`~service_webhooks.stores._sqlite.writable`).

Schema (created on first use)::

    CREATE TABLE service_webhooks_inbox (
        id TEXT PRIMARY KEY, received_at INTEGER,  -- Unix microseconds
        organization_id, event_name, version, idempotency_key, body BLOB,
        content_type, user_agent, status, reason, detail, seen, error_type,
        error_message, traceback, handler_time REAL, replays TEXT, size INTEGER
    )

with two indexes: ``(received_at DESC, id DESC)`` (keyset paging; filtered queries walk
it newest first) and the idempotency key (the ``seen`` count). Each more index would
make every recorded delivery about 10 % slower; the PostgreSQL inbox has one per filter.

An inbox with ``max_bytes`` adds, the first time it prunes, the table's size total
(``<table>_size_total``, one row) and the three triggers that keep it: after each
``INSERT``, ``DELETE`` and change of ``size``, in the writer's transaction. It starts
from the records already there (summed once, under the write lock), and every process
writing the file keeps it, whatever its version. The cap then reads it instead of
summing every record.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from .._exceptions import ConfigurationError
from .._forking import after_fork_of
from ..stores._base import check_prune_every, check_timeout
from ..stores._sqlite import (
    Connection,
    SQLiteStore,
    cannot_write,
    close_when_collected,
    close_with_thread,
    connect,
    leave_inherited,
    moved,
    writable,
)
from ._base import DEFAULT_INBOX_RETENTION, check_bounds
from ._sql import (
    _SELECT,
    COLUMNS,
    ESSENTIAL_INDEXES,
    SQLInbox,
    derived_name,
    schema,
    size_total_table,
)

__all__ = ["DEFAULT_INBOX_TABLE", "SQLiteInbox"]

DEFAULT_INBOX_TABLE = "service_webhooks_inbox"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_TYPES = {
    "text": "TEXT",
    "time": "INTEGER",
    "bytes": "BLOB",
    "float": "REAL",
    "json": "TEXT",
    "int": "INTEGER",
}


class SQLiteInbox(SQLInbox):
    """Inbox in a SQLite database file (thread- and process-safe on one machine).

    Args:
        path: The database file (created with its table if missing); the default
            SQLite idempotency store's file is a good place.
        table: The table name.
        retention: Seconds a record is kept (30 days, spec §6.3).
        max_bytes: Total record size kept, in bytes; ``None``: no cap. The oldest
            records past it go: all at :meth:`prune`, at most ``PRUNE_BATCH`` (2,000)
            per automatic step. Its first prune adds the size total (see the module).
        timeout: Seconds to wait for another process's write lock before failing.
        prune_every: Prune once every this many records (0: never; call
            :meth:`prune` yourself).
        clock: Current time in Unix seconds (for pruning); default :func:`time.time`.

    Raises:
        ConfigurationError: ``path`` is ``":memory:"``, a bad table name, a
            ``retention`` or ``max_bytes`` out of range, a ``timeout`` that is not a
            finite number of seconds >= 0, or a ``prune_every`` that is not an ``int``
            >= 0.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = DEFAULT_INBOX_TABLE,
        retention: float = DEFAULT_INBOX_RETENTION,
        max_bytes: int | None = None,
        timeout: float = 5.0,
        prune_every: int = 1000,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if str(path) == ":memory:":
            raise ConfigurationError("SQLiteInbox needs a file path; use MemoryInbox for memory")
        if not _IDENTIFIER.fullmatch(table):
            raise ConfigurationError(f"table must be letters, digits and _, not {table!r}")
        check_bounds(retention, max_bytes)
        check_timeout("timeout", timeout, zero=True)
        check_prune_every(prune_every)
        self.path = Path(path)
        self.table = table
        self.retention = retention
        self.max_bytes = max_bytes
        self._timeout = timeout
        self._prune_every = prune_every
        self._clock = clock
        self._local = threading.local()
        self._connections: list[Connection] = []
        close_when_collected(self, self._connections)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when no statement runs
        self._running = 0  # statements at work, in any thread
        self._once: set[Connection] = set()  # to close after their statement
        self._size_total_made = False
        super().__init__()
        after_fork_of(self, type(self)._after_fork)  # gunicorn --preload, prefork pools

    def _after_fork(self) -> None:
        """In a forked child: leave the parent's connections (see
        :func:`~service_webhooks.stores._sqlite.leave_inherited`), open new ones on first
        use, and make new locks: a statement at work in another thread at the fork never
        ends here, and :meth:`close` waited for it for ever."""
        inherited = [*self._connections, *self._once]
        at_work = inherited if self._running else []  # which one(s): not known
        self._connections.clear()  # the same list: close_when_collected() holds it
        self._once = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0
        self._count_lock = threading.Lock()
        self._local = threading.local()
        leave_inherited(inherited, at_work)

    def __repr__(self) -> str:
        return f"SQLiteInbox({str(self.path)!r})"

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.time()

    def _page(self, where: str, params: list[Any], order: str) -> list[tuple[Any, ...]]:
        # The rows are chosen by their keys alone, then read whole. SQLite has no index
        # per filter here: a page filtered by an ID prefix sorts the ID index's range by
        # time, the slowest handlers sort the last 24 hours. Sorting whole records read
        # every body of the range (a short prefix's page cost the size of the inbox:
        # 2.7 s over 1M records of 700 bytes); sorting keys reads the page's bodies
        # only. The page's rows are put in order here: an outer ORDER BY would copy
        # them whole, bodies included, through a sorter.
        table = self._table_sql()
        statement = (
            f"SELECT {_SELECT} FROM {table} WHERE rowid IN"
            f" (SELECT rowid FROM {table}{where} ORDER BY {order} LIMIT ?)"
        )
        terms = [COLUMNS.index(term.split()[0]) for term in order.split(",")]
        return sorted(self._query(statement, params), key=itemgetter(*terms), reverse=True)

    def _append_replay_sql(self) -> str:
        return (
            f"UPDATE {self.table} SET replays = json_insert(replays, '$[#]', json(?)) WHERE id = ?"
        )

    def _connection(self) -> Connection:
        """This thread's connection. One opened while the file was not writable
        (:func:`~service_webhooks.stores._sqlite.writable`) serves one statement (reading
        a file this process may not write works) and is closed after it, so that the
        file is written again, with no restart, once it can be."""
        connection = self._kept()
        if connection is None:
            connection = connect(
                self.path,
                self._timeout,
                schema(self.table, _TYPES, self.table, ESSENTIAL_INDEXES),
            )
            if not writable(self.path):
                self._once.add(connection)
                return connection
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
            close_with_thread(self._local, connection, self._connections)
        return connection

    def shares_database(self, store: object) -> bool:
        """Whether ``store`` is a :class:`~service_webhooks.stores.SQLiteStore` on this file."""
        return isinstance(store, SQLiteStore) and _same_file(store.path, self.path)

    def has_table(self) -> bool:
        """Whether the file holds this inbox's table, asked without changing it: the
        file is opened read-only, where every other method creates the table.

        Raises:
            sqlite3.Error: The file does not exist, cannot be opened or is not a
                database.
        """
        uri = self.path.absolute().as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
            found = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.table,)
            ).fetchone()
        return found is not None

    def _kept(self) -> Connection | None:
        """This thread's connection, or ``None``: it has none yet, or the file it opened
        is no longer at the path (:func:`~service_webhooks.stores._sqlite.moved`), and
        then it is closed so that the path is opened again."""
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is not None and moved(connection):
            self._untrack(connection)
            connection.close()
            self._size_total_made = False  # the file at the path may have none
            return None
        return connection

    def _untrack(self, connection: Connection) -> None:
        """No longer this thread's connection, nor one :meth:`close` closes: the next
        statement opens the path again (the caller closes ``connection``)."""
        self._local.connection = None
        with self._lock:
            self._connections.remove(connection)

    def _ready(self) -> None:
        if self._kept() is None:
            with self._statement():
                pass  # the table exists before another connection inserts into it

    def _has_size_total(self, delivery: bool) -> bool:
        """Always: the size total is made here the first time (see the module)."""
        if not self._size_total_made:
            with self._statement() as connection:
                _make_size_total(connection, self.table)
            self._size_total_made = True
        return True

    def _query(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._statement() as connection:
            return connection.execute(statement, params).fetchall()

    def _execute(self, statement: str, params: Sequence[Any]) -> int:
        with self._statement() as connection:
            return connection.execute(statement, params).rowcount

    @contextlib.contextmanager
    def _statement(self) -> Iterator[Connection]:
        """This thread's connection, counted as at work until the block ends (see
        :meth:`close`)."""
        with self._lock:
            self._running += 1
        try:
            connection = self._connection()
            try:
                yield connection
            except sqlite3.OperationalError as error:
                if cannot_write(error) and connection is getattr(self._local, "connection", None):
                    self._untrack(connection)  # see cannot_write(): open the file again
                    self._once.add(connection)
                raise
            finally:
                if connection in self._once:
                    self._once.discard(connection)
                    connection.close()
        finally:
            with self._idle:
                self._running -= 1
                if not self._running:
                    self._idle.notify_all()

    def close(self) -> None:
        """Close every connection this inbox opened (in any thread).

        Statements at work in other threads (a prune, a dashboard's page) are let
        finish first: a connection closed under one could crash the process."""
        with self._idle:
            self._idle.wait_for(lambda: not self._running)
            connections = self._connections[:]
            self._connections.clear()
            for connection in connections:
                connection.close()
            self._local = threading.local()


def _size_total_sql(table: str) -> list[str]:
    """The statements that give ``table`` its size total, for :func:`_make_size_total`."""
    total = size_total_table(table)
    change = {
        "insert": ("INSERT", "+ NEW.size"),
        "delete": ("DELETE", "- OLD.size"),
        "update": ("UPDATE OF size", "- OLD.size + NEW.size"),
    }
    return [
        f"CREATE TABLE {total} (bytes INTEGER NOT NULL)",
        f"INSERT INTO {total} (bytes) SELECT COALESCE(SUM(size), 0) FROM {table}",
        *(
            f"CREATE TRIGGER IF NOT EXISTS {derived_name(table, f'size_total_{name}')}"
            f" AFTER {event} ON {table} BEGIN UPDATE {total} SET bytes = bytes {delta}; END"
            for name, (event, delta) in change.items()
        ),
    ]


def _make_size_total(connection: sqlite3.Connection, table: str) -> None:
    """Give ``table`` its size total unless it has one: the table, its starting sum and
    the triggers in one ``BEGIN IMMEDIATE`` transaction, so that no other writer's
    record is missed or counted twice (each waits for the write lock meanwhile).

    Raises:
        sqlite3.Error: The write lock was not had within the connection's timeout.
    """
    exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    total = size_total_table(table)
    if connection.execute(exists, (total,)).fetchone() is not None:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        if connection.execute(exists, (total,)).fetchone() is None:  # made meanwhile?
            for statement in _size_total_sql(table):
                connection.execute(statement)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.resolve() == other.resolve()
    except OSError:
        return False
