"""The idempotency store contract: tests over a ``store`` fixture, and their ``key``.

``tests/stores/test_contract.py`` imports them to run against every backend in
``BACKENDS`` (``tests/stores/conftest.py``); ``tests/frameworks/django/test_store_contract.py``
imports them to run against :class:`DjangoStore`.

Durations are real seconds kept short, so that shared-server backends (whose expiry
runs on the server's clock) run the very same tests.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from service_webhooks import WebhookReceiver
from service_webhooks.stores import ClaimState, IdempotencyStore

LEASE = 30.0
RETAIN = 3600.0


@pytest.fixture
def key() -> str:
    return f"key-{uuid.uuid4().hex}"


def test_first_claim_is_new_and_the_next_is_in_flight(store: IdempotencyStore, key: str) -> None:
    assert store.claim(key, "a", LEASE) is ClaimState.NEW
    assert store.claim(key, "b", LEASE) is ClaimState.IN_FLIGHT


def test_completed_key_answers_done(store: IdempotencyStore, key: str) -> None:
    store.claim(key, "a", LEASE)
    assert store.complete(key, "a", RETAIN) is True
    assert store.claim(key, "b", LEASE) is ClaimState.DONE
    assert store.release(key, "a") is False  # done is final
    assert store.claim(key, "c", LEASE) is ClaimState.DONE


def test_release_lets_the_retry_claim(store: IdempotencyStore, key: str) -> None:
    store.claim(key, "a", LEASE)
    assert store.release(key, "a") is True
    assert store.claim(key, "b", LEASE) is ClaimState.NEW


def test_release_by_another_token_is_refused(store: IdempotencyStore, key: str) -> None:
    store.claim(key, "a", LEASE)
    assert store.release(key, "intruder") is False
    assert store.claim(key, "b", LEASE) is ClaimState.IN_FLIGHT


def test_expired_lease_is_claimable_again(store: IdempotencyStore, key: str) -> None:
    assert store.claim(key, "dead-worker", 0.2) is ClaimState.NEW
    time.sleep(0.35)
    assert store.claim(key, "retry", LEASE) is ClaimState.NEW
    # the worker that outlived its lease can neither release nor complete the new claim
    assert store.release(key, "dead-worker") is False
    assert store.complete(key, "dead-worker", RETAIN) is False
    assert store.claim(key, "third", LEASE) is ClaimState.IN_FLIGHT
    assert store.complete(key, "retry", RETAIN) is True
    assert store.claim(key, "fourth", LEASE) is ClaimState.DONE


def test_complete_after_an_unclaimed_lease_expiry_still_records(
    store: IdempotencyStore, key: str
) -> None:
    store.claim(key, "slow", 0.2)
    time.sleep(0.35)
    assert store.complete(key, "slow", RETAIN) is True
    assert store.claim(key, "next", LEASE) is ClaimState.DONE


def test_done_record_expires_after_its_retention(store: IdempotencyStore, key: str) -> None:
    store.claim(key, "a", LEASE)
    store.complete(key, "a", 0.2)
    time.sleep(0.35)
    assert store.claim(key, "b", LEASE) is ClaimState.NEW


def test_claiming_again_with_the_same_token_renews_the_claim(
    store: IdempotencyStore, key: str
) -> None:
    assert store.claim(key, "owner", LEASE) is ClaimState.NEW
    assert store.claim(key, "owner", LEASE) is ClaimState.NEW  # a renewal, not a duplicate
    assert store.claim(key, "other", LEASE) is ClaimState.IN_FLIGHT
    assert store.release(key, "owner") is True  # still the owner's claim
    assert store.claim(key, "other", LEASE) is ClaimState.NEW


def test_renewal_moves_the_expiry_past_the_first_lease(store: IdempotencyStore, key: str) -> None:
    assert store.claim(key, "owner", 1.0) is ClaimState.NEW
    time.sleep(0.6)
    assert store.claim(key, "owner", 1.0) is ClaimState.NEW
    time.sleep(0.6)  # past the first lease's end, inside the renewed one
    assert store.claim(key, "retry", LEASE) is ClaimState.IN_FLIGHT
    assert store.complete(key, "owner", RETAIN) is True
    assert store.claim(key, "retry", LEASE) is ClaimState.DONE


def test_renewal_after_the_lease_ran_out_unclaimed_keeps_the_claim(
    store: IdempotencyStore, key: str
) -> None:
    assert store.claim(key, "owner", 0.2) is ClaimState.NEW
    time.sleep(0.35)
    assert store.claim(key, "owner", LEASE) is ClaimState.NEW
    assert store.claim(key, "retry", LEASE) is ClaimState.IN_FLIGHT


def test_renewal_cannot_take_back_a_claim_another_token_took_over(
    store: IdempotencyStore, key: str
) -> None:
    assert store.claim(key, "slow", 0.2) is ClaimState.NEW
    time.sleep(0.35)
    assert store.claim(key, "retry", LEASE) is ClaimState.NEW
    assert store.claim(key, "slow", LEASE) is ClaimState.IN_FLIGHT
    assert store.release(key, "slow") is False
    assert store.complete(key, "retry", RETAIN) is True


def test_renewing_a_done_key_leaves_it_done(store: IdempotencyStore, key: str) -> None:
    store.claim(key, "owner", LEASE)
    assert store.complete(key, "owner", RETAIN) is True
    assert store.claim(key, "owner", LEASE) is ClaimState.DONE
    assert store.claim(key, "other", LEASE) is ClaimState.DONE


async def test_async_renewal_follows_the_same_contract(store: IdempotencyStore, key: str) -> None:
    assert await store.aclaim(key, "owner", 1.0) is ClaimState.NEW
    await asyncio.sleep(0.6)
    assert await store.aclaim(key, "owner", 1.0) is ClaimState.NEW
    await asyncio.sleep(0.6)
    assert await store.aclaim(key, "retry", LEASE) is ClaimState.IN_FLIGHT
    assert await store.acomplete(key, "owner", RETAIN) is True
    assert await store.aclaim(key, "owner", LEASE) is ClaimState.DONE


def test_keys_are_independent(store: IdempotencyStore, key: str) -> None:
    assert store.claim(key + "-1", "a", LEASE) is ClaimState.NEW
    assert store.claim(key + "-2", "a", LEASE) is ClaimState.NEW


def test_fifty_concurrent_claims_give_exactly_one_new(store: IdempotencyStore, key: str) -> None:
    barrier = threading.Barrier(50)
    results: list[ClaimState] = []
    lock = threading.Lock()

    def claim(n: int) -> None:
        barrier.wait()
        state = store.claim(key, f"t{n}", LEASE)
        with lock:
            results.append(state)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(ClaimState.NEW) == 1
    assert results.count(ClaimState.IN_FLIGHT) == 49


async def test_fifty_concurrent_async_claims_give_exactly_one_new(
    store: IdempotencyStore, key: str
) -> None:
    results = await asyncio.gather(*(store.aclaim(key, f"t{n}", LEASE) for n in range(50)))
    assert results.count(ClaimState.NEW) == 1
    assert results.count(ClaimState.IN_FLIGHT) == 49


async def test_async_twins_follow_the_same_contract(store: IdempotencyStore, key: str) -> None:
    assert await store.aclaim(key, "a", LEASE) is ClaimState.NEW
    assert await store.arelease(key, "b") is False
    assert await store.arelease(key, "a") is True
    assert await store.aclaim(key, "c", LEASE) is ClaimState.NEW
    assert await store.acomplete(key, "c", RETAIN) is True
    assert await store.aclaim(key, "d", LEASE) is ClaimState.DONE


def test_receiver_retries_after_a_handler_failure_and_skips_done_keys(
    store: IdempotencyStore, signed: Callable[..., tuple[bytes, str]], secret: str
) -> None:
    receiver = WebhookReceiver(secrets=secret, store=store)
    calls: list[str] = []

    @receiver.on("note.created")
    def handler(event: object) -> None:
        calls.append("run")
        if len(calls) == 1:
            raise RuntimeError("database hiccup")

    body, header = signed(
        f'{{"eventName":"note.created","version":1,"data":{{"id":"{uuid.uuid4()}","author":"a","text":"t"}}}}'.encode()
    )
    assert receiver.process(body, header).status == 500
    assert receiver.process(body, header).status == 200
    assert receiver.process(body, header).reason == "duplicate"
    assert calls == ["run", "run"]
