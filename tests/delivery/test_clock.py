"""Clocks: virtual time jumps, scaled time compresses delays, real time is Unix time."""

from __future__ import annotations

import time
from typing import Any

import pytest

from service_webhooks._exceptions import ConfigurationError
from service_webhooks.delivery import (
    DeliveryState,
    Emulator,
    Endpoint,
    OutboundEvent,
    RetryPolicy,
    ScaledClock,
    SystemClock,
    VirtualClock,
)


async def test_virtual_clock_jumps() -> None:
    clock = VirtualClock(100)
    await clock.sleep(86_400)
    clock.advance(-5)  # ignored
    assert clock.now() == 86_500
    assert clock.timeout_for(60) is None


async def test_scaled_clock_compresses() -> None:
    clock = ScaledClock(speed=10_000)
    start = clock.now()
    await clock.sleep(60)  # 6 ms of real time
    assert clock.now() - start >= 60
    assert clock.timeout_for(600) == pytest.approx(0.06)
    with pytest.raises(ConfigurationError):
        ScaledClock(0)


def test_system_clock_is_unix_time() -> None:
    before = time.time()
    assert before <= SystemClock().now() <= time.time()
    assert SystemClock().timeout_for(-1) == 0


async def test_retry_life_on_a_scaled_clock(Recording: Any, mock_sender: Any) -> None:
    statuses = iter([500, 500, 200])
    async with mock_sender(Recording(lambda request: next(statuses))) as sender:
        emulator = Emulator(sender, clock=ScaledClock(speed=20_000), policy=RetryPolicy())
        emulator.add_endpoint(Endpoint("https://h.example/", "s", {"e"}))
        (delivery,) = emulator.publish(OutboundEvent("e", {}))
        await emulator.run()
    assert delivery.state is DeliveryState.SUCCEEDED
    first, second, third = (e.attempted_at for e in delivery.attempts)
    assert second - first >= 60
    assert third - second >= 120
