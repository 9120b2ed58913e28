"""Audit log (spec §6.3): newest first, filter by result, 30-day retention; status, report."""

from __future__ import annotations

import json

import pytest

from service_webhooks.delivery import (
    AuditEntry,
    AuditLog,
    DeadEvent,
    EndpointStatus,
    FailureRateMonitor,
    Result,
)

DAY = 86_400.0


def entry(
    at: float, result: Result = Result.SUCCESS, endpoint: str = "ep", n: int = 1
) -> AuditEntry:
    return AuditEntry(
        endpoint_id=endpoint,
        event_id=f"evt-{n}",
        delivery_id=f"dlv-{n}",
        attempt=1,
        attempted_at=at,
        result=result,
        description="d",
        payload=b'{"eventName":"x"}',
        status=200 if result is Result.SUCCESS else 500,
        response="ok",
        duration=0.01,
        timestamp=int(at),
    )


def test_newest_first_and_filtered_by_result() -> None:
    log = AuditLog()
    log.record(entry(10, n=1))
    log.record(entry(30, Result.TEMPORARY_FAILURE, n=2))
    log.record(entry(20, Result.PERMANENT_FAILURE, n=3))  # recorded late, sorted by time
    log.record(entry(5, endpoint="other", n=4))
    assert [e.event_id for e in log.entries("ep")] == ["evt-2", "evt-3", "evt-1"]
    assert [e.event_id for e in log.entries("ep", result="temporary_failure")] == ["evt-2"]
    assert [e.event_id for e in log.entries("ep", result=Result.PERMANENT_FAILURE)] == ["evt-3"]
    assert [e.event_id for e in log.entries("ep", result="success")] == ["evt-1"]
    assert log.entries("missing") == []
    with pytest.raises(ValueError, match="nope"):
        log.entries("ep", result="nope")


def test_thirty_day_retention() -> None:
    log = AuditLog()
    log.record(entry(0, n=1))
    log.record(entry(10 * DAY, n=2))
    assert len(log.entries("ep", now=30 * DAY)) == 2
    assert [e.event_id for e in log.entries("ep", now=30 * DAY + 1)] == ["evt-2"]
    assert log.purge(41 * DAY) == 1
    assert log.entries("ep") == []


def test_dead_event_turns_status_to_error_with_a_report() -> None:
    log = AuditLog()
    assert log.status("ep", now=0) is EndpointStatus.OK
    log.record_dead(DeadEvent("ep", "evt-1", "dlv-1", 0, DAY, 147, "HTTP 500"))
    log.record_dead(DeadEvent("ep", "evt-2", "dlv-2", 100, DAY + 100, 147, "HTTP 503"))
    assert log.status("ep", now=DAY + 200) is EndpointStatus.ERROR
    assert [d.event_id for d in log.dead_events("ep")] == ["evt-2", "evt-1"]
    assert log.status("ep", now=2 * DAY + 101) is EndpointStatus.OK
    assert log.status("other", now=DAY) is EndpointStatus.OK


def test_json_export() -> None:
    log = AuditLog()
    log.record(entry(1))
    (row,) = json.loads(json.dumps(log.to_json()))
    assert row["result"] == "success"
    assert row["payload"] == '{"eventName":"x"}'
    assert row["status"] == 200


def test_notification_callback_and_rearm() -> None:
    seen = []
    log = AuditLog(on_failure_notification=seen.append)
    for n in range(11):
        log.record(entry(n, Result.TEMPORARY_FAILURE, n=n))
    assert [(s.attempts, s.failures) for s in seen] == [(11, 11)]
    for n in range(11, 40):
        log.record(entry(n, Result.TEMPORARY_FAILURE, n=n))
    assert len(seen) == 1  # once, not once per attempt


def test_monitor_window_and_rearm() -> None:
    monitor = FailureRateMonitor()
    assert [monitor.record(t, True) for t in range(11)][-1] == (11, 11)
    # A day later the old attempts have left the window; a healthy spell clears the rule.
    assert all(monitor.record(DAY + t, False) is None for t in range(20))
    # A new burst of failures trips it again.
    trips = [monitor.record(DAY + 100 + t, True) for t in range(5)]
    assert [t for t in trips if t is not None] == [(23, 3)]
