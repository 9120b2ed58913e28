"""Spec §3.3 / §7: every status class boundary, directly and over real sockets."""

from __future__ import annotations

from typing import Any

import pytest

from service_webhooks.delivery import Failure, Result, classify_failure, classify_status
from service_webhooks.delivery.classification import describe_status

S, T, P = Result.SUCCESS, Result.TEMPORARY_FAILURE, Result.PERMANENT_FAILURE

BOUNDARIES = [
    (100, P),
    (199, P),
    (200, S),
    (201, S),
    (204, S),
    (299, S),
    (300, P),
    (301, P),
    (302, T),
    (303, T),
    (304, P),
    (305, P),
    (306, P),
    (307, T),
    (308, P),
    (399, P),
    (400, P),
    (401, P),
    (404, P),
    (409, P),
    (422, P),
    (428, P),
    (429, T),
    (430, P),
    (499, P),
    (500, T),
    (503, T),
    (599, T),
    (600, P),
]


@pytest.mark.parametrize(("status", "expected"), BOUNDARIES)
def test_classify_status(status: int, expected: Result) -> None:
    assert classify_status(status) is expected


@pytest.mark.parametrize("failure", list(Failure))
def test_only_reserved_address_is_a_permanent_transport_failure(failure: Failure) -> None:
    expected = P if failure is Failure.RESERVED_ADDRESS else T
    assert classify_failure(failure) is expected


def test_failed_flag() -> None:
    assert [r.failed for r in Result] == [False, True, True]


# Over real sockets: the statuses a server can send as a final response (1xx cannot be).
WIRE = [
    (s, r)
    for s, r in BOUNDARIES
    if s in {200, 299, 300, 301, 302, 303, 304, 307, 308, 399, 400, 401, 429, 499, 500, 599}
]


@pytest.mark.e2e
@pytest.mark.parametrize(("status", "expected"), WIRE)
async def test_status_over_real_socket(
    status: int, expected: Result, status_server: tuple[str, Any], loopback_sender: Any
) -> None:
    url, app = status_server
    before = len(app.requests)
    async with loopback_sender(deadline=5) as sender:
        outcome = await sender.send(
            f"{url}/status/{status}", b"{}", secret="s", organization_id="o"
        )
    assert outcome.status == status
    assert outcome.result is expected
    assert outcome.failure is None
    # Exactly one request: a 3xx is never followed.
    assert len(app.requests) == before + 1


@pytest.mark.parametrize("status", [500, 503, 429, 302])
def test_a_retried_status_promises_no_retry_it_may_not_get(status: int) -> None:
    """The description of an event's last attempt, just before it dies, had said "will
    be retried"; a retry comes only within 24 h of the first attempt."""
    description = describe_status(status)
    assert "will be retried" not in description
    assert "24 h" in description
