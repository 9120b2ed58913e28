"""The delivery rate limit: throttle, never reject (spec §8).

The rule: at most ``limit`` (1000) deliveries in any ``window`` (60 s) per
subscription (one organization's events to one endpoint) and per organization
(all its endpoints together). Under umbrella management each account has its own
organization ID, so one URL can receive 1000 per minute from each account. Every
attempt counts, retries included: each is one request to the receiver.

An attempt that would exceed a limit is not refused: :meth:`RateLimiter.acquire`
returns the earliest time it may be made and the event waits in the queue.

Implementation: a sliding-window log (the send times of the last ``limit`` attempts
per key), so the limit holds exactly over *every* window, not just on average.
Pure: time is passed in, in seconds of whatever clock the caller uses.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable

from .._exceptions import ConfigurationError

__all__ = ["DEFAULT_LIMIT", "DEFAULT_WINDOW", "RateLimiter", "delivery_keys"]

DEFAULT_LIMIT = 1000
"""Deliveries per window (spec §8: 1000 events per minute)."""

DEFAULT_WINDOW = 60.0
"""The window, seconds."""


def delivery_keys(organization_id: str, endpoint_id: str) -> tuple[Hashable, Hashable]:
    """The two keys one delivery counts against: its subscription and its organization."""
    return (("subscription", organization_id, endpoint_id), ("organization", organization_id))


class RateLimiter:
    """Sliding-window limiter over any number of keys.

    Args:
        limit: Most attempts per key in any window of ``window`` seconds (>= 1).
        window: Window length, seconds (> 0).

    Raises:
        ConfigurationError: ``limit < 1`` or ``window <= 0`` (or either is NaN).
    """

    def __init__(self, limit: int = DEFAULT_LIMIT, window: float = DEFAULT_WINDOW) -> None:
        if not (limit >= 1 and window > 0):  # NaN fails both tests
            raise ConfigurationError("need limit >= 1 and window > 0 seconds")
        self.limit = limit
        self.window = float(window)
        self._log: dict[Hashable, deque[float]] = {}

    def available_at(self, keys: Iterable[Hashable], now: float) -> float:
        """The earliest time >= ``now`` at which one more attempt fits under every key."""
        at = now
        for key in keys:
            log = self._log.get(key)
            if log is not None and len(log) >= self.limit:
                # The oldest of the last `limit` sends must leave the window first.
                at = max(at, log[-self.limit] + self.window)
        return at

    def acquire(self, keys: Iterable[Hashable], now: float) -> float | None:
        """Record one attempt at ``now`` if every key allows it.

        Args:
            keys: The keys the attempt counts against (see :func:`delivery_keys`).
            now: The current time, seconds.

        Returns:
            ``None`` when the attempt was recorded and may go now; otherwise the
            earliest time to try again (nothing is recorded).
        """
        keys = tuple(keys)
        at = self.available_at(keys, now)
        if at > now:
            return at
        for key in keys:
            log = self._log.setdefault(key, deque())
            log.append(now)
            while len(log) > self.limit:
                log.popleft()
        return None

    def count(self, key: Hashable, now: float) -> int:
        """Attempts recorded for ``key`` in the window ending at ``now`` (inclusive)."""
        log = self._log.get(key, ())
        return sum(1 for t in log if now - self.window < t <= now)
