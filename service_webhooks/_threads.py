"""Long-lived threads for plain-function handlers under ``aprocess``.

A sync handler must never run on the event loop (it may block), so ``aprocess`` runs
it on a thread. :func:`asyncio.to_thread` does that through the loop's default
executor at a cost of tens of microseconds per call (futures chained across two
libraries, an executor-wide lock, a work item per call). This pool hands a call to an
idle long-lived thread over one :class:`queue.SimpleQueue` and settles asyncio futures
from a per-loop list that one ``call_soon_threadsafe`` drains: the results that finish
before the loop gets to them share one wake-up (a write to the loop's self-pipe).
Measured about 2.3x cheaper per hop than ``to_thread`` one call at a time, and, with
32 calls in flight, 30 -> 9-14 µs of CPU per hop from sharing the wake-ups.

Blocking handlers stay safe: every call gets a thread of its own while one is idle,
and a new thread is started when none is (up to :data:`MAX_THREADS`; past that, calls
wait their turn, as with an executor). The caller's context variables are copied to
the thread (as :func:`asyncio.to_thread` does), so tracing spans see their parent.

A caller cancelled (a timeout, a server shutting down) while its call still waits for a
thread drops the call: the receiver releases the handler's claim at once, so the call
must not run later behind the retry's back. A call that a thread already runs cannot be
interrupted; it runs to its end while the caller's cancellation goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._forking import after_fork_in_child

__all__ = ["MAX_THREADS", "ToThread", "run_in_thread"]

MAX_THREADS = 32
"""Most threads the pool starts (each blocked handler holds one)."""

T = TypeVar("T")

ToThread = Callable[[Callable[[Any], Any], Any], Awaitable[Any]]
"""``await to_thread(function, argument)``: ``function(argument)`` run off the event loop
(:func:`run_in_thread`, :func:`asyncio.to_thread`, or a framework's own, such as the
Django adapter's)."""

_Work = tuple[
    contextvars.Context, Callable[[Any], Any], Any, asyncio.AbstractEventLoop, "asyncio.Future[Any]"
]


class _Pool:
    def __init__(self, max_threads: int) -> None:
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work that no caller has counted on yet
        self._threads = 0
        self._max = max_threads
        # results waiting for their loop to run _drain, per loop
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[Any, Any, Any]]] = {}

    async def run(self, function: Callable[[Any], T], argument: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            if self._idle:
                self._idle -= 1  # that thread is ours
            elif self._threads < self._max:
                self._threads += 1
                threading.Thread(
                    target=self._work, name="service-webhooks-handler", daemon=True
                ).start()
        self._queue.put((contextvars.copy_context(), function, argument, loop, future))
        return await future

    def _work(self) -> None:
        while True:
            context, function, argument, loop, future = self._queue.get()
            if future.cancelled():  # its caller was cancelled while the call waited
                with self._lock:
                    self._idle += 1
                continue
            try:
                result = context.run(function, argument)
            except BaseException as error:  # handed to the awaiting task, as to_thread does
                self._settle(loop, _fail, future, error)
            else:
                self._settle(loop, _succeed, future, result)
            with self._lock:
                self._idle += 1

    def _settle(
        self,
        loop: asyncio.AbstractEventLoop,
        settle: Callable[[asyncio.Future[Any], Any], None],
        future: asyncio.Future[Any],
        value: Any,
    ) -> None:
        """Hand a result to its loop: one wake-up for the results that finish before
        the loop gets to them (each wake-up is a write to the loop's self-pipe)."""
        with self._lock:
            pending = self._pending.get(loop)
            wake = pending is None  # the first since the loop last drained: wake it
            if pending is None:
                for closed in [other for other in self._pending if other.is_closed()]:
                    del self._pending[closed]  # closed before its drain ran: nobody waits
                pending = self._pending[loop] = []
            pending.append((settle, future, value))
        if wake:
            try:
                loop.call_soon_threadsafe(self._drain, loop)
            except RuntimeError:  # the loop closed meanwhile: nobody waits
                with self._lock:
                    self._pending.pop(loop, None)

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            pending = self._pending.pop(loop, [])
        for settle, future, value in pending:
            settle(future, value)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # the awaiting task may have been cancelled meanwhile
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


_pool = _Pool(MAX_THREADS)


def _after_fork() -> None:  # a child process has none of its parent's threads
    global _pool
    _pool = _Pool(MAX_THREADS)


after_fork_in_child(_after_fork)


async def run_in_thread(function: Callable[[Any], T], argument: Any) -> T:
    """``function(argument)`` on a pool thread, awaited; its exception re-raised here."""
    return await _pool.run(function, argument)
