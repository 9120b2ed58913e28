"""Following next-page tokens (spec §4.1, §4.2, §4.4), for both clients.

:class:`Cursor` is the pure state: the filters fixed at creation, the current limit,
the next token and every token seen so far. :class:`Pager` and :class:`AsyncPager`
only fetch; they read line for line alike.

Rules:

- Filters never change during an iteration (spec §4.2); only ``limit`` may, through
  :attr:`Pager.limit`, validated like the first one.
- An empty or missing next token ends the iteration (spec §4.4 leaves the last
  page's value open).
- A token already used in this iteration ends it with :class:`~.errors.PaginationError`
  instead of looping, and a page whose token is under the other listing's name (see
  :func:`._core.decode_page`) with :class:`~.errors.APIResponseError`. Either is
  raised once the items of that page have been yielded: no item received is lost.
- One page is held at a time: iterating 10,000 operations keeps memory flat.
- A pager is its own iterator (``iter(pager) is pager``): leaving a loop and iterating
  again resumes at the next item, which may be in the page already held.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, Self, TypeVar

from ._core import Call
from .errors import APIError, PaginationError

__all__ = ["AsyncPager", "Cursor", "Page", "Pager"]

ItemT = TypeVar("ItemT", covariant=True)
PageT = TypeVar("PageT", bound="Page[Any]")
ItemU = TypeVar("ItemU")


class Page(Protocol[ItemT]):
    """What a pager needs from a page model (``HistoryPage``, ``OperationsPage``)."""

    @property
    def items(self) -> Sequence[ItemT]:
        """The page's resources, in the service's order."""
        ...

    @property
    def next_pagination_token(self) -> str | None:
        """Token of the next page; empty or ``None`` on the last page."""
        ...


class Cursor:
    """Where an iteration stands; builds the call for the next page.

    Args:
        build: Makes the call for ``(limit, token)``; it carries the fixed filters and
            validates ``limit`` (raising :class:`~.errors.ParameterError`).
        limit: First page size, validated now (before any request).
        token: Token to start from, or ``None`` for the first page.
        sent_path: Turns a call's path into the path as sent (the base URL's path
            prefix added), for the :class:`~.errors.PaginationError` it raises; the
            call's own path when not given.
    """

    def __init__(
        self,
        build: Callable[[int | None, str | None], Call],
        limit: int | None,
        token: str | None,
        sent_path: Callable[[str], str] | None = None,
    ) -> None:
        self._build = build
        self._sent_path = sent_path
        build(limit, token)  # validate everything before the first request
        self._limit = limit
        self.token = token or None
        self.done = False
        self.pages = 0
        self._seen: set[str] = set() if self.token is None else {self.token}
        self._pending: APIError | None = None

    @property
    def limit(self) -> int | None:
        """Page size of the next request; may change between pages (spec §4.2)."""
        return self._limit

    @limit.setter
    def limit(self, value: int | None) -> None:
        self._build(value, self.token)
        self._limit = value

    def call(self) -> Call:
        """The request for the next page."""
        return self._build(self._limit, self.token)

    def advance(self, call: Call, next_token: str | None, problem: APIError | None = None) -> None:
        """Record a fetched page whose next token is ``next_token``.

        The page ends the iteration when its token is empty, when ``problem`` is given
        (the page's token is not where the spec puts it), or when the token was already
        used in this iteration (a :class:`~.errors.PaginationError`, instead of a loop).
        The error is kept for :meth:`raise_pending`: the pager yields the page's items
        first.
        """
        self.pages += 1
        if problem is not None:
            self.done = True
            self._pending = problem
            return
        if not next_token:
            self.done = True
            return
        if next_token in self._seen:
            self.done = True
            self._pending = PaginationError(
                f"the service repeated pagination token {next_token!r}; stopping to avoid a loop",
                method=call.method,
                path=call.path if self._sent_path is None else self._sent_path(call.path),
                token=next_token,
            )
            return
        self._seen.add(next_token)
        self.token = next_token

    def raise_pending(self) -> None:
        """Raise the error that ended the iteration, once (then nothing).

        Raises:
            APIError: A :class:`~.errors.PaginationError` (repeated token) or an
                :class:`~.errors.APIResponseError` (misplaced token) recorded by
                :meth:`advance`.
        """
        error, self._pending = self._pending, None
        if error is not None:
            raise error


class Pager(Generic[PageT, ItemU]):
    """Iterates every resource of a listing, fetching one page at a time (sync).

    ``for item in pager`` yields resources; :meth:`pages` yields whole pages. A pager
    is single-use, like a generator: it is its own iterator (``iter(pager) is
    pager``), so breaking out of a loop and iterating again (or calling ``next``)
    resumes at the next item, never skipping or repeating one. Once exhausted it stays
    exhausted.

    Raises (while iterating):
        APIError: Any error of the request (see :mod:`.errors`); after it, iterating
            again asks for the same page. :class:`~.errors.PaginationError` (a
            repeated token) and :class:`~.errors.APIResponseError` for a token under
            the other listing's name end the iteration: they are raised after the
            items of the page that carried the token.
    """

    def __init__(
        self, fetch: Callable[[Call], tuple[PageT, APIError | None]], cursor: Cursor
    ) -> None:
        self._fetch = fetch
        self._cursor = cursor
        self._items: Sequence[ItemU] = ()  # the held page's items
        self._next = 0  # index in ``_items`` of the next item to yield

    @property
    def limit(self) -> int | None:
        """Page size for the next request; set it to change later pages (1-100)."""
        return self._cursor.limit

    @limit.setter
    def limit(self, value: int | None) -> None:
        self._cursor.limit = value

    @property
    def pages_fetched(self) -> int:
        """Pages received so far."""
        return self._cursor.pages

    def pages(self) -> Iterator[PageT]:
        """Yield each page not yet fetched, until the next token is empty.

        Raises:
            RuntimeError: Items of the page held are still to be yielded (the item
                iteration stopped mid-page); finish them with ``next`` or a loop first.
            APIError: As when iterating items; a repeated or misplaced token is
                raised after the page that carried it has been yielded.
        """
        cursor = self._cursor
        while not cursor.done:
            _check_no_items_left(self._items, self._next)
            call = cursor.call()
            page, problem = self._fetch(call)
            cursor.advance(call, page.next_pagination_token, problem)
            self._items, self._next = (), 0
            yield page
        cursor.raise_pending()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> ItemU:
        while self._next >= len(self._items):
            cursor = self._cursor
            if cursor.done:
                self._items, self._next = (), 0
                cursor.raise_pending()
                raise StopIteration
            call = cursor.call()
            page, problem = self._fetch(call)
            cursor.advance(call, page.next_pagination_token, problem)
            self._items, self._next = page.items, 0
        item = self._items[self._next]
        self._next += 1
        return item


class AsyncPager(Generic[PageT, ItemU]):
    """Iterates every resource of a listing, fetching one page at a time (async).

    ``async for item in pager`` yields resources; :meth:`pages` yields whole pages.
    Single-use, like an async generator: it is its own async iterator
    (``aiter(pager) is pager``), so breaking out of a loop and iterating again (or
    awaiting ``anext``) resumes at the next item, never skipping or repeating one.
    Once exhausted it stays exhausted.

    Raises (while iterating):
        APIError: Any error of the request (see :mod:`.errors`); after it, iterating
            again asks for the same page. :class:`~.errors.PaginationError` (a
            repeated token) and :class:`~.errors.APIResponseError` for a token under
            the other listing's name end the iteration: they are raised after the
            items of the page that carried the token.
    """

    def __init__(
        self, fetch: Callable[[Call], Awaitable[tuple[PageT, APIError | None]]], cursor: Cursor
    ) -> None:
        self._fetch = fetch
        self._cursor = cursor
        self._items: Sequence[ItemU] = ()  # the held page's items
        self._next = 0  # index in ``_items`` of the next item to yield

    @property
    def limit(self) -> int | None:
        """Page size for the next request; set it to change later pages (1-100)."""
        return self._cursor.limit

    @limit.setter
    def limit(self, value: int | None) -> None:
        self._cursor.limit = value

    @property
    def pages_fetched(self) -> int:
        """Pages received so far."""
        return self._cursor.pages

    async def pages(self) -> AsyncIterator[PageT]:
        """Yield each page not yet fetched, until the next token is empty.

        Raises:
            RuntimeError: Items of the page held are still to be yielded (the item
                iteration stopped mid-page); finish them with ``anext`` or a loop first.
            APIError: As when iterating items; a repeated or misplaced token is
                raised after the page that carried it has been yielded.
        """
        cursor = self._cursor
        while not cursor.done:
            _check_no_items_left(self._items, self._next)
            call = cursor.call()
            page, problem = await self._fetch(call)
            cursor.advance(call, page.next_pagination_token, problem)
            self._items, self._next = (), 0
            yield page
        cursor.raise_pending()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ItemU:
        while self._next >= len(self._items):
            cursor = self._cursor
            if cursor.done:
                self._items, self._next = (), 0
                cursor.raise_pending()
                raise StopAsyncIteration
            call = cursor.call()
            page, problem = await self._fetch(call)
            cursor.advance(call, page.next_pagination_token, problem)
            self._items, self._next = page.items, 0
        item = self._items[self._next]
        self._next += 1
        return item


def _check_no_items_left(items: Sequence[Any], next_index: int) -> None:
    if next_index < len(items):
        raise RuntimeError(
            f"{len(items) - next_index} item(s) of the current page are still to be "
            "iterated; finish them before asking for whole pages"
        )
