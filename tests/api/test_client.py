"""Client scenarios, each run by the sync and async clients, in-process and over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import httpx
import pytest

from service_webhooks.api import (
    NEVER,
    APIResponseError,
    APIStatusError,
    AuthenticationError,
    HistoryPage,
    NotFoundError,
    Operation,
    OperationsPage,
    OperationState,
    OperationType,
    PaginationError,
    ParameterError,
    PrivacySettingsVersion,
    RateLimitError,
    ServerError,
)
from service_webhooks.testing.fake_api import FakeAPI, Fault, make_operations

if TYPE_CHECKING:
    from conftest import Api

API_KEY = "test-key"  # the key the ``api`` fixture's clients use
HISTORY = "/settings/recording/v1/privacy/history"
OPERATIONS = "/operations/v1"


async def test_every_request_sends_the_key_as_given_and_accepts_json(api: Api) -> None:
    await api.history()
    await api.list_operations()
    await api.cancel("op-0000")
    assert len(api.fake.requests) == 3
    for request in api.fake.requests:
        assert request.headers["authorization"] == f"Basic {API_KEY}"
        assert request.headers["accept"] == "application/json"


async def test_history_page_defaults_to_20_most_recent_first(api: Api) -> None:
    page = await api.history()
    assert isinstance(page, HistoryPage)
    assert len(page.versions) == 20
    assert all(isinstance(v, PrivacySettingsVersion) for v in page.versions)
    assert page.next_pagination_token
    assert api.fake.requests[0].params == [("limit", "20")]
    stamps = [v.metadata.last_updated for v in page.versions]
    assert stamps == sorted(stamps, reverse=True)


async def test_history_iterates_across_pages_until_the_token_is_empty(api: Api) -> None:
    pager = api.iter_history(limit=5)
    pages = await api.pages(pager)
    assert len(pages) == 9  # 42 versions, 5 per page
    assert [len(p.versions) for p in pages] == [5] * 8 + [2]
    assert pages[-1].next_pagination_token == ""
    versions = [v for p in pages for v in p.versions]
    assert [v.metadata.last_updated for v in versions] == [
        datetime.fromisoformat(raw["metadata"]["lastUpdated"]) for raw in api.fake.versions
    ]
    tokens = [dict(r.params).get("paginationToken") for r in api.fake.requests]
    assert tokens[0] is None
    assert len(set(tokens[1:])) == 8
    assert pager.pages_fetched == 9


async def test_history_items_iterator_yields_every_version(api: Api) -> None:
    versions = await api.items(api.iter_history(limit=100))
    assert len(versions) == 42
    assert len(api.fake.requests) == 1


async def test_history_starts_from_a_given_token(api: Api) -> None:
    first = await api.history(limit=10)
    second = await api.history(limit=10, pagination_token=first.next_pagination_token)
    assert second.versions[0] == (await api.items(api.iter_history(limit=11)))[10]
    assert ("paginationToken", first.next_pagination_token) in api.fake.requests[1].params


@pytest.mark.parametrize("limit", [0, 101, -1, True, 2.5, "10"])
async def test_history_limit_is_validated_before_any_request(api: Api, limit: object) -> None:
    with pytest.raises(ParameterError, match="limit"):
        await api.history(limit=limit)
    with pytest.raises(ParameterError):
        api.iter_history(limit=limit)
    assert api.fake.requests == []


@pytest.mark.parametrize("limit", [1, 100])
async def test_history_limit_bounds_are_accepted(api: Api, limit: int) -> None:
    page = await api.history(limit=limit)
    assert len(page.versions) == min(limit, 42)
    assert dict(api.fake.requests[0].params)["limit"] == str(limit)


async def test_operations_keep_filters_on_every_page(api: Api) -> None:
    api.fake.operations[:], _ = make_operations(300)  # 20 of each (state, type)
    pager = api.iter_operations(state="COMPLETED", type=OperationType.DELETE_USER, limit=3)
    pages = await api.pages(pager)
    expected = [
        op["id"]
        for op in api.fake.operations
        if op["state"] == "COMPLETED" and op["type"] == "DELETE_USER"
    ]
    assert len(expected) == 20
    assert len(pages) == 7
    assert [op.id for p in pages for op in p.operations] == expected
    for request in api.fake.requests:
        params = dict(request.params)
        assert params["state"] == "COMPLETED"
        assert params["type"] == "DELETE_USER"
        assert params["limit"] == "3"


async def test_operations_iterate_more_than_five_pages_with_a_changing_limit(api: Api) -> None:
    def grow(pager: object, page: OperationsPage) -> None:
        pager.limit = 4  # type: ignore[attr-defined]

    pager = api.iter_operations(state=OperationState.PENDING, limit=2)
    pages = await api.pages(pager, on_page=grow)
    operations = [op for p in pages for op in p.operations]
    pending = [op["id"] for op in api.fake.operations if op["state"] == "PENDING"]
    assert [op.id for op in operations] == pending
    assert len(pages) >= 5
    limits = [dict(r.params)["limit"] for r in api.fake.requests]
    assert limits == ["2"] + ["4"] * (len(pages) - 1)
    assert all(dict(r.params)["state"] == "PENDING" for r in api.fake.requests)


async def test_operations_without_limit_let_the_service_send_100(api: Api) -> None:
    page = await api.list_operations()
    assert len(page.operations) == len(api.fake.operations) == 62
    assert "limit" not in dict(api.fake.requests[0].params)
    assert not page.next_pagination_token


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"state": ""}, "state"),
        ({"state": 1}, "state"),
        ({"type": ""}, "type"),
        ({"type": 3}, "type"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
    ],
)
async def test_operations_arguments_are_validated_before_sending(
    api: Api, kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(ParameterError, match=match):
        await api.list_operations(**kwargs)
    with pytest.raises(ParameterError, match=match):
        api.iter_operations(**kwargs)
    assert api.fake.requests == []


async def test_operations_filters_accept_values_added_later(api: Api) -> None:
    """Spec §9: enums are open; a state or type unknown today is sent as it is."""
    page = await api.list_operations(state="PAUSED", type="DELETE_USER")
    assert [op.id for op in page.operations] == ["op-future-state"]
    page = await api.list_operations(type="ARCHIVE_PROJECT")
    assert [op.id for op in page.operations] == ["op-future-type"]
    assert dict(api.fake.requests[0].params) == {"state": "PAUSED", "type": "DELETE_USER"}


async def test_changing_the_limit_to_an_invalid_value_is_refused(api: Api) -> None:
    pager = api.iter_operations(limit=5)
    with pytest.raises(ParameterError):
        pager.limit = 500
    assert pager.limit == 5


async def test_unknown_values_and_fields_are_tolerated(api: Api) -> None:
    operations = await api.items(api.iter_operations(limit=10))
    by_id = {op.id: op for op in operations}
    assert by_id["op-future-type"].type == "ARCHIVE_PROJECT"
    assert by_id["op-future-state"].state == "PAUSED"
    assert isinstance(by_id["op-future-state"], Operation)
    versions = await api.items(api.iter_history(limit=50))
    assert versions[-1].element_blocks[0].type == "BLOCK_MASK"
    assert "consentBanner" in api.fake.versions[0]  # ignored, not an error
    assert versions[0].default_privacy_mode == "PRIVACY_MODE_OFF"


async def test_zero_time_is_kept_and_reads_as_never(api: Api) -> None:
    versions = await api.items(api.iter_history(limit=100))
    never = [b for v in versions for b in v.element_blocks if b.never_updated]
    assert len(never) == 14  # every third of 42
    assert all(b.last_updated == NEVER for b in never)
    assert datetime(1, 1, 1, tzinfo=UTC) == NEVER
    operations = (await api.list_operations(state="PENDING")).operations
    assert operations
    assert all(op.never_finished for op in operations)
    completed = (await api.list_operations(state="COMPLETED")).operations
    assert not any(op.never_finished for op in completed)
    assert all(op.created_at.tzinfo is not None for op in completed)


async def test_nullables_decode_as_none(api: Api) -> None:
    operations = (await api.list_operations()).operations
    assert any(op.details is None for op in operations)
    assert any(op.details == {"userId": "user-0"} for op in operations)
    assert any(op.results is None for op in operations)
    versions = (await api.history()).versions
    assert all(b.targeting_conditions is None for v in versions for b in v.element_blocks)


async def test_cancel_escapes_the_id_as_one_path_segment(api: Api) -> None:
    odd = "batch/42 ?#%x"
    api.fake.operations.append(dict(api.fake.operations[0], id=odd, state="PENDING"))
    api.fake.cancelable.add(odd)
    await api.cancel(odd)
    request = api.fake.requests[-1]
    assert request.method == "POST"
    assert request.raw_path == "/operations/v1/batch%2F42%20%3F%23%25x/cancel"
    assert api.fake.operations[-1]["state"] == "FAILED"


async def test_cancel_escapes_dot_segments(api: Api) -> None:
    with pytest.raises(NotFoundError):
        await api.cancel("..")
    assert api.fake.requests[-1].raw_path == "/operations/v1/%2E%2E/cancel"


async def test_cancel_changes_the_operation(api: Api) -> None:
    await api.cancel("op-0000")
    page = await api.list_operations(state="FAILED")
    cancelled = next(op for op in page.operations if op.id == "op-0000")
    assert cancelled.error_details == "cancelled"
    assert not cancelled.never_finished


async def test_cancel_of_a_non_cancelable_operation_is_a_status_error(api: Api) -> None:
    with pytest.raises(APIStatusError) as caught:
        await api.cancel("op-0001")
    error = caught.value
    assert type(error) is APIStatusError
    assert error.status_code == 409
    assert error.body == {"message": "operation 'op-0001' is not cancelable"}
    assert error.method == "POST"
    assert error.path == "/operations/v1/op-0001/cancel"
    assert api.sleeps == []


async def test_an_error_names_the_escaped_path_the_service_received(api: Api) -> None:
    with pytest.raises(NotFoundError) as caught:
        await api.cancel("a/b")
    assert caught.value.path == "/operations/v1/a%2Fb/cancel"  # not .../a/b/cancel
    assert api.fake.requests[0].raw_path == caught.value.path


async def test_cancel_refuses_an_empty_id_before_sending(api: Api) -> None:
    with pytest.raises(ParameterError):
        await api.cancel("")
    assert api.fake.requests == []


async def test_unknown_operation_is_not_found(api: Api) -> None:
    with pytest.raises(NotFoundError) as caught:
        await api.cancel("op-missing")
    assert caught.value.status_code == 404
    assert caught.value.body == {"message": "operation 'op-missing' not found"}


async def test_wrong_key_is_an_authentication_error(api: Api) -> None:
    other = api.with_options("wrong-key")
    with pytest.raises(AuthenticationError) as caught:
        await other.history()
    assert caught.value.status_code == 401
    assert caught.value.method == "GET"
    assert caught.value.path == HISTORY
    assert "wrong-key" not in str(caught.value) + repr(caught.value)
    assert api.sleeps == []


async def test_key_without_permission_is_an_authentication_error(api: Api) -> None:
    reader = api.with_options("read-only-key")
    assert len((await reader.list_operations(limit=3)).operations) == 3
    with pytest.raises(AuthenticationError) as caught:
        await reader.cancel("op-0000")
    assert caught.value.status_code == 403


async def test_429_is_retried_after_retry_after(api: Api) -> None:
    api.fake.inject(Fault(status=429, retry_after="2"), Fault(status=429, retry_after="0.25"))
    page = await api.history(limit=3)
    assert len(page.versions) == 3
    assert api.sleeps == [2.0, 0.25]
    assert len(api.fake.requests) == 3


async def test_429_on_cancel_is_retried(api: Api) -> None:
    api.fake.inject(Fault(status=429, retry_after="1", method="POST"))
    await api.cancel("op-0000")
    assert api.sleeps == [1.0]
    assert [r.method for r in api.fake.requests] == ["POST", "POST"]


async def test_rate_limit_error_when_retries_run_out(api: Api) -> None:
    api.fake.inject(*[Fault(status=429, retry_after="1")] * 3)
    with pytest.raises(RateLimitError) as caught:
        await api.list_operations()
    assert caught.value.retry_after == 1.0
    assert caught.value.status_code == 429
    assert api.sleeps == [1.0, 1.0]  # max_retries=2 by default


async def test_too_long_retry_after_is_not_waited_for(api: Api) -> None:
    api.fake.inject(Fault(status=429, retry_after="3600"))
    with pytest.raises(RateLimitError) as caught:
        await api.history()
    assert caught.value.retry_after == 3600.0
    assert api.sleeps == []


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_gateway_errors_are_retried_for_gets_with_backoff(api: Api, status: int) -> None:
    api.fake.inject(Fault(status=status), Fault(status=status))
    page = await api.list_operations(limit=1)
    assert len(page.operations) == 1
    assert api.sleeps == [0.375, 0.75]  # jitter 0.5: cap 0.5 then 1.0, 3/4 of each


async def test_server_error_retry_after_is_honoured(api: Api) -> None:
    api.fake.inject(Fault(status=503, retry_after="4"))
    await api.history()
    assert api.sleeps == [4.0]


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_on_cancel_are_not_retried(api: Api, status: int) -> None:
    api.fake.inject(Fault(status=status, method="POST"))
    with pytest.raises(ServerError) as caught:
        await api.cancel("op-0000")
    assert caught.value.status_code == status
    assert api.sleeps == []
    assert len(api.fake.requests) == 1


async def test_500_is_a_server_error_and_not_retried(api: Api) -> None:
    api.fake.inject(Fault(status=500, body=b"oops"))
    with pytest.raises(ServerError) as caught:
        await api.history()
    assert caught.value.status_code == 500
    assert caught.value.body is None  # not JSON
    assert api.sleeps == []


async def test_retries_can_be_disabled(api: Api) -> None:
    client = api.with_options(max_retries=0)
    api.fake.inject(Fault(status=503))
    with pytest.raises(ServerError):
        await client.history()
    assert api.sleeps == []


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"versions": [{"metadata": {"created": "2024-01-01T00:00:00"}}]}',  # naive time
        b'{"versions": [{"elementBlocks": [{"selector": 1}]}]}',
    ],
)
async def test_a_2xx_with_a_bad_body_is_a_response_error(api: Api, body: bytes) -> None:
    api.fake.inject(Fault(status=200, body=body))
    with pytest.raises(APIResponseError) as caught:
        await api.history()
    assert caught.value.status_code == 200
    assert caught.value.path == HISTORY


DEEP = b"[" * 100_000 + b"]" * 100_000  # deeper than msgspec follows: a RecursionError


@pytest.mark.parametrize(
    "body",
    [
        b"{}",  # a proxy's or a gateway's object, not a page
        b'{"message": "maintenance"}',
        b'{"next_pagination_token": ""}',
        b'{"nextPaginationToken": "", "operations": []}',  # the other listing's page
    ],
)
async def test_a_2xx_without_the_listings_array_is_a_response_error(api: Api, body: bytes) -> None:
    # Not an empty last page: iterating would end silently, every version lost.
    api.fake.inject(Fault(status=200, body=body))
    with pytest.raises(APIResponseError, match="versions"):
        await api.history()
    api.fake.inject(Fault(status=200, body=body.replace(b"operations", b"versions")))
    with pytest.raises(APIResponseError, match="operations"):
        await api.list_operations()
    api.fake.inject(Fault(status=200, body=body))
    with pytest.raises(APIResponseError):
        await api.items(api.iter_history())


async def test_a_2xx_nested_too_deeply_is_a_response_error(api: Api) -> None:
    # Undocumented fields (``details``, spec §2.8) hold any JSON; msgspec's own
    # RecursionError must not escape the client.
    operation = b'{"id": "x", "type": "T", "state": "S", "createdAt": "2024-01-01T00:00:00Z"'
    for nested in (b', "details": ' + DEEP + b"}", b', "later": ' + DEEP + b"}"):
        api.fake.inject(Fault(status=200, body=b'{"operations": [' + operation + nested + b"]}"))
        with pytest.raises(APIResponseError, match="nested too deeply") as caught:
            await api.list_operations()
        assert caught.value.status_code == 200


async def test_an_error_body_nested_too_deeply_is_a_status_error(api: Api) -> None:
    api.fake.inject(Fault(status=404, body=b'{"message": ' + DEEP + b"}"))
    with pytest.raises(NotFoundError) as caught:
        await api.history()
    assert caught.value.body is None


async def test_a_repeated_token_stops_the_iteration(api: Api) -> None:
    api.fake.repeat_tokens = True
    pager = api.iter_operations(limit=5)
    with pytest.raises(PaginationError) as caught:
        await api.items(pager)
    assert len(api.fake.requests) == 2
    assert caught.value.token == dict(api.fake.requests[1].params)["paginationToken"]
    assert caught.value.path == OPERATIONS


async def test_a_missing_last_token_ends_the_iteration(api: Api) -> None:
    api.fake.omit_last_token = True
    versions = await api.items(api.iter_history(limit=20))
    assert len(versions) == 42
    assert len(api.fake.requests) == 3


async def test_an_error_mid_iteration_surfaces_after_earlier_pages(api: Api) -> None:
    api.fake.inject(Fault(status=404, path=OPERATIONS))
    pager = api.iter_operations(limit=10)
    with pytest.raises(NotFoundError):
        await api.items(pager)


async def test_empty_listing(api: Api) -> None:
    api.fake.versions.clear()
    assert await api.items(api.iter_history()) == []


def test_default_fake_data_covers_every_state_and_type() -> None:
    operations, cancelable = make_operations()
    pairs = {(op["state"], op["type"]) for op in operations}
    assert {(s.value, t.value) for s in OperationState for t in OperationType} <= pairs
    assert cancelable
    assert FakeAPI().cancelable == cancelable


async def test_the_fake_refuses_a_token_used_with_other_filters(api: Api) -> None:
    first = await api.list_operations(state="PENDING", limit=2)
    with pytest.raises(APIStatusError) as caught:
        await api.list_operations(
            state="FAILED", limit=2, pagination_token=first.next_pagination_token
        )
    assert caught.value.status_code == 400
    assert caught.value.body == {"message": "filter parameters changed between paged requests"}


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/settings/recording/v1/privacy", 404),
        ("GET", "/operations/v1/op-0000/cancel", 405),
        ("POST", "/operations/v1", 405),
    ],
)
def test_the_fakes_own_404_and_405_are_json_like_its_other_errors(
    fake: FakeAPI, method: str, path: str, status: int
) -> None:
    """The fake documents ``{"message": ...}`` error bodies; Starlette's were plain text."""
    with httpx.Client(transport=fake.sync_transport(), base_url="http://fake") as http:
        response = http.request(method, path, headers={"Authorization": "Basic test-key"})
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json()["message"]


@pytest.mark.parametrize("raw", ["5_0", " 5", "+5", "\u0665", "5.0", "abc", ""])
async def test_the_fake_refuses_a_limit_that_is_no_integer_text(raw: str) -> None:
    """The fake reads ``limit`` as ASCII digits, not whatever Python's ``int()``
    takes (``5_0`` was 50; ``" 5"`` and ``"+5"`` were 5)."""
    transport = httpx.ASGITransport(FakeAPI(api_key="k"))
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
        response = await client.get(
            "/settings/recording/v1/privacy/history",
            params={"limit": raw},
            headers={"Authorization": "Basic k"},
        )
    assert response.status_code == 400
    assert response.json() == {"message": f"limit must be an integer, got {raw!r}"}
