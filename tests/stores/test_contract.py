"""The idempotency store contract (``tests/helpers/sw_store_contract.py``) over every
backend in ``BACKENDS`` (``tests/stores/conftest.py`` provides the ``store`` fixture)."""

from __future__ import annotations

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
