"""MemoryStore beyond the shared contract (tests/stores/test_contract.py): what it keeps
per key, and that a long-running receiver's records do not burden the garbage collector."""

from __future__ import annotations

import gc

from service_webhooks.stores import ClaimState, MemoryStore


def test_states_read_back_as_claim_states() -> None:
    store = MemoryStore(clock=lambda: 1000.0)
    assert store.claim("k", "t1", 60) is ClaimState.NEW
    assert store.state("k") is ClaimState.IN_FLIGHT
    assert store.claim("k", "t2", 60) is ClaimState.IN_FLIGHT
    assert store.complete("k", "t1", 3600)
    assert store.state("k") is ClaimState.DONE
    assert store.claim("k", "t2", 60) is ClaimState.DONE
    assert not store.release("k", "t1")  # done records are never released


def test_kept_records_are_not_tracked_by_the_garbage_collector() -> None:
    """Every record holds only atomic values, so the collector drops it from its lists
    at its first pass: thousands of kept deliveries cost no collection time later."""
    store = MemoryStore(clock=lambda: 1000.0)
    for index in range(1000):
        key, token = f"key-{index}", f"token-{index}"
        store.claim(key, token, 60)
        if index % 2:
            store.complete(key, token, 3600)
    gc.collect()
    records = list(store._records.values())
    assert len(records) == 1000
    assert not any(gc.is_tracked(record) for record in records)
