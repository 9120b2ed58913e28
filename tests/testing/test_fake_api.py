"""The fake API under a frozen clock: a test that freezes time (freezegun) still gets
its answers, its injected delays and a server that stops."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from freezegun import freeze_time

from service_webhooks.api import Client
from service_webhooks.testing.fake_api import FakeAPI, Fault


def real_seconds() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)  # freezegun leaves it running


def finishes(target: object, within: float) -> bool:
    """Whether ``target()`` returns within ``within`` real seconds (a frozen event loop
    would wait forever: the call is left behind in a daemon thread)."""
    assert callable(target)
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(within)
    return not thread.is_alive()


@pytest.mark.e2e
def test_the_server_stops_and_delays_end_under_a_frozen_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # uvloop's clock is never frozen
    fake = FakeAPI()
    before = set(threading.enumerate())
    with freeze_time("2025-01-01 12:00:00"):
        started = real_seconds()
        with fake.serve() as base_url, Client("test-key", base_url=base_url) as client:
            fake.inject(Fault(delay=0.05))
            assert len(client.privacy_settings.history(limit=3).versions) == 3
        assert real_seconds() - started < 5  # the server's shutdown timers ran
    assert set(threading.enumerate()) <= before  # and its thread is gone


def test_an_injected_delay_ends_under_a_frozen_clock_in_process() -> None:
    fake = FakeAPI()
    fake.inject(Fault(delay=0.05))
    client = Client("test-key", base_url="http://fake", transport=fake.sync_transport())
    pages: list[int] = []
    with freeze_time("2025-01-01 12:00:00"):
        assert finishes(lambda: pages.append(len(client.operations.list(limit=2).operations)), 5)
    assert pages == [2]
