"""Pagers are single-use iterators: leaving a loop and iterating again resumes exactly.

Each scenario runs with the sync and the async client (``Pager`` / ``AsyncPager``),
in-process and over HTTP. The fake holds 42 privacy-settings versions and 62 operations.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from service_webhooks.api import (
    APIResponseError,
    AsyncClient,
    Client,
    NotFoundError,
    PaginationError,
)
from service_webhooks.testing.fake_api import Fault

if TYPE_CHECKING:
    from conftest import Api

OPERATIONS = "/operations/v1"
HISTORY = "/settings/recording/v1/privacy/history"


def _history_stamps(api: Api) -> list[datetime]:
    return [datetime.fromisoformat(raw["metadata"]["lastUpdated"]) for raw in api.fake.versions]


def _stamps(versions: list[Any]) -> list[datetime]:
    return [v.metadata.last_updated for v in versions]


def _operation_ids(api: Api) -> list[str]:
    return [raw["id"] for raw in api.fake.operations]


def _ids(operations: list[Any]) -> list[str]:
    return [op.id for op in operations]


async def test_a_pager_is_its_own_iterator(api: Api) -> None:
    for pager in (api.iter_history(limit=5), api.iter_operations(limit=5)):
        assert api.iterator(pager) is pager
        assert api.iterator(api.iterator(pager)) is pager
    assert api.fake.requests == []  # getting the iterator fetches nothing


async def test_iterating_after_next_resumes_in_the_held_page(api: Api) -> None:
    pager = api.iter_history(limit=5)
    first = await api.next_or_stop(pager)
    rest = await api.items(pager)
    assert len(rest) == 41
    assert _stamps([first, *rest]) == _history_stamps(api)
    assert len(api.fake.requests) == 9  # each page fetched once


async def test_iterating_after_a_break_mid_page_resumes_at_the_next_item(api: Api) -> None:
    pager = api.iter_operations(limit=5)
    head = await api.take(pager, 3)
    assert len(api.fake.requests) == 1
    rest = await api.items(pager)
    assert len(head) + len(rest) == 62
    assert _ids(head + rest) == _operation_ids(api)
    assert len(api.fake.requests) == 13


async def test_a_break_on_a_page_boundary_fetches_the_next_page_only_when_asked(
    api: Api,
) -> None:
    pager = api.iter_operations(limit=5)
    head = await api.take(pager, 5)
    assert len(api.fake.requests) == 1
    rest = await api.items(pager)
    assert _ids(head + rest) == _operation_ids(api)


@pytest.mark.parametrize("chunk", [1, 3, 5, 7])
async def test_many_breaks_neither_skip_nor_repeat(api: Api, chunk: int) -> None:
    pager = api.iter_history(limit=5)
    seen: list[Any] = []
    while taken := await api.take(pager, chunk):
        seen.extend(taken)
    assert _stamps(seen) == _history_stamps(api)
    assert len(api.fake.requests) == 9


async def test_next_after_next_walks_across_pages(api: Api) -> None:
    pager = api.iter_operations(limit=5)
    seen = [await api.next_or_stop(pager) for _ in range(62)]
    assert _ids(seen) == _operation_ids(api)
    assert await api.next_or_stop(pager) is api.stop


async def test_an_exhausted_pager_stays_exhausted(api: Api) -> None:
    pager = api.iter_history(limit=20)
    assert len(await api.items(pager)) == 42
    requests = len(api.fake.requests)
    assert await api.next_or_stop(pager) is api.stop
    assert await api.next_or_stop(pager) is api.stop
    assert await api.items(pager) == []
    assert await api.take(pager, 1) == []
    assert len(api.fake.requests) == requests  # nothing fetched again


async def test_an_empty_listing_stops_at_once_and_again(api: Api) -> None:
    api.fake.versions.clear()
    pager = api.iter_history()
    assert await api.next_or_stop(pager) is api.stop
    assert await api.next_or_stop(pager) is api.stop
    assert len(api.fake.requests) == 1


async def test_pages_continue_after_items_that_ended_a_page(api: Api) -> None:
    pager = api.iter_history(limit=5)
    head = await api.take(pager, 5)
    pages = await api.pages(pager)
    assert [len(p.versions) for p in pages] == [5] * 7 + [2]
    assert _stamps(head + [v for p in pages for v in p.versions]) == _history_stamps(api)
    assert pager.pages_fetched == 9


async def test_items_continue_after_a_break_out_of_pages(api: Api) -> None:
    pager = api.iter_history(limit=5)
    if hasattr(pager, "__anext__"):
        first_page = await anext(pager.pages())
    else:
        first_page = next(pager.pages())
    rest = await api.items(pager)
    assert len(rest) == 37
    assert _stamps([*first_page.versions, *rest]) == _history_stamps(api)


async def test_pages_refuse_to_drop_items_of_a_page_begun(api: Api) -> None:
    pager = api.iter_history(limit=5)
    head = await api.take(pager, 2)
    with pytest.raises(RuntimeError, match="3 item"):
        await api.pages(pager)
    assert len(api.fake.requests) == 1  # refused before fetching
    rest = await api.items(pager)  # the held items are still there
    assert _stamps(head + rest) == _history_stamps(api)


async def test_an_error_mid_iteration_then_iterating_again_asks_for_the_same_page(
    api: Api,
) -> None:
    pager = api.iter_operations(limit=5)
    head = await api.take(pager, 3)
    api.fake.inject(Fault(status=404, path=OPERATIONS))  # 404 is not retried
    with pytest.raises(NotFoundError):
        await api.items(pager)  # yields the page's last 2 items, then fails
    failed = len(api.fake.requests) - 1
    rest = await api.items(pager)
    assert api.fake.requests[failed + 1].params == api.fake.requests[failed].params
    assert len(head) + 2 + len(rest) == 62
    assert _ids(rest) == _operation_ids(api)[5:]


async def test_a_repeated_token_ends_the_iteration_for_good_after_its_page(api: Api) -> None:
    """The page that repeats a token is yielded, then the error: its items were lost."""
    api.fake.repeat_tokens = True
    pager = api.iter_operations(limit=5)
    head = await api.take(pager, 10)  # page 2 hands back page 1's token
    assert _ids(head) == _operation_ids(api)[:10]
    with pytest.raises(PaginationError) as caught:
        await api.next_or_stop(pager)
    assert caught.value.token == dict(api.fake.requests[1].params)["paginationToken"]
    assert await api.next_or_stop(pager) is api.stop
    assert len(api.fake.requests) == 2


async def test_pages_yield_the_page_with_a_repeated_token_then_raise(api: Api) -> None:
    api.fake.repeat_tokens = True
    pager = api.iter_history(limit=5)
    seen: list[Any] = []
    with pytest.raises(PaginationError):
        await api.pages(pager, on_page=lambda _, page: seen.append(page))
    assert _stamps([v for page in seen for v in page.versions]) == _history_stamps(api)[:10]
    assert await api.pages(pager) == []  # ended for good
    assert len(api.fake.requests) == 2


_OPERATION = (
    b'{"id": "op-x", "type": "DELETE_USER", "state": "PENDING",'
    b' "createdAt": "2024-01-01T00:00:00Z"}'
)
MISPLACED = [
    pytest.param(
        HISTORY,
        b'{"versions": [{}, {}], "nextPaginationToken": "p2"}',
        ("nextPaginationToken", "next_pagination_token"),
        id="history-camelCase",
    ),
    pytest.param(
        OPERATIONS,
        b'{"operations": [%s, %s], "next_pagination_token": "p2", "nextPaginationToken": ""}'
        % (_OPERATION, _OPERATION),
        ("next_pagination_token", "nextPaginationToken"),
        id="operations-snake_case",
    ),
]


def _iter(api: Api, path: str) -> Any:
    return api.iter_history() if path == HISTORY else api.iter_operations()


@pytest.mark.parametrize(("path", "body", "names"), MISPLACED)
async def test_a_token_under_the_other_listings_name_is_not_the_last_page(
    api: Api, path: str, body: bytes, names: tuple[str, str]
) -> None:
    """Taken as the last page, it ended the iteration silently: later pages were lost.
    The page's items come first, then a clear error naming both fields and the token."""
    api.fake.inject(Fault(status=200, body=body, path=path))
    pager = _iter(api, path)
    assert len(await api.take(pager, 2)) == 2
    with pytest.raises(APIResponseError) as caught:
        await api.next_or_stop(pager)
    found, documented = names
    assert f"under {found} ('p2') instead of {documented}" in str(caught.value)
    assert caught.value.path == path
    assert await api.next_or_stop(pager) is api.stop
    assert len(api.fake.requests) == 1


@pytest.mark.parametrize(("path", "body", "names"), MISPLACED)
async def test_one_page_with_a_token_under_the_other_name_is_an_error(
    api: Api, path: str, body: bytes, names: tuple[str, str]
) -> None:
    api.fake.inject(Fault(status=200, body=body, path=path))
    one_page = api.history() if path == HISTORY else api.list_operations()
    with pytest.raises(APIResponseError, match=f"under {names[0]} "):
        await one_page


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (HISTORY, b'{"versions": [{}], "nextPaginationToken": ""}'),
        (HISTORY, b'{"versions": [{}], "next_pagination_token": "", "nextPaginationToken": null}'),
        (OPERATIONS, b'{"operations": [%s], "next_pagination_token": ""}' % _OPERATION),
    ],
)
async def test_an_empty_token_under_the_other_name_still_ends_the_iteration(
    api: Api, path: str, body: bytes
) -> None:
    api.fake.inject(Fault(status=200, body=body, path=path))
    assert len(await api.items(_iter(api, path))) == 1


def _repeating(request: httpx.Request) -> httpx.Response:
    """Every page hands back the same token; a cancel is unknown (404)."""
    if request.method == "POST":
        return httpx.Response(404, json={"message": "no such operation"})
    if request.url.path.endswith(HISTORY):
        return httpx.Response(200, json={"versions": [], "next_pagination_token": "same"})
    return httpx.Response(200, json={"operations": [], "nextPaginationToken": "same"})


@pytest.mark.parametrize("base_url", ["http://api.invalid/prefix", "http://api.invalid/prefix/"])
async def test_a_repeated_token_error_names_the_path_as_sent_under_a_base_path(
    base_url: str,
) -> None:
    """``.path`` is the path as sent, base URL prefix included, like every other error's
    (it was the bare spec path, so two errors of one client named different paths)."""
    transport = httpx.MockTransport(_repeating)
    client = Client("k", base_url=base_url, transport=transport)
    with pytest.raises(NotFoundError) as not_found:
        client.operations.cancel("op-1")
    assert not_found.value.path == "/prefix/operations/v1/op-1/cancel"
    with pytest.raises(PaginationError) as caught:
        list(client.operations.iter(state="PENDING"))
    assert caught.value.path == "/prefix" + OPERATIONS
    with pytest.raises(PaginationError) as caught:
        list(client.privacy_settings.iter_history())
    assert caught.value.path == "/prefix" + HISTORY

    async with AsyncClient("k", base_url=base_url, transport=transport) as aclient:
        with pytest.raises(PaginationError) as caught:
            [op async for op in aclient.operations.iter()]
        assert caught.value.path == "/prefix" + OPERATIONS
        with pytest.raises(PaginationError) as caught:
            [version async for version in aclient.privacy_settings.iter_history()]
        assert caught.value.path == "/prefix" + HISTORY
