"""Fixtures for the API client tests.

``api`` runs each scenario through four drivers: the sync and the async client, each
in-process (ASGI transport) and over real HTTP (uvicorn on 127.0.0.1, marked ``e2e``),
so the two clients cannot drift. Retries never sleep: ``api.sleeps`` records the delays
the client asked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from service_webhooks.api import AsyncClient, Client
from service_webhooks.testing.fake_api import FakeAPI, serve

API_KEY = "test-key"


class Swap:
    """An ASGI app forwarding to the current test's fake (one server per session)."""

    def __init__(self) -> None:
        self.target: FakeAPI | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert self.target is not None
        await self.target(scope, receive, send)


@pytest.fixture(scope="session")
def http_server() -> Iterator[tuple[Swap, str]]:
    swap = Swap()
    with serve(swap) as base_url:
        yield swap, base_url


class Driver:
    """One client (sync or async, in-process or HTTP) behind an async interface."""

    def __init__(self, mode: str, transport: str, fake: FakeAPI, base_url: str) -> None:
        self.mode = mode
        self.transport = transport
        self.fake = fake
        self.base_url = base_url
        self.sleeps: list[float] = []
        self._clients: list[Client | AsyncClient] = []

    def client(self, api_key: str = API_KEY, **options: Any) -> Client | AsyncClient:
        options.setdefault("jitter", lambda: 0.5)
        options.setdefault("base_url", self.base_url)
        client: Client | AsyncClient
        if self.mode == "sync":
            options.setdefault("sleep", self.sleeps.append)
            if self.transport == "asgi":
                options.setdefault("transport", self.fake.sync_transport())
            client = Client(api_key, **options)
        else:

            async def sleep(seconds: float) -> None:
                self.sleeps.append(seconds)

            options.setdefault("sleep", sleep)
            if self.transport == "asgi":
                options.setdefault("transport", self.fake.async_transport())
            client = AsyncClient(api_key, **options)
        self._clients.append(client)
        return client

    def with_options(self, api_key: str = API_KEY, **options: Any) -> Bound:
        return Bound(self.client(api_key, **options))

    async def close(self) -> None:
        for client in self._clients:
            if isinstance(client, Client):
                client.close()
            else:
                await client.aclose()


class Bound:
    """Calls on one client, awaited whatever its flavour."""

    def __init__(self, client: Client | AsyncClient) -> None:
        self.client = client

    async def _call(self, result: Any) -> Any:
        if isinstance(self.client, AsyncClient):
            return await result
        return result

    async def history(self, **kwargs: Any) -> Any:
        return await self._call(self.client.privacy_settings.history(**kwargs))

    async def list_operations(self, **kwargs: Any) -> Any:
        return await self._call(self.client.operations.list(**kwargs))

    async def cancel(self, operation_id: Any) -> None:
        await self._call(self.client.operations.cancel(operation_id))

    def iter_history(self, **kwargs: Any) -> Any:
        return self.client.privacy_settings.iter_history(**kwargs)

    def iter_operations(self, **kwargs: Any) -> Any:
        return self.client.operations.iter(**kwargs)

    async def pages(
        self, pager: Any, on_page: Callable[[Any, Any], None] | None = None
    ) -> list[Any]:
        """Every page of ``pager``; ``on_page(pager, page)`` runs after each one."""
        pages = []
        if isinstance(self.client, AsyncClient):
            async for page in pager.pages():
                pages.append(page)
                if on_page:
                    on_page(pager, page)
        else:
            for page in pager.pages():
                pages.append(page)
                if on_page:
                    on_page(pager, page)
        return pages

    async def items(self, pager: Any) -> list[Any]:
        if isinstance(self.client, AsyncClient):
            return [item async for item in pager]
        return list(pager)

    @property
    def stop(self) -> type[Exception]:
        """What the pagers' ``next`` raises when exhausted, for this client's flavour."""
        return StopAsyncIteration if isinstance(self.client, AsyncClient) else StopIteration

    def iterator(self, pager: Any) -> Any:
        """``aiter(pager)`` or ``iter(pager)``."""
        if isinstance(self.client, AsyncClient):
            return aiter(pager)
        return iter(pager)

    async def next_or_stop(self, pager: Any) -> Any:
        """``anext(pager)`` or ``next(pager)``; the exception class if it raised :attr:`stop`."""
        if isinstance(self.client, AsyncClient):
            try:
                return await anext(pager)
            except StopAsyncIteration:
                return StopAsyncIteration
        try:
            return next(pager)
        except StopIteration:
            return StopIteration

    async def take(self, pager: Any, count: int) -> list[Any]:
        """Up to ``count`` items of ``pager``, by a loop left with ``break``."""
        taken: list[Any] = []
        if count <= 0:
            return taken
        if isinstance(self.client, AsyncClient):
            async for item in pager:
                taken.append(item)
                if len(taken) == count:
                    break
        else:
            for item in pager:
                taken.append(item)
                if len(taken) == count:
                    break
        return taken


class Api(Bound):
    """The default client of a driver, plus the driver's fake and recorded sleeps."""

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver.client())
        self.driver = driver
        self.fake = driver.fake
        self.sleeps = driver.sleeps

    def with_options(self, api_key: str = API_KEY, **options: Any) -> Bound:
        return self.driver.with_options(api_key, **options)


DRIVERS = [
    pytest.param(("sync", "asgi"), id="sync-asgi"),
    pytest.param(("async", "asgi"), id="async-asgi"),
    pytest.param(("sync", "http"), id="sync-http", marks=pytest.mark.e2e),
    pytest.param(("async", "http"), id="async-http", marks=pytest.mark.e2e),
]


@pytest.fixture
def fake() -> FakeAPI:
    return FakeAPI(api_key=API_KEY, read_only_key="read-only-key")


@pytest.fixture(params=DRIVERS)
async def api(request: pytest.FixtureRequest, fake: FakeAPI) -> AsyncIterator[Api]:
    mode, transport = request.param
    if transport == "http":
        swap, base_url = request.getfixturevalue("http_server")
        swap.target = fake
    else:
        base_url = "http://fake.invalid/"
    driver = Driver(mode, transport, fake, base_url)
    yield Api(driver)
    await driver.close()
