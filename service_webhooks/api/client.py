"""The synchronous API client (spec §4, §5.1). Its async twin is :mod:`.aclient`.

Both drivers share :mod:`._core` for every decision; this module only sends requests
and sleeps between retries. Keep it line for line alike with :mod:`.aclient`.

::

    with Client(api_key, base_url="https://api.example.com") as client:
        for version in client.privacy_settings.iter_history(limit=100):
            ...
        client.operations.cancel("op-123")
"""

from __future__ import annotations

import random
import time
from types import TracebackType

import httpx

from . import _core
from ._core import Call, ClientCore, Jitter, PageT, RetryPolicy, Sleep
from .errors import APIError, APIResponseError
from .models import HistoryPage, Operation, OperationsPage, PrivacySettingsVersion
from .pagination import Cursor, Pager

__all__ = ["Client", "Operations", "PrivacySettings"]


class Client:
    """Synchronous client of the privacy-settings history and operations API.

    Args:
        api_key: The API key, sent as ``Authorization: Basic <api_key>`` exactly as given
            (not a user:password pair; spec §5.1).
        base_url: Absolute ``http(s)`` URL the spec's paths are relative to.
        timeout: Seconds allowed for each wait (connect, read, write, pool) of an attempt.
        max_retries: Retries after the first attempt (see :mod:`._core` for which errors).
        max_retry_after: Seconds; a ``Retry-After`` longer than this is not waited for
            and the :class:`~.errors.RateLimitError` is raised at once.
        transport: An ``httpx`` transport (for example ``httpx.MockTransport`` or the fake
            server's); the default opens real connections.
        sleep: A plain function, called with the seconds to wait before a retry (a
            coroutine function is refused: nothing would await it).
        jitter: Returns a float in ``[0, 1)`` that spreads backoff delays.

    Raises:
        ConfigurationError: An argument is invalid (empty key, non-http URL ...).

    The client holds a connection pool: use it as a context manager or call
    :meth:`close`.
    """

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str,
        timeout: float = 10.0,
        max_retries: int = 2,
        max_retry_after: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Sleep = time.sleep,
        jitter: Jitter = random.random,
    ) -> None:
        policy = RetryPolicy(max_retries=max_retries, max_retry_after=max_retry_after)
        self._core = ClientCore(api_key, base_url=base_url, timeout=timeout, retry=policy)
        _core.check_io_options(transport, httpx.BaseTransport, sleep, jitter)
        self._sleep = sleep
        self._jitter = jitter
        self._http = httpx.Client(transport=transport, **self._core.httpx_options())
        self.privacy_settings = PrivacySettings(self)
        """Privacy settings history (spec §4.1)."""
        self.operations = Operations(self)
        """Operations listing and cancelling (spec §4.2, §4.3)."""

    def __repr__(self) -> str:
        return f"Client(base_url={str(self._core.base_url)!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool. Safe to call twice."""
        self._http.close()

    def _send(self, call: Call) -> httpx.Response:
        """Send ``call``, retrying as the policy says; return its 2xx response."""
        retries = 0
        while True:
            error: APIError | None
            request = self._http.build_request(call.method, call.path, params=call.params)
            try:
                response = self._http.send(request)
            except httpx.RequestError as exc:
                error = _core.connection_error(call, _core.request_path(request), exc)
            else:
                _core.detach(response)
                error = self._core.outcome(call, response)
                if error is None:
                    return response
            delay = self._core.retry.delay(call, error, retries, self._jitter())
            if delay is None:
                raise error
            self._sleep(delay)
            retries += 1

    def _page(self, call: Call, type_: type[PageT]) -> tuple[PageT, APIResponseError | None]:
        """A page and the error its token's spelling makes, if any (see ``decode_page``)."""
        return _core.decode_page(call, self._send(call), type_)

    def _fetch(self, call: Call, type_: type[PageT]) -> PageT:
        page, problem = self._page(call, type_)
        if problem is not None:
            raise problem
        return page


class PrivacySettings:
    """``client.privacy_settings``: the history of privacy settings versions (spec §4.1)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def history(
        self, *, limit: int = _core.HISTORY_LIMIT_DEFAULT, pagination_token: str | None = None
    ) -> HistoryPage:
        """Fetch one page of versions, most recent first (spec §3.2).

        Args:
            limit: Versions per page, 1-100 (default 20; spec §8).
            pagination_token: Where the page starts; ``None`` for the most recent.

        Returns:
            The page; ``page.next_pagination_token`` is empty on the last page.

        Raises:
            ParameterError: ``limit`` outside 1-100, checked before sending.
            APIError: See :mod:`.errors`.
        """
        call = _core.history_call(limit, pagination_token)
        return self._client._fetch(call, HistoryPage)

    def iter_history(
        self, *, limit: int = _core.HISTORY_LIMIT_DEFAULT, pagination_token: str | None = None
    ) -> Pager[HistoryPage, PrivacySettingsVersion]:
        """Iterate every version, following ``next_pagination_token`` (spec §4.1).

        Args and errors are those of :meth:`history`; argument errors are raised here,
        request errors while iterating.
        """
        cursor = Cursor(_core.history_call, limit, pagination_token, self._client._core.sent_path)
        return Pager(lambda call: self._client._page(call, HistoryPage), cursor)


class Operations:
    """``client.operations``: list and cancel long-running operations (spec §4.2, §4.3)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        pagination_token: str | None = None,
    ) -> OperationsPage:
        """Fetch one page of operations (spec §4.2).

        Args:
            state: Only operations in this state: any string (spec §9 open enum);
                :class:`~.models.OperationState` holds the known ones.
            type: Only operations of this type: any string;
                :class:`~.models.OperationType` holds the known ones.
            limit: Operations per page, 1-100; ``None`` lets the service send 100.
            pagination_token: From a previous page of the same filters.

        Returns:
            The page; ``page.next_pagination_token`` is empty on the last page.

        Raises:
            ParameterError: A state or type that is not a non-empty str, or ``limit`` outside 1-100,
                checked before sending.
            APIError: See :mod:`.errors`.
        """
        filters = _core.operations_filters(state, type)
        call = _core.operations_call(filters, limit, pagination_token)
        return self._client._fetch(call, OperationsPage)

    def iter(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        pagination_token: str | None = None,
    ) -> Pager[OperationsPage, Operation]:
        """Iterate every operation matching the filters, page by page (spec §4.2).

        The filters are validated and fixed now, and sent unchanged with every page;
        only ``pager.limit`` may change between pages. Args and errors are those of
        :meth:`list`; a repeated token raises :class:`~.errors.PaginationError`.
        """
        filters = _core.operations_filters(state, type)

        def build(page_limit: int | None, token: str | None) -> Call:
            return _core.operations_call(filters, page_limit, token)

        cursor = Cursor(build, limit, pagination_token, self._client._core.sent_path)
        return Pager(lambda call: self._client._page(call, OperationsPage), cursor)

    def cancel(self, operation_id: str) -> None:
        """Cancel a cancelable in-progress operation (spec §4.3).

        Only retried on 429 or when the request surely did not reach the service.

        Args:
            operation_id: The operation's id; escaped as one URL path segment.

        Raises:
            ParameterError: An empty id, before sending.
            NotFoundError: No such operation.
            APIStatusError: The service refused (for example, not cancelable).
            APIError: See :mod:`.errors`.
        """
        self._client._send(_core.cancel_call(operation_id))
