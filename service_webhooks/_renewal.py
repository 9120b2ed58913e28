"""Keeping a live claim alive: renew its lease while its handlers run.

A claim holds for ``lease`` seconds so that a process that died mid-handler does not
block its event for ever (the service's retry takes the claim over once it expires).
A handler that is merely *slow* must not lose its claim that way, or the retry would
run the same event a second time, at once. So while handlers run, the receiver
re-claims the key with the *same* token every ``lease / 3`` seconds: the store
contract treats a claim by the token that holds the key as a renewal (a new expiry,
answer ``NEW``). Only a dead process stops renewing, so only its claim expires.

One daemon thread per receiver does the renewing, started on first use. It holds the
renewer only weakly, so a receiver that is no longer used (and its store) can be
collected; the thread then ends at once, as it does on the receiver's ``close()``.
It wakes every ``lease / 3`` seconds and renews the claims that were already registered at its
previous wake-up: those have run for at least one interval, and none runs longer than
two intervals (two thirds of its lease) before its first renewal, then one between
renewals. Registering and unregistering a delivery costs one dict operation each (no
clock read, no lock, no wake-up), and no store call is made for a delivery that
finishes within one interval (nearly all of them).
It calls the store's blocking methods, so it serves ``process`` and ``aprocess``
alike without touching the event loop. A store that has only asyncio connections
(``RedisStore(redis.asyncio.Redis(...))``, ``PostgresStore(apool=...)``) refuses
blocking calls with :class:`ConfigurationError`; its claims are renewed with
``aclaim`` on the event loop that made them (``add`` notes the running loop), waiting
at most one interval for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import weakref

from ._exceptions import ConfigurationError
from ._forking import after_fork_of
from ._idempotency import describe
from .stores import ClaimState, IdempotencyStore, MemoryStore, SQLiteStore

__all__ = ["Renewer"]

_BLOCKING_STORES = (MemoryStore, SQLiteStore)  # exact types: a subclass may differ

logger = logging.getLogger("service_webhooks")


class Renewer:
    """Renews the claims registered with :meth:`add`, every ``lease / 3`` seconds.

    :meth:`add` and :meth:`remove` take no lock on the way (one dict operation each,
    atomic under the GIL) and never wake the thread.

    Args:
        store: The store holding the claims.
        lease: The claims' lease, in seconds.
    """

    def __init__(self, store: IdempotencyStore, lease: float) -> None:
        self._store = store
        self._lease = lease
        self._interval = lease / 3
        # token -> (key, the event loop that claimed it, if any): the claims whose
        # handlers run
        self._live: dict[str, tuple[str, asyncio.AbstractEventLoop | None]] = {}
        self._blocking = True  # False once the store refused a blocking call
        # a store that always takes blocking calls never renews on a loop: add() skips
        # looking the loop up (on CPython 3.11 that lookup is a getpid() system call)
        self._loop_free = type(store) in _BLOCKING_STORES
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._gone = threading.Event()  # set once this renewer is collected: the thread ends
        self._renewing: str | None = None  # the token being renewed right now
        self._renewing_on: asyncio.AbstractEventLoop | None = None  # ...by a coroutine there
        # aremove() callers waiting for the renewal under way to end: (their loop, a future)
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        after_fork_of(self, type(self)._after_fork)

    def _after_fork(self) -> None:
        """In a forked child: no renewer thread runs (a child has only the thread that
        forked), so the next :meth:`add` starts one; the parent's claims are the
        parent's to renew, and a lock held by one of its threads would never be freed."""
        self._live = {}
        self._wake = threading.Condition(threading.Lock())
        self._thread = None
        self._gone = threading.Event()
        self._renewing = self._renewing_on = None
        self._waiters = []

    def add(self, key: str, token: str) -> None:
        """Start renewing ``token``'s claim on ``key`` (made on the running event loop,
        if any: a store without blocking calls renews it there)."""
        self._live[token] = (key, None if self._loop_free else asyncio._get_running_loop())
        if self._thread is None:
            with self._wake:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=_renew_while_alive,
                        args=(weakref.ref(self), self._gone, self._interval),
                        name="service-webhooks-renewer",
                        daemon=True,
                    )
                    weakref.finalize(self, self._gone.set)  # not a bound method: no cycle
                    self._thread.start()

    def stop(self) -> None:
        """End the renewer thread, if one runs (:meth:`WebhookReceiver.close`): it
        returns at once from its wait, or after the renewal it is making. Claims still
        registered are no longer renewed until the next :meth:`add` starts a new
        thread, which renews them again. Calling it again is harmless."""
        with self._wake:
            if self._thread is None:
                return
            self._gone.set()
            self._gone = threading.Event()
            self._thread = None

    def remove(self, token: str) -> None:
        """Stop renewing ``token``'s claim (its handlers finished).

        Waits for a renewal of it that is under way, so that no renewal can follow
        the caller's release (it would claim the key again).
        """
        self._live.pop(token, None)
        if self._renewing == token:  # set before the renewer checks the token is here
            if self._renewing_on is not None and self._renewing_on is asyncio._get_running_loop():
                # renewed by a coroutine of this very loop: waiting would block it. That
                # coroutine renews only a token still live, so if it has not started it
                # renews nothing; if it has, its claim went to the store before the
                # caller's next store call
                return
            with self._wake:
                while self._renewing == token:
                    self._wake.wait()

    async def aremove(self, token: str) -> None:
        """:meth:`remove` for a caller on an event loop: waits for a renewal of
        ``token`` under way in the renewer's thread without blocking the loop. That
        renewal is a blocking store call, which a store that stopped answering holds
        for its whole timeout (seconds): the loop's other deliveries go on meanwhile.
        Cancelling the caller does not cut the wait short (it is raised once the
        renewal ended), so that no renewal can follow the caller's release."""
        self._live.pop(token, None)
        if self._renewing != token:
            return
        loop = asyncio.get_running_loop()
        if self._renewing_on is loop:
            return  # as in remove(): that coroutine renews only a token still live
        ended: asyncio.Future[None] = loop.create_future()
        with self._wake:
            if self._renewing != token:
                return
            self._waiters.append((loop, ended))
        cancelled: asyncio.CancelledError | None = None
        while not ended.done():
            try:
                await asyncio.shield(ended)
            except asyncio.CancelledError as error:
                cancelled = error
        if cancelled is not None:
            raise cancelled

    def _beat(
        self, seen: dict[str, tuple[str, asyncio.AbstractEventLoop | None]]
    ) -> dict[str, tuple[str, asyncio.AbstractEventLoop | None]]:
        """One wake-up: renew the claims that were live at the previous one (``seen``);
        returns the claims live now, the next beat's ``seen``."""
        live = self._live.copy()  # one C call: atomic under the GIL
        for token, claim in live.items():
            if seen.get(token) == claim:
                self._renew_live(*claim, token)
        return live

    def _renew_live(self, key: str, loop: asyncio.AbstractEventLoop | None, token: str) -> None:
        """Renew one claim unless it was removed meanwhile; forget it once lost."""
        self._renewing = token  # first: a remove() from now on waits for this renewal
        if token not in self._live:
            self._renewing = None  # removed meanwhile: nothing to renew
            return
        lost = False
        try:
            lost = not self._renew(key, loop, token)
        finally:
            with self._wake:
                if lost:
                    self._live.pop(token, None)
                self._renewing = self._renewing_on = None
                self._wake.notify_all()
                waiters, self._waiters = self._waiters, []
            for waiting_loop, ended in waiters:
                with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                    waiting_loop.call_soon_threadsafe(_settle, ended)

    def _renew(self, key: str, loop: asyncio.AbstractEventLoop | None, token: str) -> bool:
        """Re-claim once; ``False`` when the claim is gone (stop renewing it)."""
        try:
            state = self._claim(key, loop, token)
        except Exception as error:  # the store may be back at the next renewal
            logger.error("service_webhooks: could not renew a claim: %s", describe(error))
            return True
        if state is ClaimState.NEW:
            return True
        logger.warning(
            "service_webhooks: a running delivery lost its claim (%s): its retry may "
            "run the handlers again",
            state.value,
        )
        return False

    def _claim(self, key: str, loop: asyncio.AbstractEventLoop | None, token: str) -> ClaimState:
        """The renewal itself: a blocking ``claim``, or ``aclaim`` on ``loop`` for a
        store with only asyncio connections (at most one interval's wait for it)."""
        if self._blocking or loop is None:
            try:
                return self._store.claim(key, token, self._lease)
            except ConfigurationError:  # only asyncio connections: renew on the loop
                if loop is None:
                    raise
                self._blocking = False
        self._renewing_on = loop
        renewal = asyncio.run_coroutine_threadsafe(self._arenew(key, token), loop)
        try:
            return renewal.result(self._interval)
        except concurrent.futures.TimeoutError:
            renewal.cancel()
            raise TimeoutError(
                f"the event loop did not renew the claim within {self._interval:g} s"
            ) from None

    async def _arenew(self, key: str, token: str) -> ClaimState:
        """``aclaim`` on the claim's loop, unless its handlers finished meanwhile."""
        if token not in self._live:
            return ClaimState.NEW  # removed: nothing to renew (and never after a release)
        return await self._store.aclaim(key, token, self._lease)


def _settle(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


def _renew_while_alive(
    renewer_ref: weakref.ref[Renewer], gone: threading.Event, interval: float
) -> None:
    """The renewer thread: a beat every ``interval`` seconds, on a fixed schedule (renewing
    takes no slack from it), until the renewer is collected (``gone``). Between beats it
    holds no reference to the renewer, so neither the renewer nor its store is kept
    alive by the thread."""
    seen: dict[str, tuple[str, asyncio.AbstractEventLoop | None]] = {}  # at the last beat
    wake_at = time.monotonic()
    while True:
        wake_at += interval
        delay = wake_at - time.monotonic()
        if delay > 0:
            if _wait(gone, delay):
                return
        else:
            wake_at -= delay  # late (a slow store): count the next beat from now
        renewer = renewer_ref()
        if renewer is None:
            return
        seen = renewer._beat(seen)
        del renewer  # not held while waiting for the next beat


_LONGEST_WAIT = 86_400.0
"""Longest single wait of the renewer thread, in seconds: a lease allowed up to 1000
years makes an interval past ``threading.TIMEOUT_MAX`` (about 292 years), which
``Event.wait`` refuses with ``OverflowError``, ending the thread with a traceback."""


def _wait(gone: threading.Event, delay: float) -> bool:
    """``gone.wait(delay)`` in steps of at most :data:`_LONGEST_WAIT` seconds: whether
    ``gone`` was set before ``delay`` seconds passed."""
    deadline = time.monotonic() + delay
    while delay > _LONGEST_WAIT:
        if gone.wait(_LONGEST_WAIT):
            return True
        delay = deadline - time.monotonic()
    return gone.wait(max(delay, 0.0))
