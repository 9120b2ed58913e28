"""Rate limit (spec §8): 1000 per minute per subscription and per organization; throttles."""

from __future__ import annotations

import pytest

from service_webhooks._exceptions import ConfigurationError
from service_webhooks.delivery import RateLimiter, delivery_keys


def test_over_the_limit_waits_for_the_oldest_to_leave_the_window() -> None:
    limiter = RateLimiter(3, 60)
    keys = ["k"]
    assert [limiter.acquire(keys, t) for t in (0, 10, 20)] == [None, None, None]
    assert limiter.acquire(keys, 30) == 60  # not rejected: told when
    assert limiter.count("k", 30) == 3  # the refused try recorded nothing
    assert limiter.acquire(keys, 60) is None
    assert limiter.acquire(keys, 61) == 70


def test_every_key_must_allow_it() -> None:
    limiter = RateLimiter(2, 60)
    sub_a, sub_b = delivery_keys("org", "ep-a"), delivery_keys("org", "ep-b")
    assert limiter.acquire(sub_a, 0) is None
    assert limiter.acquire(sub_b, 1) is None
    assert limiter.acquire(sub_a, 2) == 60  # organization budget spent
    assert limiter.acquire(delivery_keys("other-org", "ep-a"), 2) is None


def test_saturated_limit_holds_every_minute() -> None:
    """Offer 50 attempts a second (3000/min) for 10 minutes: 1000 go through each minute,
    and no sliding 60 s window ever holds more than 1000."""
    limiter = RateLimiter()
    keys = delivery_keys("o", "ep")
    sent = [t / 50 for t in range(50 * 600) if limiter.acquire(keys, t / 50) is None]
    per_minute = [sum(m * 60 <= t < (m + 1) * 60 for t in sent) for m in range(10)]
    assert all(990 <= n <= 1000 for n in per_minute), per_minute
    start = 0
    for end, t in enumerate(sent):
        while sent[start] + 60 <= t:
            start += 1
        assert end - start + 1 <= 1000


@pytest.mark.parametrize(("limit", "window"), [(0, 60), (10, 0), (10, -1)])
def test_invalid_limits(limit: int, window: float) -> None:
    with pytest.raises(ConfigurationError):
        RateLimiter(limit, window)
