"""Connections opened for one event loop each, closed in that loop as it shuts down.

An asyncio connection belongs to the loop that opened it, so the Redis and PostgreSQL
stores and the PostgreSQL inbox, built from a URL, open a client or pool for each event
loop on first use there. One process often runs many loops in turn with one
module-level receiver: ``asyncio.run()`` called more than once, pytest-asyncio's loop
per test, each ``with TestClient(app)`` block, a sync view calling ``asyncio.run``.
Each loop's connections must then be closed in that loop, before it closes: once it is
closed nothing can close them (an asyncio transport needs its loop), and a client or a
pool refers to its loop, so a mapping weak on the loop never lets go of either.

So each is closed as its loop shuts down: an async generator started in the loop (by
:meth:`PerLoop.add`) is finalized by ``loop.shutdown_asyncgens()``, which
``asyncio.run()`` and ``asyncio.Runner`` (pytest-asyncio, AnyIO, Starlette's
``TestClient``), uvicorn and asgiref call while the loop still runs, and its ``finally``
closes them there. The entry of a loop closed without that step (``loop.close()``
alone) is dropped at the next loop's first use: its connections are left to the
garbage collector.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["PerLoop"]

logger = logging.getLogger("service_webhooks")

T = TypeVar("T")


class PerLoop(Generic[T]):
    """One value (a client, a pool) per event loop, closed with ``close(value)`` in its
    loop when that loop shuts down, or when :meth:`pop` takes it out first.

    Args:
        close: ``await close(value)`` closes one.
        what: Names the values in a log line when closing one fails.
    """

    __slots__ = ("_close", "_open", "_what")

    def __init__(self, close: Callable[[T], Awaitable[object]], what: str) -> None:
        self._close = close
        self._what = what
        # loop -> (its value, the generator that closes it at the loop's shutdown)
        self._open: dict[asyncio.AbstractEventLoop, tuple[T, AsyncGenerator[None, None]]] = {}

    def get(self) -> T | None:
        """The running loop's value, if it has one."""
        entry = self._open.get(asyncio.get_running_loop())
        return None if entry is None else entry[0]

    def add(self, value: T) -> None:
        """Make ``value`` the running loop's, closed when that loop shuts down."""
        loop = asyncio.get_running_loop()
        # list(): one step, where iterating the dict itself could meet another thread's
        # loop adding or removing its entry (asgiref, a thread running loops in turn)
        for ended in [other for other in list(self._open) if other.is_closed()]:
            dropped = self._open.pop(ended, None)  # closed without shutting down
            if dropped is not None:  # (unless another thread dropped it first)
                _finish(dropped[1])
        closing = self._closing(loop, value)
        # first iteration now, in the loop: the loop's asyncgen hook registers it for
        # shutdown_asyncgens(); the body runs to its yield without suspending
        with contextlib.suppress(StopIteration):
            closing.asend(None).send(None)
        self._open[loop] = (value, closing)

    async def pop(self) -> T | None:
        """Take the running loop's value out, for the caller to close; ``None`` if none."""
        entry = self._open.pop(asyncio.get_running_loop(), None)
        if entry is None:
            return None
        await entry[1].aclose()  # ended here: nothing left for the loop's shutdown
        return entry[0]

    def forget(self) -> list[Any]:
        """Drop every entry without closing it (a forked child's, whose connections
        are the parent's); returns them, to be kept referenced."""
        entries, self._open = list(self._open.values()), {}
        return entries

    async def _closing(
        self, loop: asyncio.AbstractEventLoop, value: T
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            entry = self._open.get(loop)
            if entry is not None and entry[0] is value:  # neither popped nor dropped
                self._open.pop(loop, None)
                try:
                    await self._close(value)
                except Exception as error:  # the loop is ending: say it, do not raise
                    logger.warning(  # the type only: a driver's message may quote a URL
                        "service_webhooks: could not close %s at the event loop's end: %s",
                        self._what,
                        type(error).__name__,
                    )


def _finish(closing: AsyncGenerator[None, None]) -> None:
    """End a generator whose entry is gone, without its (closed) loop: its ``finally``
    then has nothing to await, so one step finishes it, and its collection later asks
    nothing of that loop."""
    with contextlib.suppress(StopIteration, RuntimeError):
        closing.aclose().send(None)
