"""An in-process idempotency store: for tests and single-process development servers.

Records live in a dict guarded by a lock; nothing survives a restart and nothing is
shared between processes. Use :class:`~service_webhooks.stores._sqlite.SQLiteStore`
(one machine) or a Redis/PostgreSQL store (several machines) in production.
Expired records are pruned as keys are claimed: one FIFO queue of expiries per
duration (lease, retention), each already in time order, so every operation is O(1).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable

from ._base import ClaimState

__all__ = ["MemoryStore"]


# The members as module constants: on Python 3.11 EnumType defines __getattr__, which
# puts every read of ClaimState.NEW off the class on a slow path (~1,000 instructions)
_NEW = ClaimState.NEW
_IN_FLIGHT = ClaimState.IN_FLIGHT
_DONE = ClaimState.DONE

# A record is a plain tuple ``(done, token, expires_at)``: the hot path builds two per
# delivery, and a tuple display costs a fraction of a NamedTuple's Python ``__new__``.
# Only atomic values (a bool, not a ClaimState member): the cyclic garbage collector
# then stops tracking each record at its first pass, instead of walking every record
# kept (48 h of deliveries) on each of its older-generation passes.
_Record = tuple[bool, str, float]  # (done, token, expires_at)


class MemoryStore:
    """Idempotency store in a dict (thread-safe, not shared across processes).

    Args:
        clock: Returns the current time in seconds; defaults to :func:`time.time`
            (looked up at call time, so ``freezegun`` works).
    """

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self._records: dict[str, _Record] = {}
        # claim and complete take it with acquire()/release() in try/finally, not `with`:
        # a Lock's __enter__/__exit__ cost about twice as many instructions (two bound
        # methods made, arguments parsed), and these two run on every delivery's path
        self._lock = threading.Lock()
        self._clock = clock
        # seconds kept -> (expires_at, key) in time order
        self._expiries: defaultdict[float, deque[tuple[float, str]]] = defaultdict(deque)
        self._next_prune = 0.0

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.time()

    def __len__(self) -> int:
        """Number of records held, live or not yet pruned."""
        return len(self._records)

    def state(self, key: str) -> ClaimState | None:
        """The live state of ``key``, or ``None`` (for tests and debugging)."""
        record = self._records.get(key)
        if record is None:
            return None
        done, _, expires_at = record
        if expires_at <= self._now():
            return None
        return _DONE if done else _IN_FLIGHT

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        # the clock inline, not self._now(): a call less on every delivery's path
        now = time.time() if self._clock is None else self._clock()
        lock = self._lock
        lock.acquire()  # not `with`: see _lock
        try:
            record = self._records.get(key)
            if record is not None:
                done, owner, expires_at = record
                if expires_at > now and (done or owner != token):  # not a renewal
                    return _DONE if done else _IN_FLIGHT
            if now >= self._next_prune:
                self._prune(now)
            expires_at = now + lease  # the record and its expiry, inline: no call per delivery
            self._records[key] = (False, token, expires_at)
            self._expiries[lease].append((expires_at, key))
            if expires_at < self._next_prune:
                self._next_prune = expires_at
            return _NEW
        finally:
            lock.release()

    def complete(self, key: str, token: str, retention: float) -> bool:
        now = time.time() if self._clock is None else self._clock()
        lock = self._lock
        lock.acquire()  # not `with`: see _lock
        try:
            record = self._records.get(key)
            if record is not None and record[1] != token and record[2] > now:  # another's
                return False
            expires_at = now + retention  # as in claim()
            self._records[key] = (True, token, expires_at)
            self._expiries[retention].append((expires_at, key))
            if expires_at < self._next_prune:
                self._next_prune = expires_at
            return True
        finally:
            lock.release()

    def release(self, key: str, token: str) -> bool:
        with self._lock:
            record = self._records.get(key)
            if record is None or record[1] != token or record[0]:  # absent, another's, done
                return False
            del self._records[key]
            return True

    def _prune(self, now: float) -> None:
        """Drop expired records; schedule the next sweep at the earliest queued expiry."""
        records = self._records
        upcoming = float("inf")
        for queue in self._expiries.values():
            while queue and queue[0][0] <= now:
                expires_at, key = queue.popleft()
                record = records.get(key)
                if record is not None and record[2] == expires_at:
                    del records[key]
            if queue:
                upcoming = min(upcoming, queue[0][0])
        self._next_prune = upcoming

    # Nothing here blocks on I/O, so the async twins call straight through.
    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        return self.claim(key, token, lease)

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        return self.complete(key, token, retention)

    async def arelease(self, key: str, token: str) -> bool:
        return self.release(key, token)
