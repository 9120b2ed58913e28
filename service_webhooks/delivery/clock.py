"""Clocks for the emulator: real, virtual (instant) and compressed.

The emulator reads time only through a :class:`Clock`, so the same queue logic runs
in real time (the CLI), compressed (``--fast``, end-to-end tests) or virtually (a
whole 24-hour retry life in milliseconds). A clock's seconds are the unit of every
delay in :mod:`.schedule`, :mod:`.ratelimit` and :mod:`.audit`.

The per-attempt deadline of :class:`~.sender.Sender` is always real time: the
receiver's sockets do not run on a virtual clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from .._exceptions import ConfigurationError

__all__ = ["Clock", "ScaledClock", "SystemClock", "VirtualClock"]


class Clock(Protocol):
    """What the emulator needs from time. All values are seconds."""

    def now(self) -> float:
        """The current time, seconds (any origin; monotonic non-decreasing)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of clock time pass (called only when nothing is in flight)."""
        ...

    def timeout_for(self, seconds: float) -> float | None:
        """Real seconds to wait for ``seconds`` of clock time while attempts are in
        flight; ``None`` when clock time does not pass while waiting on I/O."""
        ...


class SystemClock:
    """Real time: :func:`time.time` and :func:`asyncio.sleep`."""

    def now(self) -> float:
        """Unix time, seconds."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        await asyncio.sleep(max(seconds, 0.0))

    def timeout_for(self, seconds: float) -> float | None:
        """``seconds`` itself."""
        return max(seconds, 0.0)


class VirtualClock:
    """A clock that jumps: time passes only when the emulator sleeps with nothing in
    flight, and then instantly. Deterministic; use it to run 24 h in milliseconds.

    Args:
        start: The initial time, seconds.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        """The virtual time, seconds."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` at once (yields to the event loop once)."""
        self.advance(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (negative values are ignored)."""
        self._now += max(seconds, 0.0)

    def timeout_for(self, seconds: float) -> float | None:
        """``None``: virtual time stands still while attempts are in flight."""
        return None


class ScaledClock:
    """Real time running ``speed`` times faster: delays shrink, order is kept.

    With ``speed=600`` a 1-minute retry delay takes 0.1 s and the 24-hour life of an
    event 144 s. Starts at the current Unix time.

    Args:
        speed: How many clock seconds pass per real second (> 0).

    Raises:
        ConfigurationError: ``speed`` is not positive (or is NaN).
    """

    def __init__(self, speed: float) -> None:
        if not speed > 0:  # NaN too
            raise ConfigurationError("speed must be positive")
        self.speed = float(speed)
        self._origin = time.time()
        self._start = time.perf_counter()

    def now(self) -> float:
        """Compressed time, seconds."""
        return self._origin + (time.perf_counter() - self._start) * self.speed

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds / speed`` real seconds."""
        await asyncio.sleep(max(seconds, 0.0) / self.speed)

    def timeout_for(self, seconds: float) -> float | None:
        """``seconds / speed``."""
        return max(seconds, 0.0) / self.speed
