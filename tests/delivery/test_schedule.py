"""Retry schedule (spec §3.3, §8): 1 min doubling to a 10 min cap, jitter, dead after 24 h."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service_webhooks._exceptions import ConfigurationError
from service_webhooks.delivery import RetryPolicy


def test_base_delays_double_to_the_cap() -> None:
    policy = RetryPolicy()
    assert [policy.base_delay(n) for n in range(1, 9)] == [60, 120, 240, 480, 600, 600, 600, 600]
    assert policy.base_delay(10_000) == 600


def test_no_jitter_gives_the_exact_sequence() -> None:
    policy = RetryPolicy(jitter=0)
    assert [policy.delay(n) for n in range(1, 7)] == [60, 120, 240, 480, 600, 600]


@given(
    failed=st.integers(min_value=1, max_value=500),
    seed=st.integers(min_value=0, max_value=2**32),
    jitter=st.floats(min_value=0, max_value=0.99),
)
def test_jittered_delay_stays_within_one_and_ten_minutes(
    failed: int, seed: int, jitter: float
) -> None:
    policy = RetryPolicy(jitter=jitter)
    delay = policy.delay(failed, random.Random(seed))
    base = policy.base_delay(failed)
    assert 60 <= delay <= 600
    assert base * (1 - jitter) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9


def test_next_attempt_stops_at_the_deadline() -> None:
    policy = RetryPolicy(jitter=0)
    assert policy.deadline(1000) == 1000 + 86_400
    assert policy.next_attempt_at(0, 85_799, 30) == 86_399
    assert policy.next_attempt_at(0, 85_800, 30) is None  # would be exactly 24 h: dead
    assert policy.next_attempt_at(0, 0, 1) == 60


@pytest.mark.parametrize(
    "options",
    [
        {"initial_delay": 0},
        {"initial_delay": 700},
        {"factor": 0.5},
        {"jitter": 1.0},
        {"jitter": -0.1},
        {"dead_after": 0},
    ],
)
def test_invalid_policy(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**options)


def test_failed_attempts_count_from_one() -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy().base_delay(0)
