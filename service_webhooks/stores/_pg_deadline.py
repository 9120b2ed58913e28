"""PostgreSQL connections whose calls end by a deadline (psycopg 3 pools, sync and asyncio).

A server that stops answering without closing its connections (a frozen process, a
hung host) is not noticed by libpq, TCP keepalives or ``statement_timeout``: the kernel
keeps acknowledging. So every checkout here carries a deadline, ``timeout`` seconds
from the call's start, waiting for a connection included; a statement still running
then has its connection's socket shut down (by one watchdog thread for every sync
checkout, by a loop timer under asyncio), the call raises the owner's
:class:`TimeoutError`, and the pool discards that connection.

Under asyncio, callers queue for a pool's connections on an :class:`asyncio.Semaphore`
of the pool's ``max_size`` before asking the pool: a waiter there costs one future,
where psycopg_pool's own queue costs a task, a condition and a timeout handler per
waiter, and with more deliveries in flight than connections nearly every statement
waits. The semaphore is sized once, at the pool's first use here.

A pooled connection the server has ended while it sat idle (``idle_session_timeout``,
``pg_terminate_backend``, a restart or a failover) is discarded at checkout, and another
taken: such a server sends its reason and closes its end, so the idle socket is
readable, where a live idle connection has nothing to read. One ``poll`` with no wait,
not a round trip; at most the pool's size of connections is set aside per checkout (one
that would always look ended is then used as it is). Without the check, the next
statement on such a connection failed (503), and an endpoint quieter than the server's
idle timeout failed every delivery and retry.

Used by :class:`~service_webhooks.stores.PostgresStore` and
:class:`~service_webhooks.inbox.PostgresInbox`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import os
import select
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as error:  # pragma: no cover - depends on the environment
    from .._extras import missing_extra

    raise missing_extra(
        "postgres", "psycopg", "psycopg_pool", what="a PostgreSQL store or inbox", cause=error
    ) from error

from .._exceptions import ConfigurationError
from .._forking import after_fork_in_child
from ._per_loop import PerLoop
from ._url import redact_message

__all__ = ["Deadlines", "LoopPools", "connection_kwargs"]


class LoopPool:
    """An asyncio pool opened for the running event loop (one of a :class:`PerLoop`),
    and whether its first connection is made.

    The first call in a loop opens the pool and waits for that connection (at most the
    pool's ``timeout``); calls arriving meanwhile wait for the same, never asking the
    pool first. A statement that found the pool still connecting had it grow a second
    connection in the background, and a loop ending meanwhile (one delivery per
    ``asyncio.run``, pytest-asyncio's loop per test) cancelled that connect:
    psycopg_pool took the cancellation for a failed connect and scheduled another, its
    task never ended, and ``asyncio.run`` waited for it forever (measured: 1 run in 3 of
    40 such loops hung). Nor may anyone take the first connection before the opener's
    wait sees it, or the wait times out and psycopg_pool closes the pool.

    The opening runs in a task of its own, which every caller (the first one too)
    awaits shielded: a caller cancelled meanwhile (its client went away, a timeout
    around ``ahandle``) leaves it running, and the calls after it still wait for the
    first connection (they were handed the pool at once, still connecting).
    """

    __slots__ = ("_opening", "pool", "usable")

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        self.usable = False  # its first connection was made: use it without waiting
        self._opening: asyncio.Future[None] | None = None

    async def open(self, pools: PerLoop[LoopPool]) -> AsyncConnectionPool[Any]:
        """Open the pool, which ``pools`` holds for the running loop, and wait for its
        first connection.

        Raises:
            PoolTimeout: No connection within the pool's ``timeout``; psycopg_pool has
                closed the pool, so it is dropped from ``pools`` and the next call
                opens another (the calls waiting meanwhile raise it too).
        """
        self._opening = asyncio.ensure_future(self._open(pools))
        self._opening.add_done_callback(_retrieved)  # every caller may have gone
        return await self.ready()

    async def _open(self, pools: PerLoop[LoopPool]) -> None:
        try:
            await self.pool.open(wait=True, timeout=self.pool.timeout)
        except PoolTimeout:
            if pools.get() is self:  # not taken out (aclose) and replaced meanwhile
                await pools.pop()
            raise
        self.usable = True

    async def ready(self) -> AsyncConnectionPool[Any]:
        """The pool, once its first connection is made.

        Raises:
            PoolTimeout: The opening timed out.
        """
        if self._opening is not None:  # set by open() before anyone can see this
            try:
                await asyncio.shield(self._opening)
            except PoolTimeout as error:  # one exception per caller, not one shared
                raise PoolTimeout(str(error)) from None
        return self.pool

    async def close(self) -> None:
        """Close the pool (in its loop)."""
        await self.pool.close()


class LoopPools:
    """The asyncio pool of each event loop for one store or inbox: made by ``make`` on
    the loop's first call, ready once its first connection is (see :class:`LoopPool`),
    and closed in that loop when it shuts down (see :class:`PerLoop`) or by
    :meth:`aclose`.

    Args:
        make: A new, unopened pool (``open=False``).
        what: Names the pools in a log line when closing one fails.
    """

    __slots__ = ("_loops", "_make")

    def __init__(self, make: Callable[[], AsyncConnectionPool[Any]], what: str) -> None:
        self._make = make
        self._loops: PerLoop[LoopPool] = PerLoop(LoopPool.close, what)

    async def get(self) -> AsyncConnectionPool[Any]:
        """The running loop's pool, opened and with its first connection made.

        Raises:
            PoolTimeout: No connection within the pool's ``timeout`` (see
                :meth:`LoopPool.open`).
        """
        opened = self._loops.get()
        if opened is not None:
            return opened.pool if opened.usable else await opened.ready()
        opened = LoopPool(self._make())
        self._loops.add(opened)  # closed in this loop when it shuts down
        return await opened.open(self._loops)

    async def aclose(self) -> None:
        """Close the running loop's pool, if it has one (the next call opens another)."""
        opened = await self._loops.pop()
        if opened is not None:
            await opened.close()

    def forget(self) -> list[Any]:
        """Drop every loop's pool without closing it (see :meth:`PerLoop.forget`)."""
        return self._loops.forget()


def _retrieved(opening: asyncio.Future[None]) -> None:
    """Mark an opening's failure seen: no "exception was never retrieved" when every
    caller waiting for it was cancelled."""
    if not opening.cancelled():
        opening.exception()


def connection_kwargs(
    conninfo: str | None,
    timeout: float,
    statement_timeout: float | None,
    prepared_statements: bool = True,
) -> dict[str, Any]:
    """psycopg ``connect()`` arguments for a pool: autocommit, libpq's connect timeout
    (whole seconds) and ``tcp_user_timeout`` from ``timeout`` (unless ``conninfo`` sets
    one), the server-side ``statement_timeout`` added to the ``options`` that
    ``conninfo`` sets (``None``: the server's own), and no prepared statements when
    ``prepared_statements`` is false (a pooler in transaction mode: each statement may
    reach another server connection, where psycopg's prepared ones do not exist).

    Raises:
        ConfigurationError: ``conninfo`` is malformed, with libpq's reason, the
            password masked (it may quote it).
    """
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": max(2, math.ceil(timeout)),  # libpq's unit: whole seconds
    }
    if not prepared_statements:
        kwargs["prepare_threshold"] = None  # psycopg's switch: never prepare
    try:  # parsed now: a malformed conninfo fails here, not at the first delivery
        given = conninfo_to_dict(conninfo) if conninfo else {}
    except psycopg.ProgrammingError as error:
        reason = redact_message(str(error).strip(), conninfo or "")
        raise ConfigurationError(f"invalid PostgreSQL conninfo: {reason}") from None
    if statement_timeout is not None:
        options = str(given.get("options") or "")
        limit = f"-c statement_timeout={round(statement_timeout * 1000)}"
        kwargs["options"] = f"{options} {limit}".strip()
    if "tcp_user_timeout" not in given:
        kwargs["tcp_user_timeout"] = max(1, round(timeout * 1000))
    return kwargs


def _ended_by_server(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server ended this idle pooled connection: closed, or its socket
    readable (the server's last message, then end of file), asked without waiting."""
    if connection.closed:
        return True
    try:
        descriptor = connection.fileno()
    except psycopg.OperationalError:
        return True
    if hasattr(select, "poll"):  # any descriptor number, where select() stops at 1023
        poller = select.poll()
        poller.register(descriptor, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([descriptor], [], [], 0)[0])  # pragma: no cover - Windows


def _interrupt(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Shut the connection's socket down: a read blocked on it returns at once."""
    try:
        with socket.socket(fileno=os.dup(connection.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, psycopg.Error):
        pass  # already closed


class Deadlines:
    """Checkouts from psycopg pools, bounded by ``timeout`` seconds each.

    Args:
        timeout: Seconds a call may take in all, waiting for a connection included.
        timed_out: Makes the error a call past its deadline raises (it names the
            owner: the store or the inbox, and where its server is).
    """

    def __init__(self, timeout: float, timed_out: Callable[[], TimeoutError]) -> None:
        self.timeout = timeout
        self.timed_out = timed_out
        self._gates: weakref.WeakKeyDictionary[AsyncConnectionPool[Any], asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    @contextlib.contextmanager
    def connection(self, pool: ConnectionPool[Any]) -> Iterator[psycopg.Connection[Any]]:
        """A connection of ``pool`` whose statements are interrupted at the deadline.

        Raises:
            psycopg_pool.PoolTimeout: No connection was free within the timeout.
            TimeoutError: From ``timed_out``, when a statement outlived the deadline.
        """
        deadline = time.monotonic() + self.timeout
        connection = pool.getconn(max(0.0, deadline - time.monotonic()))
        for _ in range(pool.max_size):  # then as it is: never a loop until the deadline
            if not _ended_by_server(connection):
                break
            connection.close()
            pool.putconn(connection)  # closed: the pool opens another in its place
            connection = pool.getconn(max(0.0, deadline - time.monotonic()))
        try:
            with connection:  # as pool.connection(): commit, or roll back on an error
                watch = _WATCHDOG.watch(connection, deadline)
                try:
                    yield connection
                except psycopg.OperationalError as error:
                    if _WATCHDOG.unwatch(watch):
                        raise self.timed_out() from error
                    raise
                finally:
                    if _WATCHDOG.unwatch(watch):
                        connection.close()  # its socket is shut: the pool discards it
        finally:
            pool.putconn(connection)

    def aconnection(self, pool: AsyncConnectionPool[Any]) -> _Checkout:
        """Async twin of :meth:`connection` (``async with``)."""
        gate = self._gates.get(pool)
        if gate is None:
            gate = self._gates[pool] = asyncio.Semaphore(pool.max_size)
        return _Checkout(self, pool, gate)


class _Checkout:
    """``async with``: a pool connection whose statement is interrupted at the deadline
    by a loop timer. Written out rather than as an ``asynccontextmanager``: the
    generator costs about 4 µs a statement."""

    __slots__ = ("_connection", "_deadlines", "_fired", "_gate", "_pool", "_timer")
    _connection: psycopg.AsyncConnection[Any]
    _timer: asyncio.TimerHandle

    def __init__(
        self, deadlines: Deadlines, pool: AsyncConnectionPool[Any], gate: asyncio.Semaphore
    ) -> None:
        self._deadlines = deadlines
        self._pool = pool
        self._gate = gate
        self._fired = False

    async def __aenter__(self) -> psycopg.AsyncConnection[Any]:
        loop = asyncio.get_running_loop()
        timeout = self._deadlines.timeout
        deadline = loop.time() + timeout
        gate = self._gate
        if gate.locked():
            try:
                async with asyncio.timeout_at(deadline):
                    await gate.acquire()
            except TimeoutError:
                raise _not_free(timeout) from None
        else:
            await gate.acquire()
        try:
            connection = await self._pool.getconn(max(0.0, deadline - loop.time()))
            for _ in range(self._pool.max_size):  # as in the sync checkout
                if not _ended_by_server(connection):
                    break
                await connection.close()
                await self._pool.putconn(connection)  # the pool opens another instead
                connection = await self._pool.getconn(max(0.0, deadline - loop.time()))
        except PoolTimeout:  # the gate came at the deadline, the pool's connection not yet:
            gate.release()  # the same wait for one, said the same way
            raise _not_free(timeout) from None
        except BaseException:
            gate.release()
            raise
        self._connection = connection
        self._timer = loop.call_at(deadline, self._interrupt)
        return self._connection

    def _interrupt(self) -> None:
        self._fired = True
        _interrupt(self._connection)

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: Any
    ) -> None:
        self._timer.cancel()
        try:
            if self._fired:
                await self._connection.close()  # its socket is shut: the pool discards it
        finally:
            try:
                await self._pool.putconn(self._connection)
            finally:
                self._gate.release()
        if self._fired and isinstance(error, psycopg.OperationalError):
            raise self._deadlines.timed_out() from error


@dataclass(order=True)
class _Watch:
    deadline: float
    seq: int
    connection: Any = field(compare=False)
    active: bool = field(default=True, compare=False)
    fired: bool = field(default=False, compare=False)


class _Watchdog:
    """Interrupts sync statements still running at their deadline (one daemon thread)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[_Watch] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        after_fork_in_child(self._after_fork)

    def _after_fork(self) -> None:
        self._condition = threading.Condition()
        self._heap, self._thread = [], None

    def watch(self, connection: psycopg.Connection[Any], deadline: float) -> _Watch:
        watch = _Watch(deadline, next(self._seq), connection)
        with self._condition:
            heapq.heappush(self._heap, watch)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="service_webhooks-postgres-watchdog", daemon=True
                )
                self._thread.start()
            elif self._heap[0] is watch:
                self._condition.notify()
        return watch

    def unwatch(self, watch: _Watch) -> bool:
        """Stop watching; returns whether the watchdog interrupted the statement."""
        with self._condition:
            watch.active = False
            return watch.fired

    def _run(self) -> None:
        with self._condition:
            while True:
                heap = self._heap
                while heap and not heap[0].active:
                    heapq.heappop(heap)
                if not heap:
                    self._condition.wait()
                    continue
                wait = heap[0].deadline - time.monotonic()
                if wait > 0:
                    self._condition.wait(wait)
                    continue
                watch = heapq.heappop(heap)
                watch.active, watch.fired = False, True
                _interrupt(watch.connection)


_WATCHDOG = _Watchdog()


def _not_free(timeout: float) -> PoolTimeout:
    """The error of an async checkout that found no connection free by its deadline,
    whether it waited for its turn or for the pool's connection."""
    return PoolTimeout(f"no connection of the pool was free within {timeout:g} s")
