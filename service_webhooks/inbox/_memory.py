"""An in-process inbox, bounded: for tests and single-process development servers."""

from __future__ import annotations

import asyncio
import datetime
import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

import msgspec

from .._exceptions import ConfigurationError
from ._base import (
    DEFAULT_INBOX_RETENTION,
    DEFAULT_PAGE_SIZE,
    InboxPage,
    InboxQuery,
    ReceivedDelivery,
    Replay,
    SyncInbox,
    check_bounds,
    check_limit,
    decode_cursor,
    encode_cursor,
    from_micros,
    to_micros,
)

__all__ = ["MemoryInbox"]


class MemoryInbox(SyncInbox):
    """Inbox in a dict (thread-safe; nothing survives a restart or is shared).

    Args:
        max_records: Most records kept; the oldest are dropped first beyond it.
        retention: Seconds a record is kept (30 days, spec §6.3).
        max_bytes: Total record size kept, in bytes; ``None``: no cap.
        clock: Current time in Unix seconds (for :meth:`prune`); default
            :func:`time.time`.

    Raises:
        ConfigurationError: A bound out of range.
    """

    def __init__(
        self,
        *,
        max_records: int = 10_000,
        retention: float = DEFAULT_INBOX_RETENTION,
        max_bytes: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        if max_records < 1:
            raise ConfigurationError("max_records must be >= 1")
        check_bounds(retention, max_bytes)
        self.max_records = max_records
        self.retention = retention
        self.max_bytes = max_bytes
        self._clock = clock
        self._records: dict[str, ReceivedDelivery] = {}
        self._by_age: list[tuple[int, str]] = []  # a heap, oldest first; may hold ids
        # already pruned or purged (skipped when popped; rebuilt when mostly those)
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryInbox(max_records={self.max_records})"

    def __len__(self) -> int:
        return len(self._records)

    def _newest_first(self) -> list[ReceivedDelivery]:
        return sorted(self._records.values(), key=_order, reverse=True)

    def record(self, delivery: ReceivedDelivery) -> int:
        with self._lock:
            seen = 1
            if delivery.idempotency_key is not None:
                self._seen[delivery.idempotency_key] += 1
                seen = self._seen[delivery.idempotency_key]
            self._records[delivery.id] = msgspec.structs.replace(delivery, seen=seen)
            heapq.heappush(self._by_age, _order(delivery))
            if len(self._records) > self.max_records:
                self._drop_oldest()
            elif len(self._by_age) > 2 * len(self._records) + 64:
                self._by_age = [_order(record) for record in self._records.values()]
                heapq.heapify(self._by_age)
        return seen

    def _drop_oldest(self) -> None:
        """Drop the record received first (a heap pop, not a scan of every record)."""
        while self._by_age:
            _, record_id = heapq.heappop(self._by_age)
            if self._records.pop(record_id, None) is not None:
                return

    def add_replay(self, delivery_id: str, replay: Replay) -> bool:
        with self._lock:
            record = self._records.get(delivery_id)
            if record is None:
                return False
            replays = (*record.replays, replay)
            self._records[delivery_id] = msgspec.structs.replace(record, replays=replays)
            return True

    def get(self, delivery_id: str) -> ReceivedDelivery | None:
        return self._records.get(delivery_id)

    def search(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor is not None else None
        query = query or InboxQuery()
        with self._lock:
            ordered = self._newest_first()
        items: list[ReceivedDelivery] = []
        for record in ordered:
            if after is not None and _order(record) >= after:
                continue
            if query.matches(record):
                items.append(record)
                if len(items) > limit:
                    break
        more = len(items) > limit
        items = items[:limit]
        return InboxPage(tuple(items), encode_cursor(items[-1]) if more else None)

    def counts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        query = InboxQuery(since=since, until=until)
        with self._lock:
            return dict(Counter(r.reason for r in self._records.values() if query.matches(r)))

    def window_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        for since, until in windows:
            InboxQuery(since=since, until=until)  # the same checks as counts()
        counted: list[Counter[str]] = [Counter() for _ in windows]
        with self._lock:
            for record in self._records.values():
                at = record.received_at
                for (since, until), counter in zip(windows, counted, strict=True):
                    if (since is None or at >= since) and (until is None or at < until):
                        counter[record.reason] += 1
        return [dict(counter) for counter in counted]

    async def awindow_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        return await asyncio.to_thread(self.window_counts, windows)

    def slowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        check_limit(limit)
        query = InboxQuery(since=since, until=until)
        with self._lock:
            timed = [
                r for r in self._records.values() if r.handler_time is not None and query.matches(r)
            ]
        timed.sort(key=lambda r: (r.handler_time, r.received_at, r.id), reverse=True)
        return timed[:limit]

    def prune(self) -> int:
        now = self._clock() if self._clock is not None else time.time()
        cutoff = from_micros(int((now - self.retention) * 1_000_000))
        with self._lock:
            doomed = [i for i, r in self._records.items() if r.received_at < cutoff]
            if self.max_bytes is not None:
                total = 0
                for record in self._newest_first():
                    if record.received_at < cutoff:
                        continue
                    total += record.size
                    if total > self.max_bytes:
                        doomed.append(record.id)
            for record_id in doomed:
                del self._records[record_id]
            return len(doomed)

    def purge(self, query: InboxQuery | None = None) -> int:
        query = query or InboxQuery()
        with self._lock:
            doomed = [i for i, r in self._records.items() if query.matches(r)]
            for record_id in doomed:
                del self._records[record_id]
            return len(doomed)

    # Nothing here blocks on I/O, so the async twins call straight through.
    async def arecord(self, delivery: ReceivedDelivery) -> int:
        return self.record(delivery)

    async def aadd_replay(self, delivery_id: str, replay: Replay) -> bool:
        return self.add_replay(delivery_id, replay)

    async def aget(self, delivery_id: str) -> ReceivedDelivery | None:
        return self.get(delivery_id)


def _order(record: ReceivedDelivery) -> tuple[int, str]:
    return to_micros(record.received_at), record.id
