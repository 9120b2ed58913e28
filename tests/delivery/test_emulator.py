"""The queue over a virtual clock: a whole 24-hour retry life in milliseconds (spec §3.3)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import pytest

from service_webhooks import SIGNATURE_HEADER, Secret, parse_signature_header, verify
from service_webhooks._exceptions import ConfigurationError
from service_webhooks.delivery import (
    AuditEntry,
    DeliveryState,
    Emulator,
    Endpoint,
    EndpointStatus,
    FailureNotification,
    OutboundEvent,
    RateLimiter,
    Result,
    RetryPolicy,
    VirtualClock,
)

SECRET = "whsec-emulator-test"
ORG = "o-EMU"
DAY = 86_400.0


def endpoint(**options: Any) -> Endpoint:
    options.setdefault("organization_id", ORG)
    return Endpoint("https://hooks.example.com/in", SECRET, {"note.created"}, **options)


def note(n: int = 1, org: str = ORG) -> OutboundEvent:
    return OutboundEvent(
        "note.created", {"id": f"n-{n}", "author": "a@example.com", "text": "t"}, org
    )


def attempt_times(emulator: Emulator) -> list[float]:
    return [e.attempted_at for d in emulator.deliveries for e in d.attempts]


async def always_failing(
    Recording: Any, mock_sender: Any, *, jitter: float, **options: Any
) -> tuple[Emulator, Any, list[FailureNotification]]:
    notified: list[FailureNotification] = []
    transport = Recording(500)
    sender = mock_sender(transport)
    emulator = Emulator(
        sender,
        clock=VirtualClock(),
        policy=RetryPolicy(jitter=jitter),
        on_failure_notification=notified.append,
        seed=7,
        **options,
    )
    emulator.add_endpoint(endpoint(id="ep-down"))
    emulator.publish(note())
    await emulator.run()
    await sender.aclose()
    return emulator, transport, notified


async def test_always_failing_endpoint_over_24_hours(Recording: Any, mock_sender: Any) -> None:
    emulator, transport, notified = await always_failing(Recording, mock_sender, jitter=0)
    times = attempt_times(emulator)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # 0, 60, 180, 420, 900, 1500, then every 600 s while before 86 400 s.
    assert len(times) == 147
    assert len(transport.calls) == 147
    assert gaps[:5] == [60, 120, 240, 480, 600]
    assert gaps[0] == 60
    assert gaps[-1] == 600
    assert max(gaps) == 600
    assert times[-1] == 86_100
    (delivery,) = emulator.deliveries
    assert delivery.state is DeliveryState.DEAD
    assert delivery.finished_at == DAY  # dead 24 h after it was queued
    summary = emulator.summary()
    assert (summary.dead, summary.delivered, summary.retried, summary.attempts) == (1, 0, 1, 147)

    # Audit log: every attempt, newest first; endpoint in Error with the dead event.
    log = emulator.audit.entries("ep-down")
    assert [e.attempt for e in log] == list(range(147, 0, -1))
    assert {e.result for e in log} == {Result.TEMPORARY_FAILURE}
    assert emulator.audit.entries("ep-down", result="success") == []
    assert emulator.audit.status("ep-down", now=DAY) is EndpointStatus.ERROR
    (dead,) = emulator.audit.dead_events("ep-down")
    assert (dead.event_id, dead.attempts, dead.died_at) == (delivery.event.id, 147, DAY)
    assert dead.last_description.startswith("HTTP 500")

    # The failure notification fires once, at the 11th attempt.
    assert len(notified) == 1
    assert notified[0].at == times[10]
    assert (notified[0].attempts, notified[0].failures) == (11, 11)


async def test_jittered_gaps_stay_between_one_and_ten_minutes(
    Recording: Any, mock_sender: Any
) -> None:
    emulator, _, _ = await always_failing(Recording, mock_sender, jitter=0.1)
    times = attempt_times(emulator)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    eps = 1e-6  # gaps are differences of float sums
    assert all(60 - eps <= gap <= 600 + eps for gap in gaps)
    assert 60 - eps <= gaps[0] <= 66 + eps
    assert 540 - eps <= gaps[-1] <= 600 + eps
    assert len(set(gaps)) > 100  # jittered, not a fixed sequence
    assert times[-1] < DAY
    assert emulator.deliveries[0].finished_at == DAY
    assert len(times) >= 147


def signed_times(transport: Any) -> list[int]:
    """The ``t`` of each request ``transport`` received, in order."""
    return [parse_signature_header(r.headers[SIGNATURE_HEADER]).timestamp for r in transport.calls]


def verify_each_at(transport: Any, stamps: list[int]) -> None:
    """Each request verifies with the endpoint's secret at its own ``t`` (spec §5.2)."""
    for request, t in zip(transport.calls, stamps, strict=True):
        verify(request.content, request.headers[SIGNATURE_HEADER], [Secret(SECRET)], now=t)


async def test_new_timestamp_every_attempt_same_body(Recording: Any, mock_sender: Any) -> None:
    clock = VirtualClock()
    statuses = iter([503, 429, 307, 200])
    transport = Recording(lambda request: next(statuses))
    async with mock_sender(transport) as sender:
        emulator = Emulator(
            sender,
            clock=clock,
            policy=RetryPolicy(jitter=0),
            signing_clock=lambda: 1_700_000_000 + clock.now(),
        )
        emulator.add_endpoint(endpoint())
        (delivery,) = emulator.publish(note())
        await emulator.run()
    assert delivery.state is DeliveryState.SUCCEEDED
    assert [e.status for e in delivery.attempts] == [503, 429, 307, 200]
    stamps = signed_times(transport)
    assert stamps == [1_700_000_000, 1_700_000_060, 1_700_000_180, 1_700_000_420]
    assert {r.content for r in transport.calls} == {delivery.event.body}
    verify_each_at(transport, stamps)


async def test_retries_within_one_real_second_get_a_new_timestamp(
    Recording: Any, mock_sender: Any
) -> None:
    """On a virtual clock (``--fast``) the retries of an event come within the same real
    second; each must still be a new request with a new ``t`` (spec §5.2, §6.1), not the
    same signature header again."""
    statuses = iter([503, 503, 500, 200])
    transport = Recording(lambda request: next(statuses))
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock(), signing_clock=lambda: 1_700_000_000.5)
        emulator.add_endpoint(endpoint())
        (delivery,) = emulator.publish(note())
        await emulator.run()
    assert delivery.state is DeliveryState.SUCCEEDED
    stamps = signed_times(transport)
    assert stamps == [1_700_000_000, 1_700_000_001, 1_700_000_002, 1_700_000_003]
    assert [e.timestamp for e in delivery.attempts] == stamps
    assert {r.content for r in transport.calls} == {delivery.event.body}
    verify_each_at(transport, stamps)


async def test_retries_within_one_real_second_stay_within_the_tolerance(
    Recording: Any, mock_sender: Any
) -> None:
    """A policy of one retry a minute for 24 virtual hours makes 1,440 attempts in a few
    real seconds: each ``t`` one second later than the last ran 1,440 s ahead, and a
    receiver (5-minute tolerance) answered the later ones 401, a permanent failure."""
    transport = Recording(500)
    async with mock_sender(transport) as sender:
        emulator = Emulator(
            sender,
            clock=VirtualClock(),
            policy=RetryPolicy(initial_delay=60, max_delay=60, factor=1, jitter=0),
            signing_clock=lambda: 1_700_000_000.5,
        )
        emulator.add_endpoint(endpoint())
        emulator.publish(note())
        await emulator.run()
    stamps = signed_times(transport)
    assert len(stamps) > 1_000
    assert stamps[:3] == [1_700_000_000, 1_700_000_001, 1_700_000_002]
    assert max(stamps) - 1_700_000_000 <= 240  # within the default tolerance, 300 s
    for request in transport.calls:  # the receiver's clock reads the signing clock
        verify(
            request.content, request.headers[SIGNATURE_HEADER], [Secret(SECRET)], now=1_700_000_000
        )


async def test_on_attempt_sees_when_the_next_attempt_is_due(
    Recording: Any, mock_sender: Any
) -> None:
    statuses = iter([503, 500, 200])
    seen: list[tuple[DeliveryState, float | None]] = []

    def on_attempt(entry: AuditEntry) -> None:
        seen.append((delivery.state, delivery.retry_at))

    async with mock_sender(Recording(lambda request: next(statuses))) as sender:
        emulator = Emulator(
            sender, clock=VirtualClock(), policy=RetryPolicy(jitter=0), on_attempt=on_attempt
        )
        emulator.add_endpoint(endpoint())
        (delivery,) = emulator.publish(note())
        await emulator.run()
    assert seen == [
        (DeliveryState.RETRYING, 60.0),
        (DeliveryState.RETRYING, 180.0),
        (DeliveryState.SUCCEEDED, None),
    ]
    assert [e.attempted_at for e in delivery.attempts] == [0.0, 60.0, 180.0]


async def test_retry_at_is_none_when_no_attempt_fits_before_the_deadline(
    Recording: Any, mock_sender: Any
) -> None:
    emulator, _, _ = await always_failing(Recording, mock_sender, jitter=0)
    (delivery,) = emulator.deliveries
    assert (delivery.state, delivery.retry_at) == (DeliveryState.DEAD, None)


@pytest.mark.parametrize("status", [400, 401, 301, 404, 410, 422, 199])
async def test_permanent_failure_is_not_retried(
    status: int, Recording: Any, mock_sender: Any
) -> None:
    transport = Recording(status)
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        emulator.add_endpoint(endpoint(id="ep"))
        (delivery,) = emulator.publish(note())
        summary = await emulator.run()
    assert len(transport.calls) == 1
    assert delivery.state is DeliveryState.FAILED
    assert (summary.failed, summary.dead, summary.retried) == (1, 0, 0)
    assert emulator.audit.status("ep", now=0) is EndpointStatus.OK


async def test_reserved_destination_dies_no_connection() -> None:
    from service_webhooks.delivery import Sender

    calls: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda r: calls.append(r) or httpx.Response(200))
    async with Sender(transport=transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        emulator.add_endpoint(
            Endpoint("http://169.254.169.254/x", SECRET, {"note.created"}, organization_id=ORG)
        )
        (delivery,) = emulator.publish(note())
        await emulator.run()
    assert calls == []
    assert delivery.state is DeliveryState.FAILED
    assert delivery.attempts[0].result is Result.PERMANENT_FAILURE


@pytest.mark.parametrize(
    ("sequence", "fires_at"),
    [
        ("F" * 30, 11),  # 11/11 failed: more than 10 attempts and over 10 %
        ("S" * 10 + "F" * 5, 12),  # 1/11 = 9.1 % does not; 2/12 = 16.7 % does
        ("S" * 20 + "F" * 3, 23),  # 2/22 = 9.1 %; 3/23 = 13 %
        ("F" + "S" * 30, None),  # 1/11 = 9.1 %: never over 10 %
        ("S" * 30, None),
        ("F" * 10, None),  # only 10 attempts: not more than 10
    ],
)
async def test_notification_fires_once(
    sequence: str, fires_at: int | None, Recording: Any, mock_sender: Any
) -> None:
    """Each letter is one event's single attempt: S = 200, F = 410 (permanent)."""
    notified: list[FailureNotification] = []
    clock = VirtualClock()
    statuses = iter(200 if c == "S" else 410 for c in sequence)
    async with mock_sender(Recording(lambda request: next(statuses))) as sender:
        emulator = Emulator(sender, clock=clock, on_failure_notification=notified.append)
        emulator.add_endpoint(endpoint(id="ep"))
        for n in range(len(sequence)):
            emulator.publish(note(n))
            await emulator.run()
            clock.advance(60)
    if fires_at is None:
        assert notified == []
    else:
        (notification,) = notified
        assert notification.attempts == fires_at
        assert notification.at == (fires_at - 1) * 60
        assert notification.failure_rate > 0.10


async def test_throttle_holds_1000_per_minute_and_rejects_nothing(
    Recording: Any, mock_sender: Any
) -> None:
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock(), concurrency=50)
        emulator.add_endpoint(endpoint(id="ep"))
        emulator.publish(note(n) for n in range(2500))
        summary = await emulator.run()
    assert summary.delivered == 2500
    assert len(transport.calls) == 2500
    times = sorted(attempt_times(emulator))
    assert times.count(0.0) == 1000
    assert [t for t in times if t > 0][:1] == [60.0]
    assert times[-1] == 120.0
    # No 60-second window holds more than 1000 attempts.
    start = 0
    for end, t in enumerate(times):
        while times[start] <= t - 60:
            start += 1
        assert end - start + 1 <= 1000


async def test_limit_is_per_subscription_and_per_organization(
    Recording: Any, mock_sender: Any
) -> None:
    async with mock_sender(Recording(200)) as sender:
        emulator = Emulator(sender, clock=VirtualClock(), rate_limiter=RateLimiter(10, 60))
        one = emulator.add_endpoint(endpoint(id="ep-1"))
        two = emulator.add_endpoint(endpoint(id="ep-2"))
        # Umbrella: another account delivering to the same URL has its own budget.
        other = emulator.add_endpoint(endpoint(id="ep-3", organization_id="o-OTHER"))
        emulator.publish(note(n) for n in range(10))  # -> ep-1 and ep-2: 20 deliveries
        emulator.publish(note(n, org="o-OTHER") for n in range(10))
        await emulator.run()
    at_zero = {
        ep.id: sum(e.attempted_at == 0 for e in emulator.audit.entries(ep.id))
        for ep in (one, two, other)
    }
    assert at_zero["ep-1"] + at_zero["ep-2"] == 10  # the organization's budget, shared
    assert at_zero["ep-3"] == 10
    assert emulator.summary().delivered == 30


async def test_sustained_overload_leaves_events_dead(Recording: Any, mock_sender: Any) -> None:
    async with mock_sender(Recording(200)) as sender:
        emulator = Emulator(
            sender,
            clock=VirtualClock(),
            rate_limiter=RateLimiter(1, 600),
            policy=RetryPolicy(dead_after=1000),
        )
        emulator.add_endpoint(endpoint(id="ep"))
        first, second, third = emulator.publish([note(1), note(2), note(3)])
        await emulator.run()
    assert [first.state, second.state, third.state] == [
        DeliveryState.SUCCEEDED,
        DeliveryState.SUCCEEDED,
        DeliveryState.DEAD,
    ]
    assert (second.attempts[0].attempted_at, third.finished_at, third.attempts) == (600, 1000, [])
    assert emulator.audit.dead_events("ep")[0].attempts == 0


async def test_duplicates_and_shuffle(Recording: Any, mock_sender: Any) -> None:
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        emulator = Emulator(
            sender, clock=VirtualClock(), duplicates=0.3, shuffle=True, seed=3, concurrency=1
        )
        emulator.add_endpoint(endpoint())
        events = [note(n) for n in range(200)]
        deliveries = emulator.publish(events)
        summary = await emulator.run()
    twins = [d for d in deliveries if d.duplicate]
    assert 30 <= len(twins) <= 90
    assert summary.duplicates == len(twins)
    assert summary.delivered == 200 + len(twins)
    originals = {d.event.id: d for d in deliveries if not d.duplicate}
    for twin in twins:
        assert twin.event.body == originals[twin.event.id].event.body
        assert twin.id != originals[twin.event.id].id
    sent_order = [r.content for r in transport.calls[:200]]
    assert sent_order != [e.body for e in events]  # reordered
    assert sorted(set(sent_order)) != []


async def test_no_endpoint_no_delivery_and_subcategory_routing(
    Recording: Any, mock_sender: Any
) -> None:
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        assert emulator.publish(note()) == []
        emulator.add_endpoint(
            Endpoint(
                "https://h.example/a",
                SECRET,
                {"segment.trend.alert"},
                subcategory="c2VnLTE",
                organization_id=ORG,
                id="trend",
            )
        )
        alert = {"duration": "WEEKLY"}
        routed = emulator.publish(
            OutboundEvent("segment.trend.alert", alert, ORG, subcategory="c2VnLTE")
        )
        skipped = emulator.publish(
            OutboundEvent("segment.trend.alert", alert, ORG, subcategory="other")
        )
        elsewhere = emulator.publish(OutboundEvent("segment.trend.alert", alert, "o-ELSE"))
        await emulator.run()
    assert (len(routed), skipped, elsewhere) == (1, [], [])
    assert len(transport.calls) == 1


async def test_send_test_event_before_saving(Recording: Any, mock_sender: Any) -> None:
    transport = Recording(200)
    unsaved = Endpoint(
        "https://h.example/a", SECRET, {"segment.trend.alert"}, subcategory="c2VnLTE", id="new"
    )
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        entry = await emulator.send_test_event(unsaved)
    assert entry.result is Result.SUCCESS
    assert entry.endpoint_id == "new"
    assert emulator.endpoints == {}
    assert emulator.audit.entries("new") == []
    (request,) = transport.calls
    assert b'"eventName":"segment.trend.alert"' in request.content
    assert b'"duration":"DAILY"' in request.content


async def test_run_until_stops_early(Recording: Any, mock_sender: Any) -> None:
    async with mock_sender(Recording(500)) as sender:
        emulator = Emulator(sender, clock=VirtualClock(), policy=RetryPolicy(jitter=0))
        emulator.add_endpoint(endpoint())
        (delivery,) = emulator.publish(note())
        summary = await emulator.run(until=200)
    assert [e.attempted_at for e in delivery.attempts] == [0, 60, 180]
    assert delivery.state is DeliveryState.RETRYING
    assert summary.pending == 1


def test_options_are_validated(mock_sender: Any, Recording: Any) -> None:
    sender = mock_sender(Recording(200))
    with pytest.raises(ConfigurationError):
        Emulator(sender, duplicates=1.5)
    with pytest.raises(ConfigurationError):
        Emulator(sender, concurrency=0)


@pytest.mark.parametrize("delay", [-1.0, float("inf"), float("nan")])
def test_a_duplicate_delay_that_is_no_span_of_time_is_refused(
    mock_sender: Any, Recording: Any, delay: float
) -> None:
    """A negative delay queued duplicates in the past; NaN or infinity never."""
    with pytest.raises(ConfigurationError, match="duplicate_delay must be a finite number"):
        Emulator(mock_sender(Recording(200)), duplicates=0.5, duplicate_delay=delay)
    Emulator(mock_sender(Recording(200)), duplicates=0.5, duplicate_delay=0)  # at once: fine


class _Unanswered(httpx.AsyncBaseTransport):
    """A receiver that got the request and has not answered yet."""

    def __init__(self) -> None:
        self.received = asyncio.Event()
        self.signature = ""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.signature = request.headers[SIGNATURE_HEADER]
        self.received.set()
        await asyncio.Event().wait()  # never answers
        raise AssertionError("unreachable")


async def test_an_attempt_in_flight_when_the_run_is_stopped_is_counted_and_listed(
    mock_sender: Any,
) -> None:
    """``deliver`` stopped by Ctrl-C had reported ``attempts 0`` and "queued: no
    attempt" for requests the receiver had already got (and handled)."""
    transport = _Unanswered()
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        emulator.add_endpoint(endpoint())
        emulator.publish([note()])
        run = asyncio.create_task(emulator.run())
        await asyncio.wait_for(transport.received.wait(), 5)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    (delivery,) = emulator.deliveries
    (attempt,) = delivery.attempts
    assert attempt.description.startswith("interrupted before an answer")
    assert (attempt.status, attempt.result) == (None, Result.TEMPORARY_FAILURE)
    assert attempt.timestamp == parse_signature_header(transport.signature).timestamp
    assert emulator.summary().attempts == 1
    assert emulator.audit.entries(delivery.endpoint.id) == [attempt]
    assert not delivery.state.final  # not delivered, not failed: the outcome is unknown
