"""The delivery queue: one event's life from queued to success, failure or death (spec §3.3).

The state machine, per delivery (one event to one endpoint)::

    queued -> attempt -> succeeded                      (2xx)
                      -> failed                         (permanent failure: not retried)
                      -> retrying -> (delay) -> attempt (temporary failure)
                      -> dead                           (24 h after queueing, no success)

* An event is queued once per saved endpoint that receives it; with none it is dropped.
* Attempts start in due order (mostly FIFO); at most ``concurrency`` are in flight.
* The rate limiter (1000/min per subscription and per organization) delays attempts:
  they wait in the queue, none is rejected (spec §8). An event whose deadline passes
  while it waits is dead, as the spec warns for sustained overload.
* Testing receivers: ``duplicates=p`` queues, for a share ``p`` of deliveries, a
  second delivery of the same event (same body, same event ID, its own retry life)
  up to ``duplicate_delay`` seconds later; ``shuffle=True`` starts due attempts in
  random order. Both use the seeded ``seed`` random source.
* Every attempt goes to the :class:`~.audit.AuditLog`; a death marks the endpoint
  ``ERROR`` and calls ``on_dead``.

On a virtual clock (:class:`~.clock.VirtualClock`, ``--fast``) time jumps only when
nothing is in flight, and an attempt that timed out counts as in flight until the
receiver has answered it (:meth:`~.sender.Sender.settle`): otherwise the whole retry
life would run in the real seconds a slow handler takes, every retry meeting the first
attempt still in progress.

Time comes from an injectable :class:`~.clock.Clock`; the ``t`` that is signed comes
from ``signing_clock`` (default :func:`time.time`, read at each signature), so a
receiver with a real clock accepts deliveries even when the queue runs on a virtual one,
and one under a frozen clock (freezegun) accepts them too; a retry signed within the
same second as the previous attempt of its delivery gets that ``t`` plus one, so every
attempt carries a new ``t`` (up to 240 s ahead of the clock, see :func:`_signed_time`).
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from .._exceptions import ConfigurationError
from .audit import AuditEntry, AuditLog, DeadEvent, FailureNotification
from .classification import Result, receiver_reason
from .clock import Clock, SystemClock
from .endpoint import Endpoint, OutboundEvent
from .ratelimit import RateLimiter, delivery_keys
from .schedule import RetryPolicy
from .sender import AttemptResult, Sender

_INTERRUPTED = "interrupted before an answer: the receiver may have received it"
"""An attempt under way when the run was stopped (Ctrl-C): it is listed, and counted."""

__all__ = ["Delivery", "DeliveryState", "Emulator", "Summary", "sample_event_for"]


class DeliveryState(StrEnum):
    """Where a delivery is in its life (spec §3.3)."""

    QUEUED = "queued"
    RETRYING = "temporary_failure"
    SUCCEEDED = "success"
    FAILED = "permanent_failure"
    DEAD = "dead"

    @property
    def final(self) -> bool:
        """No more attempts will be made."""
        return self in (DeliveryState.SUCCEEDED, DeliveryState.FAILED, DeliveryState.DEAD)


_delivery_ids = itertools.count(1)


@dataclass(slots=True, eq=False)
class Delivery:
    """One event on its way to one endpoint.

    Attributes:
        event: The event; its ``body`` is sent unchanged on every attempt.
        endpoint: The destination.
        queued_at: When it was queued, clock seconds (the 24 h count starts here).
        duplicate: ``True`` for an injected duplicate of another delivery.
        state: The current :class:`DeliveryState`.
        attempts: Its audit entries, oldest first.
        finished_at: When it reached a final state, clock seconds.
        retry_at: While it is ``RETRYING``: when its next attempt is due, clock seconds
            (the rate limiter may delay it further), or ``None`` when no attempt fits
            before the 24 h deadline (it dies then).
        id: Unique per delivery (a duplicate has its own).
    """

    event: OutboundEvent
    endpoint: Endpoint
    queued_at: float
    duplicate: bool = False
    state: DeliveryState = DeliveryState.QUEUED
    attempts: list[AuditEntry] = field(default_factory=list)
    finished_at: float | None = None
    retry_at: float | None = None
    id: str = field(default_factory=lambda: f"dlv_{next(_delivery_ids)}")


@dataclass(frozen=True, slots=True)
class Summary:
    """Totals over every delivery the emulator has run.

    Attributes:
        deliveries: Deliveries queued (duplicates included).
        duplicates: Injected duplicate deliveries among them.
        delivered: Deliveries that ended in success.
        retried: Deliveries that needed more than one attempt.
        failed: Deliveries that ended in a permanent failure.
        dead: Deliveries declared dead.
        pending: Deliveries not yet final.
        attempts: Attempts made.
        p50_latency, p99_latency: Attempt duration percentiles, seconds (0 if none).
        notifications: Failure notifications emitted.
    """

    deliveries: int
    duplicates: int
    delivered: int
    retried: int
    failed: int
    dead: int
    pending: int
    attempts: int
    p50_latency: float
    p99_latency: float
    notifications: int


def sample_event_for(endpoint: Endpoint) -> OutboundEvent:
    """A sample event the endpoint subscribes to, for "send test event" (spec §2.6)."""
    name = sorted(endpoint.events)[0]
    if name == "segment.trend.alert":
        data: object = {"duration": "DAILY", "test": True}
    elif name == "note.created":
        data = {"id": "test-note", "author": "test@example.com", "text": "test", "test": True}
    else:
        data = {"test": True}
    return OutboundEvent(
        name,
        data,
        organization_id=endpoint.organization_id,
        version=endpoint.payload_version,
        subcategory=endpoint.subcategory,
    )


class Emulator:
    """Queues events and delivers them the way the service does.

    Args:
        sender: Sends attempts (owns the HTTP client; the caller closes it).
        clock: Time for queueing, delays, rate limits and the audit log
            (default :class:`~.clock.SystemClock`).
        policy: Backoff and dead-after rules (default: the spec's).
        rate_limiter: The throttle (default, and with ``None``: 1000/min per
            subscription and per organization, spec §8, a new
            :class:`~.ratelimit.RateLimiter`); ``throttle=False`` turns it off.
        audit: Where attempts go (default: a new :class:`~.audit.AuditLog`); a log
            without a clock gets this emulator's, so its 30-day retention applies.
        on_failure_notification: Callback for the failure rule; used when ``audit``
            is not given.
        on_dead: Called with each :class:`~.audit.DeadEvent`.
        on_attempt: Called with each :class:`~.audit.AuditEntry` as it is recorded, once
            its delivery's ``state`` (and ``retry_at``) say what comes next.
        duplicates: Share of deliveries to duplicate, ``0 <= p <= 1``.
        duplicate_delay: A duplicate is queued up to this many clock seconds later.
        shuffle: Start due attempts in random order.
        seed: Seed of the random source (jitter, duplicates, shuffling).
        concurrency: Most attempts in flight at once (>= 1).
        signing_clock: Source of the signed ``t``, Unix seconds (default:
            :func:`time.time`, looked up at each call, so that a test's frozen clock,
            freezegun's ``freeze_time``, signs as the receiver under test checks); an
            attempt's ``t`` is later than its delivery's previous attempt's, up to 240 s
            ahead of the clock (see :func:`_signed_time`).
        throttle: ``False``: no rate limit at all (``rate_limiter`` is then ignored).

    Raises:
        ConfigurationError: ``duplicates`` outside ``[0, 1]``, ``concurrency < 1``, or
            ``duplicate_delay`` negative, infinite or NaN.
    """

    def __init__(
        self,
        sender: Sender,
        *,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
        rate_limiter: RateLimiter | None = None,
        audit: AuditLog | None = None,
        on_failure_notification: Callable[[FailureNotification], object] | None = None,
        on_dead: Callable[[DeadEvent], object] | None = None,
        on_attempt: Callable[[AuditEntry], object] | None = None,
        duplicates: float = 0.0,
        duplicate_delay: float = 30.0,
        shuffle: bool = False,
        seed: int | None = None,
        concurrency: int = 16,
        signing_clock: Callable[[], float] | None = None,
        throttle: bool = True,
    ) -> None:
        if not 0.0 <= duplicates <= 1.0:
            raise ConfigurationError("duplicates is a probability in [0, 1]")
        if concurrency < 1:
            raise ConfigurationError("concurrency must be >= 1")
        if not 0.0 <= duplicate_delay < math.inf:  # NaN fails both tests
            raise ConfigurationError(
                f"duplicate_delay must be a finite number of seconds >= 0, not {duplicate_delay!r}"
            )
        self.sender = sender
        self.clock: Clock = clock or SystemClock()
        self.policy = policy or RetryPolicy()
        self.rate_limiter = (rate_limiter or RateLimiter()) if throttle else None
        self.audit = audit or AuditLog(
            on_failure_notification=on_failure_notification, clock=self.clock.now
        )
        if self.audit.clock is None:
            self.audit.clock = self.clock.now  # retention runs on the emulator's clock
        self.on_dead = on_dead
        self.on_attempt = on_attempt
        self.duplicates = duplicates
        self.duplicate_delay = duplicate_delay
        self.shuffle = shuffle
        self.concurrency = concurrency
        self.signing_clock: Callable[[], float] = signing_clock or _unix_time
        self.rng = random.Random(seed)
        # Clock time that stands still during I/O (a virtual clock) must not jump ahead
        # while a timed-out attempt is still being handled by the receiver.
        self._virtual = self.clock.timeout_for(0.0) is None
        # Real seconds each delivery has held virtual time for a receiver that answered
        # ``in_flight`` (an earlier attempt of it still running: see ``_attempt``).
        self._held: dict[str, float] = {}
        self.endpoints: dict[str, Endpoint] = {}
        self.deliveries: list[Delivery] = []
        self._heap: list[tuple[float, int, Delivery]] = []
        self._seq = itertools.count()

    # -- configuration -------------------------------------------------------------

    def add_endpoint(self, endpoint: Endpoint) -> Endpoint:
        """Save an endpoint configuration: events published from now on reach it."""
        self.endpoints[endpoint.id] = endpoint
        return endpoint

    def remove_endpoint(self, endpoint_id: str) -> None:
        """Forget an endpoint; deliveries already queued to it continue."""
        self.endpoints.pop(endpoint_id, None)

    async def send_test_event(
        self, endpoint: Endpoint, event: OutboundEvent | None = None
    ) -> AuditEntry:
        """Send one test event to ``endpoint``, saved or not (spec §2.6).

        One attempt, no retry; not added to the audit log (the endpoint may not
        exist yet). Returns the attempt as an :class:`~.audit.AuditEntry`.
        """
        event = event or sample_event_for(endpoint)
        delivery = Delivery(event, endpoint, self.clock.now())
        outcome = await self._send(delivery, int(self.signing_clock()))
        return self._entry(delivery, 1, delivery.queued_at, outcome)

    # -- queueing ------------------------------------------------------------------

    def publish(self, event: OutboundEvent | Iterable[OutboundEvent]) -> list[Delivery]:
        """Queue ``event`` (or several) for every saved endpoint that receives it.

        Returns:
            The deliveries created (empty when no endpoint subscribes), injected
            duplicates included.
        """
        events = [event] if isinstance(event, OutboundEvent) else list(event)
        created: list[Delivery] = []
        now = self.clock.now()
        for item in events:
            for endpoint in self.endpoints.values():
                if endpoint.receives(item):
                    created.append(self._enqueue(Delivery(item, endpoint, now), now))
                    if self.duplicates and self.rng.random() < self.duplicates:
                        at = now + self.rng.uniform(0, self.duplicate_delay)
                        twin = Delivery(item, endpoint, at, duplicate=True)
                        created.append(self._enqueue(twin, at))
        return created

    def _enqueue(self, delivery: Delivery, at: float) -> Delivery:
        self.deliveries.append(delivery)
        self._push(at, delivery)
        return delivery

    def _push(self, at: float, delivery: Delivery) -> None:
        heapq.heappush(self._heap, (at, next(self._seq), delivery))

    # -- running -------------------------------------------------------------------

    async def run(self, *, until: float | None = None) -> Summary:
        """Deliver until every delivery is final (or the clock reaches ``until``).

        Returns:
            The :class:`Summary` at the end.
        """
        in_flight: set[asyncio.Task[None]] = set()
        ready: collections.deque[Delivery] = collections.deque()
        try:
            while self._heap or ready or in_flight:
                now = self.clock.now()
                if until is not None and now >= until and not in_flight:
                    break
                fresh: list[Delivery] = []
                while self._heap and self._heap[0][0] <= now:
                    fresh.append(heapq.heappop(self._heap)[2])
                if self.shuffle:
                    self.rng.shuffle(fresh)
                ready.extend(fresh)
                while ready and len(in_flight) < self.concurrency:
                    delivery = ready.popleft()
                    if delivery.state.final:
                        continue
                    if now >= self.policy.deadline(delivery.queued_at):
                        self._die(delivery, now)
                        continue
                    if self.rate_limiter is not None:
                        keys = delivery_keys(
                            delivery.endpoint.organization_id, delivery.endpoint.id
                        )
                        later = self.rate_limiter.acquire(keys, now)
                        if later is not None:
                            # Throttled: wait in the queue, but no longer than the deadline.
                            deadline = self.policy.deadline(delivery.queued_at)
                            self._push(min(later, deadline), delivery)
                            continue
                    task = asyncio.create_task(self._attempt(delivery, now))
                    in_flight.add(task)
                next_due = self._heap[0][0] if self._heap else None
                if until is not None and next_due is not None:
                    next_due = min(next_due, until)
                if in_flight:
                    timeout = None
                    if next_due is not None and not ready:
                        timeout = self.clock.timeout_for(next_due - self.clock.now())
                    done, _ = await asyncio.wait(
                        in_flight, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                    for task in done:
                        in_flight.discard(task)
                        task.result()  # re-raise a bug in the emulator itself
                elif next_due is not None:
                    if self._virtual:
                        # Never jump past an attempt the receiver is still handling.
                        await self.sender.settle()
                    await self.clock.sleep(next_due - self.clock.now())
        finally:
            for task in in_flight:
                task.cancel()
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
        return self.summary()

    async def _send(self, delivery: Delivery, timestamp: int) -> AttemptResult:
        endpoint = delivery.endpoint
        return await self.sender.send(
            endpoint.url,
            delivery.event.body,
            secret=endpoint.secret,
            organization_id=delivery.event.organization_id,
            timestamp=timestamp,
            linger=self._virtual,
        )

    def _entry(
        self, delivery: Delivery, number: int, started: float, outcome: AttemptResult
    ) -> AuditEntry:
        return AuditEntry(
            endpoint_id=delivery.endpoint.id,
            event_id=delivery.event.id,
            delivery_id=delivery.id,
            attempt=number,
            attempted_at=started,
            result=outcome.result,
            description=outcome.description,
            payload=delivery.event.body,
            status=outcome.status,
            response=outcome.response_snippet,
            duration=outcome.duration,
            timestamp=outcome.timestamp,
        )

    async def _attempt(self, delivery: Delivery, started: float) -> None:
        timestamp = _signed_time(delivery, self.signing_clock())
        began = time.perf_counter()
        try:
            outcome = await self._send(delivery, timestamp)
        except asyncio.CancelledError:  # the run was stopped (Ctrl-C) with this one out
            interrupted = AttemptResult(
                Result.TEMPORARY_FAILURE,
                None,
                None,
                _INTERRUPTED,
                "",
                time.perf_counter() - began,
                timestamp,
            )
            entry = self._entry(delivery, len(delivery.attempts) + 1, started, interrupted)
            delivery.attempts.append(entry)  # a request was made: it counts, and is listed
            self.audit.record(entry)
            raise
        entry = self._entry(delivery, len(delivery.attempts) + 1, started, outcome)
        delivery.attempts.append(entry)
        self.audit.record(entry)
        ended = self.clock.now()
        delivery.retry_at = None
        if outcome.result is Result.SUCCESS:
            delivery.state, delivery.finished_at = DeliveryState.SUCCEEDED, ended
        elif outcome.result is Result.PERMANENT_FAILURE:
            delivery.state, delivery.finished_at = DeliveryState.FAILED, ended
        else:
            delivery.state = DeliveryState.RETRYING
            at = self.policy.next_attempt_at(
                delivery.queued_at, ended, len(delivery.attempts), self.rng
            )
            delivery.retry_at = at
            # No attempt fits before the deadline: the event dies at the deadline.
            self._push(self.policy.deadline(delivery.queued_at) if at is None else at, delivery)
        if self.on_attempt is not None:  # the delivery's state already says what comes next
            self.on_attempt(entry)
        if self._virtual and delivery.state is DeliveryState.RETRYING and _in_flight(outcome):
            await self._hold_for_receiver(delivery)
        elif self._held and delivery.state is not DeliveryState.RETRYING:  # it ended
            self._held.pop(delivery.id, None)

    async def _hold_for_receiver(self, delivery: Delivery) -> None:
        """Keep virtual time still for a while, in real time: the receiver is still
        handling an earlier attempt of this delivery (one a reverse proxy gave up on with
        a 504, or one that timed out here), so a retry at once would meet it again, and
        the event would die after 24 virtual hours within a few real seconds. The pause
        doubles from 0.25 s with each ``in_flight`` answer in a row, at most
        :attr:`Sender.linger_limit` real seconds in all for the delivery."""
        streak = 0
        for entry in reversed(delivery.attempts):
            if entry.status != 503 or receiver_reason(entry.response) != "in_flight":
                break
            streak += 1
        held = self._held.get(delivery.id, 0.0)
        pause = min(0.25 * 2 ** min(streak - 1, 16), self.sender.linger_limit - held)
        if pause > 0:
            self._held[delivery.id] = held + pause
            await asyncio.sleep(pause)

    def _die(self, delivery: Delivery, now: float) -> None:
        delivery.state, delivery.finished_at, delivery.retry_at = DeliveryState.DEAD, now, None
        self._held.pop(delivery.id, None)
        last = delivery.attempts[-1].description if delivery.attempts else ""
        dead = DeadEvent(
            endpoint_id=delivery.endpoint.id,
            event_id=delivery.event.id,
            delivery_id=delivery.id,
            queued_at=delivery.queued_at,
            died_at=now,
            attempts=len(delivery.attempts),
            last_description=last,
        )
        self.audit.record_dead(dead)
        if self.on_dead is not None:
            self.on_dead(dead)

    # -- reporting -----------------------------------------------------------------

    def summary(self) -> Summary:
        """Totals so far (see :class:`Summary`)."""
        durations = sorted(e.duration for d in self.deliveries for e in d.attempts)
        states = [d.state for d in self.deliveries]
        return Summary(
            deliveries=len(self.deliveries),
            duplicates=sum(d.duplicate for d in self.deliveries),
            delivered=states.count(DeliveryState.SUCCEEDED),
            retried=sum(len(d.attempts) > 1 for d in self.deliveries),
            failed=states.count(DeliveryState.FAILED),
            dead=states.count(DeliveryState.DEAD),
            pending=sum(not s.final for s in states),
            attempts=len(durations),
            p50_latency=_percentile(durations, 0.50),
            p99_latency=_percentile(durations, 0.99),
            notifications=len(self.audit.notifications),
        )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _signed_time(delivery: Delivery, now: float) -> int:
    """The ``t`` to sign for the next attempt of ``delivery``: ``now``, and always later
    than its previous attempt's (spec §5.2, §6.1: each attempt is a new request with a
    new ``t``). On a virtual clock retries come within the same real second; a ``t``
    equal to the last one would make the retry byte for byte the same request. So ``t``
    runs ahead of ``now`` by at most one second per attempt made in that second (about
    150 s for an event that dies after 24 virtual hours, within the 5-minute tolerance),
    and never more than :data:`_MOST_AHEAD` seconds: a policy of more attempts (one a
    minute for 24 hours is 1,440) would otherwise sign its later ones past the
    receiver's tolerance, answered 401 ``timestamp``, a permanent failure. Attempts
    beyond that lead repeat its ``t``.
    """
    t = int(now)
    if delivery.attempts:
        t = max(t, min(delivery.attempts[-1].timestamp + 1, t + _MOST_AHEAD))
    return t


_MOST_AHEAD = 240
"""The most seconds an attempt's signed ``t`` runs ahead of ``signing_clock`` (see
:func:`_signed_time`): a minute inside the receiver's default 5-minute tolerance."""


def _in_flight(outcome: AttemptResult) -> bool:
    """A 503 ``in_flight``: the receiver is still handling an earlier attempt."""
    return outcome.status == 503 and receiver_reason(outcome.response_snippet) == "in_flight"


def _unix_time() -> float:
    """:func:`time.time`, looked up when called: a default of ``time.time`` itself would
    be bound at import, and freezegun could not freeze the signed ``t`` of a test that
    freezes the receiver's clock (every delivery would then be a 401 ``timestamp``)."""
    return time.time()
