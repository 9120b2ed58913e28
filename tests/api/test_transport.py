"""Failures without a response: connection errors, timeouts; and client lifecycle."""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from service_webhooks._exceptions import ConfigurationError, WebhookError
from service_webhooks.api import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AsyncClient,
    Client,
)
from service_webhooks.testing.fake_api import FakeAPI, Fault

Handler = Callable[[httpx.Request], httpx.Response]


def failing(exc: type[httpx.TransportError], then_ok: int = 99) -> tuple[Handler, list[str]]:
    """A handler that raises ``exc`` for the first ``then_ok`` requests, then answers."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        if len(seen) <= then_ok:
            raise exc("boom", request=request)
        if request.method == "POST":
            return httpx.Response(200, json={})
        return httpx.Response(200, json={"versions": [], "next_pagination_token": ""})

    return handle, seen


def sync_client(handler: Handler, sleeps: list[float], **options: Any) -> Client:
    return Client(
        "k",
        base_url="http://api.invalid",
        transport=httpx.MockTransport(handler),
        sleep=sleeps.append,
        jitter=lambda: 0.0,
        **options,
    )


def async_client(handler: Handler, sleeps: list[float], **options: Any) -> AsyncClient:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return AsyncClient(
        "k",
        base_url="http://api.invalid",
        transport=httpx.MockTransport(handler),
        sleep=sleep,
        jitter=lambda: 0.0,
        **options,
    )


@pytest.mark.parametrize("exc", [httpx.ConnectError, httpx.ConnectTimeout])
async def test_unsent_requests_are_retried_even_for_cancel(exc: type[httpx.TransportError]) -> None:
    handler, seen = failing(exc, then_ok=2)
    sleeps: list[float] = []
    with sync_client(handler, sleeps) as client:
        client.operations.cancel("op-1")
    async with async_client(handler, sleeps) as aclient:
        await aclient.operations.cancel("op-1")  # the handler answers from now on
    assert seen == ["POST"] * 4
    assert sleeps == [0.25, 0.5]


@pytest.mark.parametrize("exc", [httpx.ReadError, httpx.ReadTimeout, httpx.RemoteProtocolError])
async def test_maybe_sent_cancel_is_not_retried(exc: type[httpx.TransportError]) -> None:
    sleeps: list[float] = []
    handler, seen = failing(exc)
    with sync_client(handler, sleeps) as client, pytest.raises(APIConnectionError) as caught:
        client.operations.cancel("op-1")
    assert caught.value.sent is True
    async with async_client(handler, sleeps) as aclient:
        with pytest.raises(APIConnectionError):
            await aclient.operations.cancel("op-1")
    assert seen == ["POST", "POST"]
    assert sleeps == []


@pytest.mark.parametrize("exc", [httpx.ReadError, httpx.ReadTimeout, httpx.ConnectError])
async def test_gets_are_retried_after_transport_errors(exc: type[httpx.TransportError]) -> None:
    sleeps: list[float] = []
    handler, seen = failing(exc, then_ok=1)
    with sync_client(handler, sleeps) as client:
        assert client.privacy_settings.history().versions == ()
    assert seen == ["GET", "GET"]
    handler, seen = failing(exc, then_ok=1)
    async with async_client(handler, sleeps) as aclient:
        assert (await aclient.privacy_settings.history()).versions == ()
    assert seen == ["GET", "GET"]
    assert sleeps == [0.25, 0.25]


async def test_transport_errors_surface_when_retries_run_out() -> None:
    sleeps: list[float] = []
    handler, seen = failing(httpx.ReadTimeout)
    with (
        sync_client(handler, sleeps, max_retries=3) as client,
        pytest.raises(APITimeoutError) as caught,
    ):
        client.operations.list()
    assert len(seen) == 4
    assert sleeps == [0.25, 0.5, 1.0]
    error = caught.value
    assert isinstance(error, APIConnectionError)
    assert isinstance(error, APIError)
    assert isinstance(error.__cause__, httpx.ReadTimeout)
    assert error.method == "GET"
    assert error.path == "/operations/v1"


def test_no_httpx_exception_escapes() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.UnsupportedProtocol("no", request=request)

    with sync_client(handle, [], max_retries=0) as client, pytest.raises(APIConnectionError):
        client.privacy_settings.history()


@pytest.mark.e2e
def test_connection_refused_over_real_sockets() -> None:
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    client = Client("k", base_url=f"http://127.0.0.1:{port}", sleep=sleeps.append)
    with client, pytest.raises(APIConnectionError) as caught:
        client.operations.cancel("op-1")
    assert caught.value.sent is False
    assert len(sleeps) == 2  # retried: the request never reached a server


@pytest.mark.e2e
async def test_slow_responses_time_out_and_gets_are_retried() -> None:
    fake = FakeAPI()
    fake.inject(Fault(delay=0.5), Fault(delay=0.5, method="POST"))
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    with fake.serve() as base_url:
        async with AsyncClient("test-key", base_url=base_url, timeout=0.05, sleep=sleep) as client:
            page = await client.privacy_settings.history(limit=2)  # 1st attempt times out
            assert len(page.versions) == 2
            assert len(sleeps) == 1
            with pytest.raises(APITimeoutError) as caught:
                await client.operations.cancel("op-0000")  # the service may have got it
            assert caught.value.sent is True
            assert len(sleeps) == 1


@pytest.mark.e2e
def test_a_slow_response_within_the_timeout_is_fine() -> None:
    fake = FakeAPI()
    fake.inject(Fault(delay=0.05))
    with fake.serve() as base_url, Client("test-key", base_url=base_url, timeout=5) as client:
        assert len(client.operations.list(limit=4).operations) == 4


def test_errors_belong_to_the_library_family_and_keep_status_500() -> None:
    # A handler that lets an API error escape answers 500 so the service retries.
    assert issubclass(APIError, WebhookError)
    assert APIError.status == 500
    assert APITimeoutError.status == 500


async def test_clients_close_their_pool() -> None:
    fake = FakeAPI()
    client = Client("test-key", base_url="http://fake", transport=fake.sync_transport())
    client.close()
    client.close()
    with pytest.raises(RuntimeError):
        client.privacy_settings.history()
    aclient = AsyncClient("test-key", base_url="http://fake", transport=fake.async_transport())
    async with aclient:
        assert "test-key" not in repr(aclient)
    with pytest.raises(RuntimeError):
        await aclient.privacy_settings.history()


@pytest.mark.parametrize(
    "options",
    [
        {"transport": httpx.ASGITransport(app=FakeAPI())},  # an async transport
        {"transport": object()},
        {"sleep": None},
        {"sleep": asyncio.sleep},  # a coroutine never awaited: no wait at all
        {"jitter": 0.5},
    ],
)
def test_wrong_io_arguments_are_refused_when_the_sync_client_is_made(
    options: dict[str, Any],
) -> None:
    """Was an AttributeError or TypeError at the first request (or the first retry)."""
    with pytest.raises(ConfigurationError):
        Client("k", base_url="http://api.invalid", **options)


@pytest.mark.parametrize(
    "options",
    [
        {"transport": httpx.HTTPTransport()},
        {"sleep": None},
        {"sleep": time.sleep},  # would block the event loop for the whole delay
        {"sleep": lambda seconds: None},
        {"jitter": "0.5"},
    ],
)
def test_wrong_io_arguments_are_refused_when_the_async_client_is_made(
    options: dict[str, Any],
) -> None:
    with pytest.raises(ConfigurationError):
        AsyncClient("k", base_url="http://api.invalid", **options)


def test_a_blocking_sleep_is_refused_by_the_async_client_with_the_reason() -> None:
    with pytest.raises(ConfigurationError, match=r"coroutine function .* event loop"):
        AsyncClient("k", base_url="http://api.invalid", sleep=time.sleep)


class _AsyncSleeper:
    async def __call__(self, seconds: float) -> None:
        return None


@pytest.mark.parametrize(
    "sleep",
    [asyncio.sleep, functools.partial(asyncio.sleep), _AsyncSleeper()],
    ids=["function", "partial", "async-call"],
)
async def test_the_async_client_takes_any_coroutine_function_as_sleep(sleep: Any) -> None:
    async with AsyncClient("k", base_url="http://api.invalid", sleep=sleep):
        pass


def test_the_fake_compares_api_keys_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """``api serve-fake`` may listen on a network: its key check goes through
    ``hmac.compare_digest`` (it was ``==``), and a header that is not ASCII is a 401,
    not a server error."""
    import hmac

    from starlette.testclient import TestClient

    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    client = TestClient(FakeAPI(api_key="k3y-right", read_only_key="k3y-reads"))
    path = "/operations/v1"
    assert client.get(path, headers={"Authorization": "Basic k3y-right"}).status_code == 200
    assert client.get(path, headers={"Authorization": "Basic k3y-reads"}).status_code == 200
    assert client.get(path, headers={"Authorization": "Basic k3y-wrong"}).status_code == 401
    latin = {"Authorization": "Basic k\xe9y".encode("latin-1")}
    assert client.get(path, headers=latin).status_code == 401  # type: ignore[dict-item]
    assert client.get(path).status_code == 401
    assert calls
    assert all(b"k3y-right" in expected or b"k3y-reads" in expected for _, expected in calls)
