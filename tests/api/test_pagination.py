"""Pagers are single-use iterators: leaving a loop and iterating again resumes exactly.

Each scenario runs with the sync and the async client (``Pager`` / ``AsyncPager``),
in-process and over HTTP. The fake holds 42 privacy-settings versions and 62 operations.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import pytest

from service_webhooks.api import NotFoundError, PaginationError
from service_webhooks.testing.fake_api import Fault

if TYPE_CHECKING:
    from conftest import Api

OPERATIONS = "/operations/v1"


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


async def test_a_repeated_token_ends_the_iteration_for_good(api: Api) -> None:
    api.fake.repeat_tokens = True
    pager = api.iter_operations(limit=5)
    head = await api.take(pager, 5)
    with pytest.raises(PaginationError):
        await api.next_or_stop(pager)
    assert await api.next_or_stop(pager) is api.stop
    assert _ids(head) == _operation_ids(api)[:5]
    assert len(api.fake.requests) == 2
