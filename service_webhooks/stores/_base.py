"""The idempotency store contract (spec §6.1: duplicates can occur, order is not guaranteed).

The rule (the architecture page, "Idempotency"): before a delivery's handlers run, the receiver
*claims* its idempotency key. Exactly one concurrent claimer gets ``NEW`` and runs the
handlers; the others see ``IN_FLIGHT`` (answered 503, retried later) or ``DONE``
(answered 200 without running anything). Afterwards the claimer either *completes* the
key (kept as ``DONE`` for the retention period, at least 48 h because the service
retries an event for 24 h) or *releases* it after a failure, so the retry runs the
handlers again. A claim whose process died expires after its lease and can be claimed
again.

Every claim carries a random *token*: ``complete`` and ``release`` act only on the claim
the caller owns, so a worker that outlived its lease cannot release a newer claim.

*Renewal*: a claimer whose handlers may outlive the lease keeps its claim alive by
calling ``claim(key, token, lease)`` again with the *same* token (the receiver does
so every ``lease / 3`` seconds while handlers run). While the key's record is
``IN_FLIGHT`` under that token, expired or not, as long as no other token took it
over, the call moves its expiry to now + ``lease`` and answers ``NEW``; if another
token holds a live claim it answers ``IN_FLIGHT`` (the caller lost the key and must
not complete it as its own); a ``DONE`` key stays ``DONE``. Renewal is one atomic
step, like every claim. Stop renewing before completing or releasing: a renewal
after a release would claim the key afresh.

Durations are in seconds. Backends raise whatever their driver raises when the
backing service fails; the receiver turns any such error into
:class:`~service_webhooks._exceptions.StoreError` (503, fail closed).
"""

from __future__ import annotations

import asyncio
import enum
import math
from typing import Protocol, runtime_checkable

from .._exceptions import ConfigurationError

__all__ = ["MIN_RETENTION", "ClaimState", "IdempotencyStore", "SyncStore"]

MIN_RETENTION = 48 * 3600
"""Shortest allowed retention of ``DONE`` keys, in seconds (events die after 24 h)."""

MAX_DURATION = 1000 * 365 * 24 * 3600
"""Longest lease or retention, in seconds (1000 years): every backend's expiry time stays
valid (Redis's ``PX`` milliseconds, a PostgreSQL ``timestamptz``, a ``datetime`` from year
1 to 9999); a larger one raised ``OverflowError`` at the first completion."""


def check_timeout(name: str, value: object, *, zero: bool = False) -> None:
    """Refuse a ``timeout`` that is not a finite ``int`` or ``float`` of seconds above 0
    (``zero``: at or above 0), shared by the stores and inboxes.

    Raises:
        ConfigurationError: Naming ``name``: a wrong type (a ``bool``, a ``str``), NaN,
            infinity, or a value out of range.
    """
    bound = ">= 0" if zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(
            f"{name} must be a finite number of seconds {bound}, not {type(value).__name__}"
        )
    if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
        raise ConfigurationError(
            f"{name} must be a finite number of seconds {bound}, not {value!r}"
        )


def check_prune_every(value: object) -> None:
    """Refuse a ``prune_every`` that is not an ``int`` >= 0 (0: never).

    Raises:
        ConfigurationError: A ``bool``, a ``float``, a negative number.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"prune_every must be an int >= 0 (0: never), not {value!r}")


class ClaimState(enum.Enum):
    """What :meth:`IdempotencyStore.claim` found."""

    NEW = "new"
    """No live record: the caller now holds the claim and must complete or release it."""
    IN_FLIGHT = "in_flight"
    """Another caller holds an unexpired claim."""
    DONE = "done"
    """The key was completed within its retention period."""


@runtime_checkable
class IdempotencyStore(Protocol):
    """Where idempotency keys are claimed, completed and released.

    Implementations must be safe to call from several threads (and, for shared
    backends, several processes) at once. ``a``-prefixed methods are the async twins;
    :class:`SyncStore` provides them for a blocking backend by running the blocking
    method in a worker thread.
    """

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        """Atomically claim ``key`` for ``lease`` seconds unless another live record exists.

        Claiming again with the token of the key's in-flight claim renews it (see
        the module docstring): the expiry moves to now + ``lease``.

        Args:
            key: The idempotency key (at most 200 characters).
            token: A random string identifying this claim.
            lease: Seconds after which an uncompleted claim expires.

        Returns:
            ``NEW`` when the caller got (or renewed) the claim, else ``IN_FLIGHT``
            (another token holds a live claim) or ``DONE``.
        """
        ...

    def complete(self, key: str, token: str, retention: float) -> bool:
        """Mark ``key`` done for ``retention`` seconds.

        Acts when the caller's claim (``token``) still holds, or when no live claim
        exists any more (the lease ran out but nobody re-claimed). Returns whether the
        key is now recorded as done by this call.
        """
        ...

    def release(self, key: str, token: str) -> bool:
        """Drop the caller's claim on ``key`` so a retry can claim it at once.

        Returns whether a claim owned by ``token`` was removed.
        """
        ...

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        """Async twin of :meth:`claim`."""
        ...

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        """Async twin of :meth:`complete`."""
        ...

    async def arelease(self, key: str, token: str) -> bool:
        """Async twin of :meth:`release`."""
        ...


class SyncStore:
    """Base for a blocking backend: its async twins run the sync methods in a thread."""

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        raise NotImplementedError

    def complete(self, key: str, token: str, retention: float) -> bool:
        raise NotImplementedError

    def release(self, key: str, token: str) -> bool:
        raise NotImplementedError

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        return await asyncio.to_thread(self.claim, key, token, lease)

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        return await asyncio.to_thread(self.complete, key, token, retention)

    async def arelease(self, key: str, token: str) -> bool:
        return await asyncio.to_thread(self.release, key, token)
