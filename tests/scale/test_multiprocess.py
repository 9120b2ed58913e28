"""Four uvicorn worker processes share one store: every event's handler runs exactly once.

2,000 distinct events, each delivered 3 times, all 6,000 deliveries shuffled and sent
concurrently (as the service's retries and duplicates may arrive, spec §6.1). The
handler records each run in the shared server (``HINCRBY`` in Redis, an ``INSERT`` in
PostgreSQL), so the count is read from outside the receiver processes. A delivery
answered 503 (its twin is in flight) is retried, as the service would.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.services]

EVENTS = 2000
COPIES = 3


def test_four_workers_run_each_handler_exactly_once(
    backend: Any, serve: Any, deliver: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"SW_SCALE_STORE": backend.store_url, "SW_SCALE_COUNT": backend.count_target}
    env["SW_SCALE_SLEEP"] = "0.01"  # keeps twins in flight at the same time
    started = time.monotonic()
    server = serve(env, workers=4)
    note_ids = [f"n-{n}" for n in range(EVENTS)]
    deliveries = note_ids * COPIES
    random.Random(6).shuffle(deliveries)

    answers = deliver(server.url, deliveries, concurrency=48)
    statuses = Counter((a.status, a.reason) for a in answers)
    assert set(statuses) <= {(200, "processed"), (200, "duplicate"), (503, "in_flight")}
    assert statuses[(200, "processed")] == EVENTS

    # the service retries what was answered 503; by now every twin is done
    retried = [a.note_id for a in answers if a.status == 503]
    assert {a.reason for a in deliver(server.url, retried)} <= {"duplicate"}
    elapsed = time.monotonic() - started

    counts = backend.counts()
    assert len(counts) == EVENTS
    assert set(counts.values()) == {1}
    with capsys.disabled():
        print(
            f"\n[{backend.name}] 4 workers, {len(deliveries)} deliveries of {EVENTS} events: "
            f"{dict(statuses)}, {len(retried)} retried, handler runs {sum(counts.values())}, "
            f"{elapsed:.1f} s"
        )
