"""SQLite idempotency store: the embedded default, durable across restarts.

Safe across threads (one connection per thread) and across processes on one machine
(WAL journal, a busy timeout, and claims made by one atomic ``INSERT … ON CONFLICT
DO UPDATE … WHERE expired OR renewed by its owner`` statement). Not for several
machines: use the Redis or PostgreSQL store there. Expired rows are pruned every
``prune_every`` claims and by :meth:`SQLiteStore.prune`.

Schema (created on first use)::

    CREATE TABLE service_webhooks_idempotency (
        key        TEXT PRIMARY KEY,
        state      TEXT NOT NULL,   -- 'in_flight' or 'done'
        token      TEXT NOT NULL,   -- owner of the claim
        expires_at REAL NOT NULL    -- Unix seconds
    )
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .._exceptions import ConfigurationError
from ._base import ClaimState, SyncStore

__all__ = ["DEFAULT_SQLITE_PATH", "SQLiteStore"]

DEFAULT_SQLITE_PATH = "service_webhooks.sqlite3"
"""The store (and inbox) used when none is given: a SQLite file in the working directory."""

_TABLE = "service_webhooks_idempotency"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    token TEXT NOT NULL,
    expires_at REAL NOT NULL
)"""
_CLAIM = f"""
INSERT INTO {_TABLE} (key, state, token, expires_at) VALUES (?1, 'in_flight', ?2, ?3)
ON CONFLICT (key) DO UPDATE SET state = 'in_flight', token = ?2, expires_at = ?3
WHERE {_TABLE}.expires_at <= ?4
    OR ({_TABLE}.state = 'in_flight' AND {_TABLE}.token = ?2)"""
_STATE = f"SELECT state FROM {_TABLE} WHERE key = ?1 AND expires_at > ?2"
_COMPLETE = f"""
INSERT INTO {_TABLE} (key, state, token, expires_at) VALUES (?1, 'done', ?2, ?3)
ON CONFLICT (key) DO UPDATE SET state = 'done', token = ?2, expires_at = ?3
WHERE {_TABLE}.token = ?2 OR {_TABLE}.expires_at <= ?4"""
_RELEASE = f"DELETE FROM {_TABLE} WHERE key = ?1 AND token = ?2 AND state = 'in_flight'"
_PRUNE = f"DELETE FROM {_TABLE} WHERE expires_at <= ?1"


class SQLiteStore(SyncStore):
    """Idempotency store in a SQLite database file.

    Args:
        path: The database file (created with its table if missing). ``":memory:"``
            is refused: each thread would get its own empty database.
        timeout: Seconds to wait for another process's write lock before failing
            (the receiver then answers 503).
        prune_every: Delete expired rows once every this many claims (0: never; call
            :meth:`prune` yourself).
        clock: Current time in seconds; defaults to :func:`time.time`.

    Raises:
        ConfigurationError: ``path`` is ``":memory:"``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 5.0,
        prune_every: int = 1000,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if str(path) == ":memory:":
            raise ConfigurationError("SQLiteStore needs a file path; use MemoryStore for memory")
        self.path = Path(path)
        self._timeout = timeout
        self._prune_every = prune_every
        self._clock = clock
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._claims = 0

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.time()

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_SCHEMA)
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def create_schema(self) -> None:
        """Create the database file and its table now if missing (idempotent).

        Optional: every connection creates them on first use anyway.

        Raises:
            sqlite3.Error: The file cannot be created or opened.
        """
        self._connection()

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        now = self._now()
        connection = self._connection()
        if connection.execute(_CLAIM, (key, token, now + lease, now)).rowcount == 1:
            self._count_claim(connection, now)
            return ClaimState.NEW
        row = connection.execute(_STATE, (key, now)).fetchone()
        # No row: the holder released it between our two statements. Say in flight,
        # so the service retries instead of this caller racing the next claimer.
        return ClaimState.DONE if row is not None and row[0] == "done" else ClaimState.IN_FLIGHT

    def complete(self, key: str, token: str, retention: float) -> bool:
        now = self._now()
        cursor = self._connection().execute(_COMPLETE, (key, token, now + retention, now))
        return cursor.rowcount == 1

    def release(self, key: str, token: str) -> bool:
        return self._connection().execute(_RELEASE, (key, token)).rowcount == 1

    def prune(self) -> int:
        """Delete every expired row now; returns how many were deleted."""
        return self._connection().execute(_PRUNE, (self._now(),)).rowcount

    def close(self) -> None:
        """Close every connection this store opened (in any thread)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()

    def _count_claim(self, connection: sqlite3.Connection, now: float) -> None:
        if not self._prune_every:
            return
        with self._lock:
            self._claims += 1
            due = self._claims % self._prune_every == 0
        if due:
            connection.execute(_PRUNE, (now,))
