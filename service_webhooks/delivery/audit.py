"""The per-endpoint audit log, endpoint status and failure notification (spec §3.3, §6.3, §8).

The rules:

* Every attempt is recorded: event ID, attempt time, result class, description,
  payload, status and the start of the response. Listing is per endpoint, newest
  first, optionally filtered by result. Entries older than 30 days (spec §6.3, §8)
  are dropped as the log goes: every :meth:`AuditLog.record` and every read prunes
  at the log's clock (the emulator's, virtual or not), so a long run stays bounded.
* When an event dies (24 h without success) the endpoint's status turns to
  ``ERROR`` and the event joins the endpoint's dead-event report. The status stays
  ``ERROR`` while the report holds an event that died within ``error_window``
  (24 h by default; the spec leaves this open) and returns to ``OK`` afterwards.
* Failure notification: when, within the last 24 h, more than 10 attempts were made to
  an endpoint and more than 10 % of them failed (temporary or permanent), the
  notification callback fires *once*. It can fire again only after the condition has
  cleared (the spec sends one e-mail, not one per attempt).

All times are seconds on the emulator's clock: passed in, or read from the ``clock``
callable the log was given (the emulator gives its own).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .classification import Result

__all__ = [
    "RETENTION",
    "AuditEntry",
    "AuditLog",
    "DeadEvent",
    "EndpointStatus",
    "FailureNotification",
    "FailureRateMonitor",
]

RETENTION = 30 * 86_400.0
"""How long attempts stay in the audit log, seconds (spec §8: 30 days)."""

DAY = 86_400.0


class EndpointStatus(StrEnum):
    """The status shown for an endpoint in the settings screen (spec §3.3)."""

    OK = "ok"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One attempt, as listed in the audit log (spec §6.3).

    Attributes:
        endpoint_id: The endpoint the attempt went to.
        event_id: The event's ID (a duplicate delivery carries the same ID).
        delivery_id: The delivery (one event to one endpoint, or one duplicate of it).
        attempt: 1 for the first attempt of that delivery, then 2, 3, ...
        attempted_at: When the attempt started, clock seconds.
        result: success / temporary_failure / permanent_failure.
        description: What happened, one line.
        payload: The body bytes that were sent.
        status: The receiver's HTTP status, or ``None``.
        response: The start of the response body (``""`` when none).
        duration: Wall time of the attempt, seconds.
        timestamp: The ``t`` that was signed, Unix seconds.
    """

    endpoint_id: str
    event_id: str
    delivery_id: str
    attempt: int
    attempted_at: float
    result: Result
    description: str
    payload: bytes
    status: int | None
    response: str
    duration: float
    timestamp: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (payload decoded as UTF-8)."""
        return {
            "endpoint_id": self.endpoint_id,
            "event_id": self.event_id,
            "delivery_id": self.delivery_id,
            "attempt": self.attempt,
            "attempted_at": self.attempted_at,
            "result": self.result.value,
            "description": self.description,
            "payload": self.payload.decode("utf-8", "replace"),
            "status": self.status,
            "response": self.response,
            "duration": self.duration,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True, slots=True)
class DeadEvent:
    """An event that got no successful attempt for 24 h (spec §3.3 "dead").

    Attributes:
        endpoint_id, event_id, delivery_id: As in :class:`AuditEntry`.
        queued_at: When the event was queued, clock seconds.
        died_at: When it was declared dead, clock seconds.
        attempts: How many attempts were made.
        last_description: The last attempt's description (``""`` if none was made).
    """

    endpoint_id: str
    event_id: str
    delivery_id: str
    queued_at: float
    died_at: float
    attempts: int
    last_description: str


@dataclass(frozen=True, slots=True)
class FailureNotification:
    """Passed to the notification callback (spec §6.3: the e-mail to admins).

    Attributes:
        endpoint_id: The endpoint concerned.
        at: When the rule tripped, clock seconds.
        attempts: Attempts within the window at that moment (> 10).
        failures: Failed attempts among them (> 10 %).
    """

    endpoint_id: str
    at: float
    attempts: int
    failures: int

    @property
    def failure_rate(self) -> float:
        """``failures / attempts``, between 0 and 1."""
        return self.failures / self.attempts


class FailureRateMonitor:
    """The notification rule for one endpoint over a sliding window.

    Args:
        min_attempts: The rule needs *more than* this many attempts (10).
        max_failure_rate: ...and a failure share *above* this (0.10).
        window: Window length, seconds (24 h).
    """

    def __init__(
        self, min_attempts: int = 10, max_failure_rate: float = 0.10, window: float = DAY
    ) -> None:
        self.min_attempts = min_attempts
        self.max_failure_rate = max_failure_rate
        self.window = window
        self._attempts: deque[tuple[float, bool]] = deque()
        self._failures = 0
        self._tripped = False

    def record(self, at: float, failed: bool) -> tuple[int, int] | None:
        """Count one attempt; return ``(attempts, failures)`` when the rule trips now.

        The rule trips once, then not again until it has been false at a later
        attempt.
        """
        self._attempts.append((at, failed))
        self._failures += failed
        while self._attempts and self._attempts[0][0] <= at - self.window:
            _, old_failed = self._attempts.popleft()
            self._failures -= old_failed
        total = len(self._attempts)
        breached = total > self.min_attempts and self._failures > self.max_failure_rate * total
        if breached and not self._tripped:
            self._tripped = True
            return total, self._failures
        if not breached:
            self._tripped = False
        return None


class _EndpointLog:
    __slots__ = ("dead", "entries", "monitor", "times")

    def __init__(self, monitor: FailureRateMonitor) -> None:
        self.entries: list[AuditEntry] = []  # oldest first, sorted by attempted_at
        self.times: list[float] = []
        self.dead: list[DeadEvent] = []
        self.monitor = monitor


class AuditLog:
    """Audit log and health of every endpoint.

    Args:
        retention: Seconds an attempt is kept (default 30 days).
        on_failure_notification: Called with a :class:`FailureNotification` when an
            endpoint trips the failure rule (``None``: no callback).
        error_window: Seconds a dead event keeps the endpoint in ``ERROR`` (24 h).
        clock: Returns the current time, clock seconds; with it, recording and
            reading prune entries older than ``retention``. Without it, pruning happens
            only at the newest recorded attempt time and on :meth:`purge`.
    """

    def __init__(
        self,
        *,
        retention: float = RETENTION,
        on_failure_notification: Callable[[FailureNotification], object] | None = None,
        error_window: float = DAY,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.retention = retention
        self.clock = clock
        self._latest = float("-inf")
        self.error_window = error_window
        self.on_failure_notification = on_failure_notification
        self.notifications: list[FailureNotification] = []
        self._endpoints: dict[str, _EndpointLog] = {}

    def _log(self, endpoint_id: str) -> _EndpointLog:
        log = self._endpoints.get(endpoint_id)
        if log is None:
            log = self._endpoints[endpoint_id] = _EndpointLog(FailureRateMonitor())
        return log

    def record(self, entry: AuditEntry) -> FailureNotification | None:
        """Add one attempt; run the notification rule.

        Returns:
            The notification if this attempt tripped the rule (the callback has
            already been called with it), else ``None``.
        """
        self._latest = max(self._latest, entry.attempted_at)
        self._prune()
        if entry.attempted_at < self._now() - self.retention:
            return None  # already past retention: never listed
        log = self._log(entry.endpoint_id)
        index = bisect.bisect_right(log.times, entry.attempted_at)
        log.times.insert(index, entry.attempted_at)
        log.entries.insert(index, entry)
        tripped = log.monitor.record(entry.attempted_at, entry.result.failed)
        if tripped is None:
            return None
        notification = FailureNotification(entry.endpoint_id, entry.attempted_at, *tripped)
        self.notifications.append(notification)
        if self.on_failure_notification is not None:
            self.on_failure_notification(notification)
        return notification

    def record_dead(self, dead: DeadEvent) -> None:
        """Add a dead event to its endpoint's report; the endpoint shows ``ERROR``."""
        self._log(dead.endpoint_id).dead.append(dead)

    def _now(self) -> float:
        return self._latest if self.clock is None else max(self.clock(), self._latest)

    def _prune(self) -> None:
        now = self._now()
        if now != float("-inf"):
            self.purge(now)

    def purge(self, now: float) -> int:
        """Drop attempts older than the retention at ``now``; return how many."""
        dropped = 0
        for log in self._endpoints.values():
            cut = bisect.bisect_left(log.times, now - self.retention)
            if cut:
                del log.times[:cut], log.entries[:cut]
                dropped += cut
            if any(d.died_at < now - self.retention for d in log.dead[:1]):
                log.dead = [d for d in log.dead if d.died_at >= now - self.retention]
        return dropped

    def entries(
        self,
        endpoint_id: str,
        *,
        result: Result | str | None = None,
        now: float | None = None,
    ) -> list[AuditEntry]:
        """The attempts to one endpoint, newest first (spec §6.3).

        Args:
            endpoint_id: The endpoint.
            result: Keep only this result class (``"success"``,
                ``"temporary_failure"``, ``"permanent_failure"``).
            now: When given, attempts older than the retention at ``now`` are purged
                first (the log's clock, when it has one, prunes anyway).

        Raises:
            ValueError: ``result`` is not a result class.
        """
        if now is not None:
            self.purge(now)
        self._prune()
        wanted = None if result is None else Result(result)
        log = self._endpoints.get(endpoint_id)
        if log is None:
            return []
        return [e for e in reversed(log.entries) if wanted is None or e.result is wanted]

    def __iter__(self) -> Iterator[AuditEntry]:
        """Every entry of every endpoint, oldest first within each endpoint."""
        self._prune()
        for log in self._endpoints.values():
            yield from log.entries

    def dead_events(self, endpoint_id: str) -> list[DeadEvent]:
        """The endpoint's dead-event report, most recent death first."""
        self._prune()
        log = self._endpoints.get(endpoint_id)
        return [] if log is None else sorted(log.dead, key=lambda d: -d.died_at)

    def status(self, endpoint_id: str, now: float) -> EndpointStatus:
        """``ERROR`` when an event to this endpoint died within ``error_window`` of ``now``."""
        for dead in self.dead_events(endpoint_id):
            if now - dead.died_at < self.error_window:
                return EndpointStatus.ERROR
        return EndpointStatus.OK

    def to_json(self) -> list[dict[str, Any]]:
        """All entries, newest first per endpoint, as JSON-ready dicts."""
        return [
            entry.to_json()
            for endpoint_id in self._endpoints
            for entry in self.entries(endpoint_id)
        ]
