"""When to retry and when to give up (spec §3.3, §8; the delivery emulator's decisions
where the spec is open are listed in docs/delivery.md).

The rule:

* The first attempt is made as soon as the event is queued (and the rate limit allows).
* After the n-th failed attempt (n = 1, 2, ...) the next one waits
  ``min(initial_delay * factor ** (n - 1), max_delay)``: 60, 120, 240, 480, 600, 600, ...
  seconds with the defaults.
* Jitter: the delay is drawn uniformly from ``[base * (1 - jitter), base * (1 + jitter)]``
  intersected with ``[initial_delay, max_delay]`` (default ``jitter = 0.1``, so +-10 %):
  the first retry waits 60-66 s, retries at the cap 540-600 s. No gap is ever shorter
  than 1 minute or longer than 10 minutes. ``jitter = 0`` gives the exact sequence above.
* A ``Retry-After`` header from the receiver does not change the delay.
* The event is dead ``dead_after`` seconds (24 h) after it was *queued* if no attempt
  succeeded: an attempt that would start at or after that moment is not made.

Pure: every function takes the times it needs; the random source is injectable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .._exceptions import ConfigurationError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter and a dead-after window.

    Attributes:
        initial_delay: Delay after the first failed attempt, seconds (spec: 1 minute).
        max_delay: Cap on any delay, seconds (spec: 10 minutes).
        factor: Growth per failed attempt (2: doubling).
        jitter: Relative spread of each delay, ``0 <= jitter < 1`` (0.1 = +-10 %).
        dead_after: Seconds after queueing with no success before the event is dead
            (spec: 24 hours).

    Raises:
        ConfigurationError: A delay is not positive, ``initial_delay > max_delay``,
            ``factor < 1`` or ``jitter`` outside ``[0, 1)``.
    """

    initial_delay: float = 60.0
    max_delay: float = 600.0
    factor: float = 2.0
    jitter: float = 0.1
    dead_after: float = 86_400.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_delay <= self.max_delay:
            raise ConfigurationError("need 0 < initial_delay <= max_delay (seconds)")
        if self.factor < 1:
            raise ConfigurationError("factor must be >= 1")
        if not 0 <= self.jitter < 1:
            raise ConfigurationError("jitter must be in [0, 1)")
        if self.dead_after <= 0:
            raise ConfigurationError("dead_after must be positive (seconds)")

    def base_delay(self, failed_attempts: int) -> float:
        """The delay before attempt ``failed_attempts + 1``, without jitter, in seconds.

        Raises:
            ConfigurationError: ``failed_attempts < 1``.
        """
        if failed_attempts < 1:
            raise ConfigurationError("failed_attempts counts from 1")
        # Cap the exponent so huge attempt numbers cannot overflow a float.
        exponent = min(failed_attempts - 1, 64)
        return float(min(self.initial_delay * self.factor**exponent, self.max_delay))

    def delay(self, failed_attempts: int, rng: random.Random | None = None) -> float:
        """The jittered delay before attempt ``failed_attempts + 1``, in seconds.

        Always within ``[initial_delay, max_delay]``.

        Args:
            failed_attempts: How many attempts have failed so far (>= 1).
            rng: The random source (default: the :mod:`random` module's).
        """
        base = self.base_delay(failed_attempts)
        if not self.jitter:
            return base
        low = max(base * (1 - self.jitter), self.initial_delay)
        high = min(base * (1 + self.jitter), self.max_delay)
        return (rng or random).uniform(low, high)

    def deadline(self, queued_at: float) -> float:
        """The moment the event dies if still undelivered (``queued_at + dead_after``)."""
        return queued_at + self.dead_after

    def next_attempt_at(
        self,
        queued_at: float,
        failed_at: float,
        failed_attempts: int,
        rng: random.Random | None = None,
    ) -> float | None:
        """When to make the next attempt after a temporary failure.

        Args:
            queued_at: When the event was queued (clock seconds).
            failed_at: When the last attempt ended (clock seconds).
            failed_attempts: Attempts made so far, all failed (>= 1).
            rng: The random source for the jitter.

        Returns:
            The clock time of the next attempt, or ``None`` when it would fall at or
            after :meth:`deadline`: the event is dead at the deadline.
        """
        at = failed_at + self.delay(failed_attempts, rng)
        return None if at >= self.deadline(queued_at) else at
