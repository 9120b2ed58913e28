"""Payload versions per endpoint (spec §9), audit retention on the emulator's clock
(spec §6.3, §8), and a virtual clock that never jumps past an attempt in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from service_webhooks import ConfigurationError
from service_webhooks.delivery import (
    AuditLog,
    DeliveryState,
    Emulator,
    Endpoint,
    OutboundEvent,
    Sender,
    StaticResolver,
    VirtualClock,
    sample_event_for,
)

SECRET = "whsec-versions-test"
ORG = "o-VERSIONS"
DAY = 86_400.0


def endpoint(**options: Any) -> Endpoint:
    return Endpoint("https://hooks.example.com/in", SECRET, {"note.created"},
                    organization_id=ORG, **options)  # fmt: skip


def note(version: int = 1, n: int = 1) -> OutboundEvent:
    return OutboundEvent("note.created", {"id": f"n-{n}"}, ORG, version=version)


def test_an_endpoint_receives_only_its_payload_version() -> None:
    v1, v2 = endpoint(), endpoint(payload_version=2)
    assert v1.payload_version == 1
    assert v1.receives(note(1))
    assert not v1.receives(note(2))
    assert v2.receives(note(2))
    assert not v2.receives(note(1))
    assert sample_event_for(v2).version == 2


@pytest.mark.parametrize("bad", [0, -1, True, "2", 1.0])
def test_payload_version_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="payload_version"):
        endpoint(payload_version=bad)


async def test_a_version_2_event_goes_only_to_endpoints_configured_for_it(
    mock_sender: Any, Recording: Any
) -> None:
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        old = emulator.add_endpoint(endpoint())
        new = emulator.add_endpoint(endpoint(payload_version=2))
        deliveries = emulator.publish([note(1), note(2, n=2)])
        await emulator.run()
    assert {(d.event.version, d.endpoint.id) for d in deliveries} == {(1, old.id), (2, new.id)}
    assert len(transport.calls) == 2


async def test_audit_retention_applies_on_the_emulator_clock(
    mock_sender: Any, Recording: Any
) -> None:
    clock = VirtualClock()
    async with mock_sender(Recording(200)) as sender:
        emulator = Emulator(sender, clock=clock)
        target = emulator.add_endpoint(endpoint())
        emulator.publish(note(n=1))
        await emulator.run()
        assert len(emulator.audit.entries(target.id)) == 1
        clock.advance(29 * DAY)
        emulator.publish(note(n=2))
        await emulator.run()
        assert len(emulator.audit.entries(target.id)) == 2
        clock.advance(2 * DAY)  # the first attempt is now 31 days old
        assert [e.attempted_at for e in emulator.audit.entries(target.id)] == [29 * DAY]
        assert [e.attempted_at for e in emulator.audit] == [29 * DAY]
        clock.advance(30 * DAY)
        emulator.publish(note(n=3))
        await emulator.run()
    assert [e.attempted_at for e in emulator.audit.entries(target.id)] == [61 * DAY]


def test_a_log_without_a_clock_prunes_at_its_newest_attempt() -> None:
    from service_webhooks.delivery import AuditEntry, Result

    def entry(at: float) -> AuditEntry:
        return AuditEntry("ep", "evt", "dlv", 1, at, Result.SUCCESS, "ok", b"{}", 200, "", 0.0, 0)

    log = AuditLog()
    log.record(entry(0.0))
    log.record(entry(31 * DAY))
    assert [e.attempted_at for e in log.entries("ep")] == [31 * DAY]


async def test_virtual_time_waits_for_an_attempt_still_in_flight() -> None:
    """The first attempt times out at 0.2 s but the receiver takes 0.5 s; the retry
    must not be sent before the receiver finished the first one."""
    finished: list[int] = []
    started_after: list[int] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        number = len(started_after) + 1
        started_after.append(len(finished))
        if number == 1:
            await asyncio.sleep(0.5)
        finished.append(number)
        return httpx.Response(200)

    transport = httpx.MockTransport(handler)
    resolver = StaticResolver(default=["93.184.215.14"])
    async with Sender(transport=transport, resolver=resolver, deadline=0.2) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        emulator.add_endpoint(endpoint())
        (delivery,) = emulator.publish(note())
        await emulator.run()
    assert [a.result.value for a in delivery.attempts] == ["temporary_failure", "success"]
    assert started_after == [0, 1]  # the retry started once the first had finished


async def test_virtual_time_waits_for_a_receiver_behind_a_proxy_that_gave_up() -> None:
    """A reverse proxy answers 504 at its read timeout while the receiver behind it
    goes on handling the first attempt: the retries it answers 503 ``in_flight`` must
    not use up the 24 virtual hours before the handler ends (the event is not dead, and
    the handler ran once)."""
    runs: list[str] = []
    handling: list[asyncio.Task[None]] = []

    async def handle() -> None:
        await asyncio.sleep(0.6)
        runs.append("note")

    async def proxy(request: httpx.Request) -> httpx.Response:
        if not handling:
            handling.append(asyncio.create_task(handle()))
            return httpx.Response(504, text="<html>504 Gateway Time-out</html>")
        if not handling[0].done():
            return httpx.Response(503, json={"status": 503, "reason": "in_flight"})
        return httpx.Response(200, json={"status": 200, "reason": "duplicate"})

    transport = httpx.MockTransport(proxy)
    resolver = StaticResolver(default=["93.184.215.14"])
    async with Sender(transport=transport, resolver=resolver) as sender:
        emulator = Emulator(sender, clock=VirtualClock())
        emulator.add_endpoint(endpoint())
        (delivery,) = emulator.publish(note())
        await emulator.run()
    statuses = [a.status for a in delivery.attempts]
    assert delivery.state is DeliveryState.SUCCEEDED, statuses
    assert statuses[0] == 504
    assert statuses[-1] == 200
    assert set(statuses[1:-1]) <= {503}
    assert len(statuses) < 10  # real pauses of 0.25 s doubling, not 150 attempts
    assert runs == ["note"]


async def test_real_time_attempts_are_closed_at_the_deadline() -> None:
    closed: list[bool] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            closed.append(True)
            raise
        return httpx.Response(200)

    resolver = StaticResolver(default=["93.184.215.14"])
    transport = httpx.MockTransport(handler)
    async with Sender(transport=transport, resolver=resolver, deadline=0.1) as sender:
        result = await sender.send("https://h.example/", b"{}", secret=SECRET, organization_id=ORG)
        assert result.failure is not None
        assert result.failure.value == "timeout"
        assert closed == [True]
        assert await sender.settle() == 0
