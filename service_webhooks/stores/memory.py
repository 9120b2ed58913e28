"""An in-process idempotency store: for tests and single-process development servers.

Records live in a dict guarded by a lock; nothing survives a restart and nothing is
shared between processes. Use :class:`~service_webhooks.stores.sqlite.SQLiteStore`
(one machine) or a Redis/PostgreSQL store (several machines) in production.
Expired records are pruned as keys are claimed (a heap ordered by expiry keeps
that O(log n) per operation).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from .base import ClaimState

__all__ = ["MemoryStore"]


class _Record(NamedTuple):
    state: ClaimState
    token: str
    expires_at: float


class MemoryStore:
    """Idempotency store in a dict (thread-safe, not shared across processes).

    Args:
        clock: Returns the current time in seconds; defaults to :func:`time.time`
            (looked up at call time, so ``freezegun`` works).
    """

    def __init__(self, *, clock: Callable[[], float] | None = None) -> None:
        self._records: dict[str, _Record] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._expiries: list[tuple[float, str]] = []

    def _now(self) -> float:
        return self._clock() if self._clock is not None else time.time()

    def __len__(self) -> int:
        """Number of records held, live or not yet pruned."""
        return len(self._records)

    def state(self, key: str) -> ClaimState | None:
        """The live state of ``key``, or ``None`` (for tests and debugging)."""
        record = self._records.get(key)
        if record is None or record.expires_at <= self._now():
            return None
        return record.state

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        now = self._now()
        with self._lock:
            record = self._records.get(key)
            if record is not None and record.expires_at > now:
                return record.state
            self._prune(now)
            self._put(key, _Record(ClaimState.IN_FLIGHT, token, now + lease))
            return ClaimState.NEW

    def complete(self, key: str, token: str, retention: float) -> bool:
        now = self._now()
        with self._lock:
            record = self._records.get(key)
            if record is not None and record.token != token and record.expires_at > now:
                return False
            self._put(key, _Record(ClaimState.DONE, token, now + retention))
            return True

    def release(self, key: str, token: str) -> bool:
        with self._lock:
            record = self._records.get(key)
            if record is None or record.token != token or record.state is ClaimState.DONE:
                return False
            del self._records[key]
            return True

    def _put(self, key: str, record: _Record) -> None:
        self._records[key] = record
        heapq.heappush(self._expiries, (record.expires_at, key))

    def _prune(self, now: float) -> None:
        expiries, records = self._expiries, self._records
        while expiries and expiries[0][0] <= now:
            expires_at, key = heapq.heappop(expiries)
            record = records.get(key)
            if record is not None and record.expires_at == expires_at:
                del records[key]

    # Nothing here blocks on I/O, so the async twins call straight through.
    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        return self.claim(key, token, lease)

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        return self.complete(key, token, retention)

    async def arelease(self, key: str, token: str) -> bool:
        return self.release(key, token)
