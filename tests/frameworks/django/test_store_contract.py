"""The shared store contract (``tests/helpers/sw_store_contract.py``) over
:class:`DjangoStore` on SQLite and on PostgreSQL.

The contract's tests are imported, not copied: the registry in
``tests/stores/conftest.py`` cannot hold a Django backend, because Django is configured
once per process and only this folder configures it (with its own databases).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connections
from sw_store_contract import (
    key,
    test_async_renewal_follows_the_same_contract,
    test_async_twins_follow_the_same_contract,
    test_claiming_again_with_the_same_token_renews_the_claim,
    test_complete_after_an_unclaimed_lease_expiry_still_records,
    test_completed_key_answers_done,
    test_done_record_expires_after_its_retention,
    test_expired_lease_is_claimable_again,
    test_fifty_concurrent_async_claims_give_exactly_one_new,
    test_fifty_concurrent_claims_give_exactly_one_new,
    test_first_claim_is_new_and_the_next_is_in_flight,
    test_keys_are_independent,
    test_receiver_retries_after_a_handler_failure_and_skips_done_keys,
    test_release_by_another_token_is_refused,
    test_release_lets_the_retry_claim,
    test_renewal_after_the_lease_ran_out_unclaimed_keeps_the_claim,
    test_renewal_cannot_take_back_a_claim_another_token_took_over,
    test_renewal_moves_the_expiry_past_the_first_lease,
    test_renewing_a_done_key_leaves_it_done,
)

from service_webhooks.adapters.django.store import DjangoStore
from service_webhooks.stores import ClaimState

__all__ = [
    "key",
    "test_async_renewal_follows_the_same_contract",
    "test_async_twins_follow_the_same_contract",
    "test_claiming_again_with_the_same_token_renews_the_claim",
    "test_complete_after_an_unclaimed_lease_expiry_still_records",
    "test_completed_key_answers_done",
    "test_done_record_expires_after_its_retention",
    "test_expired_lease_is_claimable_again",
    "test_fifty_concurrent_async_claims_give_exactly_one_new",
    "test_fifty_concurrent_claims_give_exactly_one_new",
    "test_first_claim_is_new_and_the_next_is_in_flight",
    "test_keys_are_independent",
    "test_receiver_retries_after_a_handler_failure_and_skips_done_keys",
    "test_release_by_another_token_is_refused",
    "test_release_lets_the_retry_claim",
    "test_renewal_after_the_lease_ran_out_unclaimed_keeps_the_claim",
    "test_renewal_cannot_take_back_a_claim_another_token_took_over",
    "test_renewal_moves_the_expiry_past_the_first_lease",
    "test_renewing_a_done_key_leaves_it_done",
]


class _RequestScopedStore(DjangoStore):
    """Closes a worker thread's connection after each call, as Django does when a
    request finishes (the contract's threads are not requests)."""

    def _finish(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            connections[self.using].close()

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        try:
            return super().claim(key, token, lease)
        finally:
            self._finish()

    def complete(self, key: str, token: str, retention: float) -> bool:
        try:
            return super().complete(key, token, retention)
        finally:
            self._finish()

    def release(self, key: str, token: str) -> bool:
        try:
            return super().release(key, token)
        finally:
            self._finish()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[DjangoStore]:
    alias = "default" if request.param == "sqlite" else request.getfixturevalue("pg")
    yield _RequestScopedStore(using=alias)
    connections.close_all()


def test_the_contract_was_loaded() -> None:
    loaded = [
        name
        for name in globals()
        if name.startswith("test_") and name != "test_the_contract_was_loaded"
    ]
    assert len(loaded) >= 10
