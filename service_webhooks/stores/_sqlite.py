"""SQLite idempotency store: the embedded default, durable across restarts.

Safe across threads (one connection per thread) and across processes on one machine
(WAL journal, a busy timeout, and claims made by one atomic ``INSERT … ON CONFLICT
DO UPDATE … WHERE expired OR renewed by its owner`` statement). Not for several
machines: use the Redis or PostgreSQL store there. Expired rows are pruned by
:meth:`SQLiteStore.prune` (the whole table) and, every ``prune_every`` claims, in the
next :data:`PRUNE_SLICE` keys of the table (a sweep that wraps around: bounded work
each time, and every row is looked at once every ``rows / PRUNE_SLICE`` prunes). Such a
step that fails (the file locked past ``timeout``) is logged and does not fail the
claim it followed, which is written.

Under asyncio (``aclaim``, ``acomplete``, ``arelease``, ``acomplete_with``,
``awrite``) no call blocks on the lock or hops to a thread. Each call is queued for its
event loop's next **group commit**: the first call of a turn of the loop schedules one
callback, which runs every call queued by then in one ``BEGIN IMMEDIATE`` … ``COMMIT``
on a connection of the loop's own, and a failure undoes that call's writes only (SQLite
backs out a failed statement by itself; a completion with its inbox record writes the
record first, so when the record fails nothing of the call is written, and when the
completion then fails its whole group fails), and settles each caller once the
transaction is committed.
A caller still learns that its claim or completion is written only once it is
committed; under load the deliveries in flight share a few commits instead of making two
each (through the ASGI adapter, measured: 3,860 -> 4,690-5,310 requests/s without an
inbox, 2,660 -> 3,100-4,070 with one). A call alone in its turn that is one write is
autocommitted.

That connection's busy timeout is 0, so a write lock held by another connection (another
process) refuses the group at once: each caller waits on the loop (``asyncio.sleep``,
from 0.5 ms doubling up to 50 ms) and queues again, up to ``timeout`` seconds in all.
(Handing a locked call to a worker thread instead, whose connection blocks, made a
pile-up: while that thread held the lock, the loop's next writes were refused too and
followed it.) While this store's own checkpoint is at work (its full step holds the
lock), a refused caller waits for that checkpoint to end instead, and queues again at
once: under load that cut the refused calls from about 140 to 30 per checkpoint, the
backoff's waits having outlasted the lock.

The loop's connection never checkpoints (``wal_autocheckpoint=0``): every
``CHECKPOINT_EVERY`` writes, a worker thread copies the WAL into the database file in two
steps. A passive checkpoint copies the bulk beside the loop's writes; a full one then
copies the few pages written meanwhile, holding the write lock for that copy and its
fsync (waiting at most ``CHECKPOINT_WAIT`` seconds for the lock or for a reader). The WAL
is then wholly in the database file, so the next write starts it over from its
beginning. (Passive checkpoints alone never catch up with writes that do not stop: the
WAL grew to 700 MB in a 10-second bench, and writing into a growing file and index cost
about a third more CPU per delivery.) A WAL that did grow is cut back to
``JOURNAL_SIZE_LIMIT`` bytes when it starts over.

The bounded prune step is queued like any call. A subclass that overrides ``claim``,
``complete``, ``complete_with``, ``write``, ``release`` or ``prune_step`` has its
override called, in a worker thread, by the async twin.

Schema (created on first use)::

    CREATE TABLE service_webhooks_idempotency (
        key        TEXT PRIMARY KEY,
        state      TEXT NOT NULL,   -- 'in_flight' or 'done'
        token      TEXT NOT NULL,   -- owner of the claim
        expires_at REAL NOT NULL    -- Unix seconds
    ) WITHOUT ROWID

A table without rowids is one B-tree ordered by key, so a claim or a completion writes
one page to the log instead of two (the rows and the key's index): measured 49 -> 40
µs of CPU and 91 -> 62 µs of wall time per claim plus completion. A file made by an
earlier version keeps its rowid table; every statement works on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from .._exceptions import ConfigurationError
from .._forking import after_fork_of, keep_inherited
from ._base import ClaimState, SyncStore, check_prune_every, check_timeout

__all__ = ["CHECKPOINT_EVERY", "DEFAULT_SQLITE_PATH", "PRUNE_SLICE", "SQLiteStore"]

CHECKPOINT_EVERY = 1000
"""Writes on an event loop's connection between two checkpoints (run in a worker thread)."""
CHECKPOINT_WAIT = 0.01
"""Seconds the full checkpoint waits for the write lock, or for a reader of an older
snapshot, before giving up until the next one (it holds the write lock while waiting for
a reader, so a long wait would stall every write)."""
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
"""Bytes a WAL file is cut back to when it starts over (``PRAGMA journal_size_limit``)."""

logger = logging.getLogger("service_webhooks")

T = TypeVar("T")

DEFAULT_SQLITE_PATH = "service_webhooks.sqlite3"
"""The store (and inbox) used when none is given: a SQLite file in the working directory."""

_TABLE = "service_webhooks_idempotency"
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    token TEXT NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID"""
_CLAIM = f"""
INSERT INTO {_TABLE} (key, state, token, expires_at) VALUES (?, 'in_flight', ?, ?)
ON CONFLICT (key) DO UPDATE SET state = 'in_flight', token = excluded.token,
    expires_at = excluded.expires_at
WHERE {_TABLE}.expires_at <= ?
    OR ({_TABLE}.state = 'in_flight' AND {_TABLE}.token = excluded.token)"""
_STATE = f"SELECT state FROM {_TABLE} WHERE key = ? AND expires_at > ?"
_COMPLETE = f"""
INSERT INTO {_TABLE} (key, state, token, expires_at) VALUES (?, 'done', ?, ?)
ON CONFLICT (key) DO UPDATE SET state = 'done', token = excluded.token,
    expires_at = excluded.expires_at
WHERE {_TABLE}.token = excluded.token OR {_TABLE}.expires_at <= ?"""
_RELEASE = f"DELETE FROM {_TABLE} WHERE key = ? AND token = ? AND state = 'in_flight'"
_PRUNE = f"DELETE FROM {_TABLE} WHERE expires_at <= ?"
PRUNE_SLICE = 2000
"""Keys one periodic prune looks at: a range of the key's B-tree after the previous
one (wrapping around), so that its work and its hold on the write lock stay bounded
however large the table grows (72 hours of keys at the default retention)."""
_SLICE_END = f"SELECT max(key) FROM (SELECT key FROM {_TABLE} WHERE key > ? ORDER BY key LIMIT ?)"
_PRUNE_RANGE = f"DELETE FROM {_TABLE} WHERE key > ? AND key <= ? AND expires_at <= ?"
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_FIRST_RETRY = 0.0005  # seconds the loop waits before trying a locked write again
_LONGEST_RETRY = 0.05  # the wait doubles up to this
# methods whose override by a subclass its async twin calls in a worker thread
_TWINS = ("claim", "complete", "complete_with", "write", "release", "prune_step")
_TRANSACTIONAL = frozenset({"_complete_with"})  # writes twice: alone, in a transaction


_Queued = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]
"""One store call waiting for its event loop's group commit: work, its arguments, and
the caller's future."""


class _Failed(NamedTuple):
    """A queued call's exception (its writes were undone)."""

    error: Exception


class SQLiteStore(SyncStore):
    """Idempotency store in a SQLite database file.

    Args:
        path: The database file (created with its table if missing). ``":memory:"``
            is refused: each thread would get its own empty database.
        timeout: Seconds to wait for another process's write lock before failing
            (the receiver then answers 503).
        prune_every: Once every this many claims, delete the expired rows among the
            next :data:`PRUNE_SLICE` keys (0: never; call :meth:`prune` yourself).
        clock: Current time in seconds; defaults to :func:`time.time`.

    Raises:
        ConfigurationError: ``path`` is ``":memory:"``, ``timeout`` is not a finite
            number of seconds >= 0, or ``prune_every`` is not an ``int`` >= 0.
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
        check_timeout("timeout", timeout, zero=True)
        check_prune_every(prune_every)
        self.path = Path(path)
        self.timeout = timeout  # seconds; the inbox in its file waits as long
        self._prune_every = prune_every
        self._clock = clock
        self._local = threading.local()
        self._connections: list[Connection] = []
        close_when_collected(self, self._connections)
        self._loop_connections: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Connection] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when no call is at work
        self._running = 0  # calls at work on a connection, in any thread or event loop
        self._closing = 0  # close() calls waiting for them
        self._prune_cursor = ""  # prune_step sweeps the keys after this one
        self._checkpointer: Connection | None = None  # a worker thread's, at a time
        self._checkpointing = threading.Lock()
        self._groups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Queued]] = (
            weakref.WeakKeyDictionary()
        )
        self._checkpoints: set[asyncio.Future[None]] = set()
        self._claims = 0
        self._loop_writes = 0
        # a subclass that overrides a sync method keeps it under asyncio (in a thread)
        self._overridden = frozenset(
            name for name in _TWINS if getattr(type(self), name) is not getattr(SQLiteStore, name)
        )
        after_fork_of(self, type(self)._after_fork)  # gunicorn --preload, prefork pools

    def _after_fork(self) -> None:
        """In a forked child: leave the parent's connections (:func:`leave_inherited`),
        open new ones on first use, and make new locks (another thread may have held one,
        or been checkpointing, at the fork: it would stay held for ever)."""
        inherited = self._connections[:]  # the loop connections and checkpointer too
        self._connections.clear()  # the same list: close_when_collected() holds it
        at_work = [self._checkpointer] if self._checkpointing.locked() else []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0  # a call at work in another thread at the fork never ends here
        self._closing = 0
        self._checkpointing = threading.Lock()
        self._local = threading.local()
        self._loop_connections = weakref.WeakKeyDictionary()
        self._checkpointer = None
        self._groups = weakref.WeakKeyDictionary()
        self._checkpoints = set()
        leave_inherited(inherited, at_work)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.time()

    def _open(self, timeout: float) -> Connection:
        connection = connect(
            self.path, timeout, (f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}", _SCHEMA)
        )
        if not writable(self.path):  # SQLite opened it read-only: see writable()
            connection.close()
            raise sqlite3.OperationalError(
                f"attempt to write a readonly database: {self.path} is not writable"
            )
        with self._lock:
            self._connections.append(connection)
        return connection

    def _connection(self) -> Connection:
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is not None and moved(connection):  # see moved(): open the path again
            self._local.connection = None
            self._forget(connection)
            connection = None
        if connection is None:
            connection = self._local.connection = self._open(self.timeout)
            close_with_thread(self._local, connection, self._connections)
        return connection

    def _sync(self, work: Callable[..., T], *args: Any) -> T:
        """``work(connection, *args)`` on this thread's connection. A connection that
        cannot write (:func:`cannot_write`) is closed and forgotten, so the next call
        opens the file again and writes once the file (or its file system) is writable
        again, with no restart."""
        with self._lock:  # at work until it ends: close() waits for it
            self._running += 1
        try:
            connection = self._connection()
            connection.at_work += 1
            try:
                return work(connection, *args)
            except sqlite3.OperationalError as error:
                if cannot_write(error):
                    self._local.connection = None
                    self._forget(connection)
                raise
            finally:
                connection.at_work -= 1
        finally:
            self._done()

    def _done(self) -> None:
        """A call at work on a connection ended; the last one wakes a waiting
        :meth:`close` (a connection closed under a statement of another thread, or of
        the event loop's group commit, crashes the process). Two plain lock turns a
        call, no notification unless close() waits."""
        with self._lock:
            self._running -= 1
            if self._closing and not self._running:
                self._idle.notify_all()

    def _forget(self, connection: Connection) -> None:
        """Close ``connection`` (no longer in use) and stop tracking it."""
        with self._lock:
            if connection in self._connections:
                self._connections.remove(connection)
        connection.close()

    def _loop_connection(self) -> Connection:
        """The running event loop's own connection: it never waits for a lock."""
        loop = asyncio.get_running_loop()
        connection = self._loop_connections.get(loop)
        if connection is not None and moved(connection):  # see moved(): open the path again
            del self._loop_connections[loop]
            self._forget(connection)
            connection = None
        if connection is None:
            connection = self._open(0)
            connection.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints: in a thread
            self._loop_connections[loop] = connection
            weakref.finalize(loop, _drop, connection, self._connections).atexit = False
        return connection

    async def _twin(self, name: str, work: Callable[..., T], *args: Any) -> T:
        """The async twin of the sync method ``name``: ``work(connection, *args)`` on the
        loop's connection, or ``name`` itself in a worker thread when a subclass
        overrides it."""
        if name in self._overridden:
            method: Callable[..., T] = getattr(self, name)
            return await asyncio.to_thread(method, *args)
        return await self._on_loop(work, *args)

    async def _on_loop(self, work: Callable[..., T], *args: Any) -> T:
        """``work(connection, *args)`` on the loop's connection, in its next group
        commit (:meth:`_commit_group`), once that is committed. While another
        connection holds the write lock (nothing was written), wait on the loop, never
        blocking it, and queue again: up to ``timeout`` seconds in all, as a blocking
        connection would."""
        delay = _FIRST_RETRY
        deadline = None
        while True:
            try:
                return await self._in_group(work, args)
            except sqlite3.OperationalError as error:
                if not _busy(error):
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.timeout
                elif now >= deadline:
                    raise
                checkpoint = self._checkpoint_at_work()
                if checkpoint is not None:
                    # this store's own checkpoint holds the lock (its full step): go on
                    # the moment it is done rather than after a guessed wait
                    await asyncio.wait((checkpoint,), timeout=deadline - now)
                    continue
                await asyncio.sleep(min(delay, deadline - now))
                delay = min(delay * 2, _LONGEST_RETRY)

    def _checkpoint_at_work(self) -> asyncio.Future[None] | None:
        """The running loop's checkpoint still at work in its thread, if any."""
        loop = asyncio.get_running_loop()
        for checkpoint in self._checkpoints:
            if checkpoint.get_loop() is loop and not checkpoint.done():
                return checkpoint
        return None

    def _in_group(self, work: Callable[..., T], args: tuple[Any, ...]) -> asyncio.Future[T]:
        """Queue ``work(connection, *args)`` for the loop's next group commit."""
        loop = asyncio.get_running_loop()
        group = self._groups.get(loop)
        if group is None:
            group = self._groups[loop] = []
            loop.call_soon(self._commit_group, loop, group)
        future: asyncio.Future[T] = loop.create_future()
        group.append((work, args, future))
        return future

    def _commit_group(self, loop: asyncio.AbstractEventLoop, group: list[_Queued]) -> None:
        """Run the queued work in one transaction, a failure undoing that call's own
        writes only, and settle each caller's future once the transaction is committed:
        one commit, and one lock, for every store call that deliveries made in one turn
        of the event loop.

        A caller cancelled before its turn has nothing written. When the transaction
        cannot start (another connection's write lock: ``SQLITE_BUSY``) or cannot
        commit, or an error made SQLite roll the whole transaction back (a full disk,
        an I/O error), every caller gets that error and nothing of the group is written.
        """
        if self._groups.get(loop) is group:
            del self._groups[loop]
        group = [queued for queued in group if not queued[2].cancelled()]
        if not group:
            return
        try:
            results = self._run_group(group)
        except Exception as error:  # nothing of the group was written
            results = [_Failed(error)] * len(group)
        except BaseException:
            for _, _, future in group:
                future.cancel()
            raise
        if any(isinstance(result, _Failed) and cannot_write(result.error) for result in results):
            connection = self._loop_connections.pop(loop, None)  # opened again at the next call
            if connection is not None:
                self._forget(connection)
        for (_, _, future), result in zip(group, results, strict=True):
            if future.cancelled():
                continue  # cancelled while its work was committed: nothing to tell
            if isinstance(result, _Failed):
                future.set_exception(result.error)
            else:
                future.set_result(result)
        before = self._loop_writes
        self._loop_writes += len(group)
        if before // CHECKPOINT_EVERY != self._loop_writes // CHECKPOINT_EVERY:
            checkpoint = loop.run_in_executor(None, self._checkpoint)
            self._checkpoints.add(checkpoint)  # a reference until it is done
            checkpoint.add_done_callback(self._checkpoints.discard)

    def _run_group(self, group: list[_Queued]) -> list[Any]:
        """Each queued work's result (or :class:`_Failed`), all committed.

        Raises:
            sqlite3.Error: The transaction could not start or commit; it is rolled back.
        """
        with self._lock:  # at work until it ends: close() waits for it
            self._running += 1
        try:
            connection = self._loop_connection()
            connection.at_work += 1
            try:
                return self._run_group_on(connection, group)
            finally:
                connection.at_work -= 1
        finally:
            self._done()

    def _run_group_on(self, connection: Connection, group: list[_Queued]) -> list[Any]:
        if len(group) == 1:
            work, args, _ = group[0]
            try:
                if work.__name__ not in _TRANSACTIONAL:
                    return [work(connection, *args)]  # one statement: autocommitted
                with _transaction(connection):
                    return [work(connection, *args)]
            except Exception as error:
                return [_Failed(error)]
        results: list[Any] = []
        with _transaction(connection):
            for work, args, _ in group:
                try:
                    results.append(work(connection, *args))
                except Exception as error:
                    if not connection.in_transaction:
                        raise  # the whole transaction was rolled back (disk full, I/O)
                    results.append(_Failed(error))  # SQLite backed the failed statement out
        return results

    def _checkpoint(self) -> None:
        """Copy the WAL into the database file so that the next write starts it over;
        a failure is logged (the writes it follows are committed)."""
        if not self._checkpointing.acquire(blocking=False):
            return  # the previous one is still at work
        try:
            connection = self._checkpointer
            if connection is not None and moved(connection):
                self._forget(connection)
                connection = self._checkpointer = None
            if connection is None:
                connection = self._checkpointer = self._open(CHECKPOINT_WAIT)
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the bulk, beside writes
            connection.execute("PRAGMA wal_checkpoint(FULL)")  # the rest, under the lock
        except sqlite3.Error as error:
            logger.warning("service_webhooks: SQLite checkpoint of %s failed: %s", self.path, error)
            if cannot_write(error) and self._checkpointer is not None:
                self._forget(self._checkpointer)  # opened again at the next checkpoint
                self._checkpointer = None
        finally:
            self._checkpointing.release()

    def create_schema(self) -> None:
        """Create the database file and its table now if missing (idempotent).

        Optional: every connection creates them on first use anyway.

        Raises:
            sqlite3.Error: The file cannot be created or opened.
        """
        self._connection()

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        state = self._sync(self._claim, key, token, lease)
        if state is ClaimState.NEW and self._prune_due():
            try:
                self.prune_step()
            except sqlite3.Error as error:
                self._prune_failed(error)
        return state

    def _prune_failed(self, error: sqlite3.Error) -> None:
        """Log a periodic prune step that failed: the claim before it is written, and
        failing it would leave its key in flight, unanswered, for a whole lease."""
        logger.warning("service_webhooks: SQLite prune step of %s failed: %s", self.path, error)

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        if "claim" in self._overridden:  # the override prunes, as claim does
            return await asyncio.to_thread(self.claim, key, token, lease)
        state = await self._on_loop(self._claim, key, token, lease)
        if state is ClaimState.NEW and self._prune_due():  # bounded work: on the loop
            try:
                await self._twin("prune_step", self._prune_step)
            except sqlite3.Error as error:
                self._prune_failed(error)
        return state

    def _claim(
        self, connection: sqlite3.Connection, key: str, token: str, lease: float
    ) -> ClaimState:
        now = self._now()
        if connection.execute(_CLAIM, (key, token, now + lease, now)).rowcount == 1:
            return ClaimState.NEW
        row = connection.execute(_STATE, (key, now)).fetchone()
        # No row: the holder released it between our two statements. Say in flight,
        # so the service retries instead of this caller racing the next claimer.
        return ClaimState.DONE if row is not None and row[0] == "done" else ClaimState.IN_FLIGHT

    def complete(self, key: str, token: str, retention: float) -> bool:
        return self._sync(self._complete, key, token, retention)

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        return await self._twin("complete", self._complete, key, token, retention)

    def _complete(
        self, connection: sqlite3.Connection, key: str, token: str, retention: float
    ) -> bool:
        now = self._now()
        cursor = connection.execute(_COMPLETE, (key, token, now + retention, now))
        return cursor.rowcount == 1

    def complete_with(
        self, key: str, token: str, retention: float, statement: str, params: Sequence[Any]
    ) -> bool:
        """:meth:`complete`, and one more statement on this file, in one transaction.

        Both rows are written or neither is (``BEGIN IMMEDIATE`` … ``COMMIT``: one
        commit). The receiver writes a processed delivery's inbox record this way
        when the inbox is in this store's file.

        Args:
            key: The idempotency key, as for :meth:`complete`.
            token: The caller's claim token.
            retention: Seconds the completed key is kept.
            statement: One SQL statement (``?`` placeholders) on this database.
            params: Its parameters.

        Returns:
            What :meth:`complete` returns: ``False`` when another claim owns ``key``.

        Raises:
            sqlite3.Error: Either statement failed; nothing was written.
        """
        return self._sync(self._complete_with_alone, key, token, retention, statement, params)

    def _complete_with_alone(
        self,
        connection: sqlite3.Connection,
        key: str,
        token: str,
        retention: float,
        statement: str,
        params: Sequence[Any],
    ) -> bool:
        with _transaction(connection):
            return self._complete_with(connection, key, token, retention, statement, params)

    async def acomplete_with(
        self, key: str, token: str, retention: float, statement: str, params: Sequence[Any]
    ) -> bool:
        """Async twin of :meth:`complete_with`."""
        return await self._twin(
            "complete_with", self._complete_with, key, token, retention, statement, params
        )

    def _complete_with(
        self,
        connection: sqlite3.Connection,
        key: str,
        token: str,
        retention: float,
        statement: str,
        params: Sequence[Any],
    ) -> bool:
        # The statement first: when it fails, SQLite backs it out and this call has
        # written nothing, so a group needs no savepoint around it. The completion can
        # fail only as the database does (full, I/O): the statement is written by then,
        # and only the whole transaction undoes it (its group fails).
        connection.execute(statement, params)
        now = self._now()
        try:
            return connection.execute(_COMPLETE, (key, token, now + retention, now)).rowcount == 1
        except sqlite3.Error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def write(self, statement: str, params: Sequence[Any], *, wait: bool = True) -> int:
        """Run one more statement on this file, on the store's own connection.

        The receiver writes the inbox records of the answers that complete no key (a
        duplicate, a handler failure, an unhandled event…) this way when the inbox is
        in this store's file: under asyncio (:meth:`awrite`) they join the store's
        group commit instead of taking a worker thread and a connection of their own
        that would contend with it for the write lock.

        Args:
            statement: One SQL statement (``?`` placeholders) on this database.
            params: Its parameters.
            wait: Wait up to ``timeout`` seconds for another connection's write lock
                (the default); ``False`` tries once. The receiver tries once to record
                an answer that this store itself failed to give: it has just waited
                its ``timeout`` for that lock, and a second wait would take the answer
                past the service's 10 s response wait (spec §3.3).

        Returns:
            The number of rows it changed.

        Raises:
            sqlite3.Error: It failed; nothing was written.
        """
        return self._sync(self._write if wait else self._write_once, statement, params)

    def _write_once(
        self, connection: sqlite3.Connection, statement: str, params: Sequence[Any]
    ) -> int:
        connection.execute("PRAGMA busy_timeout=0")
        try:
            return self._write(connection, statement, params)
        finally:
            connection.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")

    async def awrite(self, statement: str, params: Sequence[Any], *, wait: bool = True) -> int:
        """Async twin of :meth:`write`: queued for the loop's next group commit."""
        if wait or "write" in self._overridden:
            return await self._twin("write", self._write, statement, params)
        return await self._in_group(self._write, (statement, params))

    def _write(self, connection: sqlite3.Connection, statement: str, params: Sequence[Any]) -> int:
        return connection.execute(statement, params).rowcount

    def release(self, key: str, token: str) -> bool:
        return self._sync(self._release, key, token)

    async def arelease(self, key: str, token: str) -> bool:
        return await self._twin("release", self._release, key, token)

    def _release(self, connection: sqlite3.Connection, key: str, token: str) -> bool:
        return connection.execute(_RELEASE, (key, token)).rowcount == 1

    def prune(self) -> int:
        """Delete every expired row now (one scan of the whole table); returns how
        many were deleted."""
        return self._sync(self._prune)

    def _prune(self, connection: sqlite3.Connection) -> int:
        return connection.execute(_PRUNE, (self._now(),)).rowcount

    def prune_step(self) -> int:
        """Delete the expired rows among the next :data:`PRUNE_SLICE` keys after the
        previous step's (from the first key again past the last); returns how many
        were deleted. What a receiver runs every ``prune_every`` claims."""
        return self._sync(self._prune_step)

    def _prune_step(self, connection: sqlite3.Connection) -> int:
        start = self._prune_cursor
        (end,) = connection.execute(_SLICE_END, (start, PRUNE_SLICE)).fetchone()
        if end is None:  # past the last key: the next step starts from the first
            self._prune_cursor = ""
            return 0
        self._prune_cursor = end
        return connection.execute(_PRUNE_RANGE, (start, end, self._now())).rowcount

    def ping(self) -> None:
        """:meth:`create_schema` under the name the Redis and PostgreSQL stores use for
        the same check: a path that cannot be opened fails here, at once, instead of as
        a 503 on the first delivery.

        Raises:
            sqlite3.Error: The file cannot be opened or created (a missing directory,
                no permission, not a database), or stays locked for ``timeout``
                seconds.
        """
        self.create_schema()

    def close(self) -> None:
        """Close every connection this store opened (in any thread).

        A checkpoint at work in a worker thread, and calls at work in other threads
        or in an event loop's group commit (:func:`asyncio.to_thread` from
        ``receiver.aclose()`` while cancelled deliveries release their claims), are let
        finish first: a connection closed under one could crash the process."""
        with self._checkpointing, self._idle:
            self._closing += 1
            try:
                self._idle.wait_for(lambda: not self._running)
            finally:
                self._closing -= 1
            connections = self._connections[:]
            self._connections.clear()
            # the next call opens new connections, not these being closed
            self._local = threading.local()
            self._loop_connections = weakref.WeakKeyDictionary()
            self._checkpointer = None
            for connection in connections:
                connection.close()

    def _prune_due(self) -> bool:
        if not self._prune_every:
            return False
        with self._lock:
            self._claims += 1
            return self._claims % self._prune_every == 0


def connect(path: str | os.PathLike[str], timeout: float, setup: Iterable[str] = ()) -> Connection:
    """A connection to ``path`` for the store and the inbox: autocommit, usable from any
    thread, WAL journal, ``synchronous=NORMAL``, waiting up to ``timeout`` seconds for
    another connection's lock; then ``setup`` run on it. Closed again when any of that
    fails.

    Switching a file to WAL needs its exclusive lock, and SQLite refuses that at once
    (``SQLITE_BUSY``) while another connection holds the write lock, without calling
    the busy handler; so connections opened together on a new file (the threads of a
    server starting) would fail with "database is locked" whatever their timeout. The
    switch is retried instead (0.5 ms, doubling up to 50 ms) for up to ``timeout``
    seconds. Once the file is in WAL mode the statement takes no such lock.

    Raises:
        sqlite3.Error: The file cannot be opened, is still locked after ``timeout``
            seconds, or a ``setup`` statement failed.
    """
    connection = sqlite3.connect(
        path, timeout=timeout, isolation_level=None, check_same_thread=False, factory=Connection
    )
    connection.where = os.path.abspath(path)
    connection.file = _file_id(connection.where)
    connection.next_look = time.monotonic() + MOVED_LOOK_EVERY  # just looked
    try:
        deadline = time.monotonic() + timeout
        delay = _FIRST_RETRY
        while True:
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as error:
                if not _busy(error) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, _LONGEST_RETRY)
        connection.execute("PRAGMA synchronous=NORMAL")
        for statement in setup:
            connection.execute(statement)
    except BaseException:
        connection.close()
        raise
    return connection


class Connection(sqlite3.Connection):
    """A connection of the store or the inbox: it knows the process that opened it
    (``pid``) and how many calls are at work on it (``at_work``), for a forked child
    (see :func:`leave_inherited`)."""

    __slots__ = ("at_work", "file", "next_look", "pid", "where")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pid = os.getpid()
        self.at_work = 0
        self.where = ""  # the file's absolute path, and its (device, inode) when opened:
        self.file: tuple[int, int] | None = None  # set by connect(), for moved()
        self.next_look = 0.0  # time.monotonic() from which moved() looks again


def leave_inherited(
    connections: Iterable[Connection], at_work: Iterable[Connection | None] = ()
) -> None:
    """In a forked child, give up ``connections``, its copies of the parent's.

    SQLite must never use a connection in a process other than the one that opened
    it. It also keeps what each process holds of a file's locks in one record per
    process, shared by every connection to the file: while a copy stays open there, the
    child's own connections believe they hold the parent's locks and take none from the
    system, so the parent, closing its last connection, took the child for gone,
    copied the WAL into the file and deleted it under the child, whose next writes were
    lost. So a copy that no call was at work on at the fork is closed here (that
    releases nothing of the parent's: its locks are its own process's, and it still
    holds the file open). A copy that one was at work on (another thread's, in a
    transaction or in the middle of a statement, or one of ``at_work``: the
    checkpoint's while its lock was held) is kept referenced for ever: closing it
    would roll back, in the WAL index both processes share, a write the parent is
    making. The child then shares its record of locks (see docs/scaling.md)."""
    busy = {id(connection) for connection in at_work}
    for connection in connections:
        if connection.pid == os.getpid():
            continue
        try:
            idle = id(connection) not in busy and not connection.at_work
            idle = idle and not connection.in_transaction
        except sqlite3.ProgrammingError:  # closed already
            continue
        if idle:
            connection.close()
        else:
            keep_inherited([connection])


def close_when_collected(owner: object, connections: list[Connection]) -> None:
    """Close ``connections`` (the list ``owner`` keeps its open connections in, the same
    list object for its whole life) once ``owner`` is garbage-collected without having
    been closed, as collecting them alone did before Python 3.13 (which reports a
    connection collected open with a ``ResourceWarning``). Closing stays optional: a
    receiver made with ``store="sqlite:…"`` and dropped leaves nothing open. Not run at
    interpreter exit, where a thread may still be using a connection."""
    weakref.finalize(owner, _close_all, connections).atexit = False


class _ThreadEnd:
    """Kept in a thread's ``threading.local`` beside its connection: collected when the
    thread ends (or the ``threading.local`` is replaced), which closes that connection."""

    __slots__ = ("__weakref__",)


def close_with_thread(
    local: threading.local, connection: Connection, connections: list[Connection]
) -> None:
    """Close ``connection`` (this thread's, kept in ``local``) and drop it from
    ``connections`` once this thread ends. Without it a server that starts a thread per
    request (``flask run``, Django's ``runserver``) would keep one open connection per
    request it served: a file descriptor or two each, and the connection's page cache."""
    local.thread_end = end = _ThreadEnd()
    weakref.finalize(end, _drop, connection, connections).atexit = False


def _drop(connection: Connection, connections: list[Connection]) -> None:
    """Close ``connection`` and stop tracking it. Run by the garbage collector, at any
    point of any thread: it takes no lock (one held by that thread would never be
    released); a connection already dropped or closed is left as it is, and so is a
    forked child's copy of its parent's (see :func:`leave_inherited`: the thread that
    opened it is gone in the child, whose fork hook has not run yet)."""
    if connection.pid != os.getpid():
        return
    with contextlib.suppress(ValueError):
        connections.remove(connection)
    connection.close()


def _close_all(connections: list[Connection]) -> None:
    for connection in connections:
        if connection.pid == os.getpid():  # a forked child's copies: leave_inherited()
            connection.close()
    connections.clear()


def writable(path: str | os.PathLike[str]) -> bool:
    """Whether this process may write ``path`` now. SQLite opens a file it may not
    write (a read-only file or file system, no permission) read-only, without a word,
    and that connection stays read-only after the file became writable; in WAL mode
    every connection of the process to the file opened meanwhile is read-only too while
    it is open (they share its ``-shm`` mapping). So a store or inbox keeps no
    connection opened while this was ``False``."""
    return os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids)


def _file_id(path: str) -> tuple[int, int] | None:
    """The device and inode of the file at ``path``, or ``None`` when it cannot be read."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


MOVED_LOOK_EVERY = 1.0
"""Seconds between two looks of :func:`moved` at one connection's path: a file deleted
while open is noticed within that time, at no ``stat`` per call."""


def moved(connection: Connection) -> bool:
    """Whether the file ``connection`` opened is no longer at its path: deleted, or
    replaced by another file (a restored backup, a file moved over it). In WAL mode
    SQLite goes on reading and writing the file it opened, which no connection opened
    after the change sees (another thread's, another process's, the CLI's, the next
    start's) and which is gone once the process ends: such a connection is to be closed
    and the path opened again (which makes the file anew when it is missing). Logged at
    WARNING. One ``stat`` call, at most every :data:`MOVED_LOOK_EVERY` seconds per
    connection (about 1.5 µs each: once per store call would be two per delivery); a path
    that cannot be looked at now (no permission) is taken as unchanged, and so is a
    connection :func:`connect` did not open."""
    opened = getattr(connection, "file", None)
    if opened is None:
        return False
    now = time.monotonic()
    if now < connection.next_look:
        return False
    connection.next_look = now + MOVED_LOOK_EVERY
    try:
        found = os.stat(connection.where)
    except FileNotFoundError:
        found = None
    except OSError:
        return False
    if found is not None and (found.st_dev, found.st_ino) == opened:
        return False
    logger.warning(
        "service_webhooks: SQLite file %s was %s while open: opening the file now at"
        " that path (what was written to the old one since is not in it)",
        connection.where,
        "deleted" if found is None else "replaced",
    )
    return True


def cannot_write(error: Exception) -> bool:
    """Whether ``error`` says that its connection cannot write (``SQLITE_READONLY``,
    extended codes too: a file that became read-only after :func:`writable` said it was
    not; one moved away in rollback-journal mode, which WAL mode does not notice, see
    :func:`moved`): only a new connection can write again."""
    code = getattr(error, "sqlite_errorcode", 0)
    return isinstance(error, sqlite3.Error) and code & 0xFF == sqlite3.SQLITE_READONLY


def _busy(error: sqlite3.OperationalError) -> bool:
    """Whether ``error`` says another connection holds the lock (extended codes too;
    the code is absent when Python raised it)."""
    return getattr(error, "sqlite_errorcode", 0) & 0xFF in _BUSY


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; ``ROLLBACK`` when the block or the commit
    raises (and the transaction is still open: some errors make SQLite roll it back
    itself)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
        connection.execute("COMMIT")  # a refused commit (a deferred constraint) rolls back
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
