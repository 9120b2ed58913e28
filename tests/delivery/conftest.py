"""Helpers for the delivery-emulator tests.

* ``serve(app)``: run an ASGI app under uvicorn on 127.0.0.1 in a background thread;
  yields its base URL. Only loopback is ever used.
* ``status_app``: answers ``POST /status/<code>`` with that code, ``/sleep/<s>`` after
  sleeping, and records every request it got.
* ``Recording``: an httpx transport that records calls and answers with a fixed status.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from service_webhooks.delivery import Sender, StaticResolver

SECRET = "whsec-delivery-test-0123456789abcdef"
ORG = "o-DELIVERY-1"
PUBLIC_IP = "93.184.215.14"  # never contacted: used only with a recording transport


def free_tcp_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serve(app: Any, *, port: int | None = None, **config: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1; yield ``http://127.0.0.1:PORT``."""
    port = port or free_tcp_port()
    settings = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=1,
        **config,
    )
    server = uvicorn.Server(settings)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    scheme = "https" if config.get("ssl_certfile") else "http"
    try:
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class StatusApp:
    """ASGI app: ``/status/<code>`` answers ``code``; ``/sleep/<seconds>`` sleeps then
    answers 200; ``/redirect`` answers 302 with a Location. Records each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.requests.append(
            {"method": scope["method"], "path": scope["path"], "headers": headers, "body": body}
        )
        parts = scope["path"].strip("/").split("/")
        status, extra = 200, []
        if parts[0] == "status":
            status = int(parts[1])
        elif parts[0] == "sleep":
            await asyncio.sleep(float(parts[1]))
        elif parts[0] == "redirect":
            status, extra = 302, [(b"location", b"/status/200")]
        elif parts[0] == "big":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x" * 100_000})
            return
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b"answered"})


@pytest.fixture(scope="module")
def status_server() -> Iterator[tuple[str, StatusApp]]:
    app = StatusApp()
    with serve(app) as url:
        yield url, app


class Recording(httpx.AsyncBaseTransport):
    """A transport that records every request and answers ``status`` (never connects)."""

    def __init__(self, status: int | Callable[[httpx.Request], int] = 200) -> None:
        self.status = status
        self.calls: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        await request.aread()
        status = self.status(request) if callable(self.status) else self.status
        return httpx.Response(status, content=b"ok")


def loopback_sender(**options: Any) -> Sender:
    """A real-socket sender allowed to reach 127.0.0.1 (for local test servers)."""
    options.setdefault("allow_private_destinations", True)
    return Sender(**options)


def mock_sender(transport: httpx.AsyncBaseTransport, **options: Any) -> Sender:
    """A sender over ``transport`` whose every host resolves to a public address."""
    return Sender(transport=transport, resolver=StaticResolver(default=[PUBLIC_IP]), **options)


# Test modules cannot import this file (importlib mode), so the helpers are fixtures.


@pytest.fixture(name="serve", scope="session")
def serve_fixture() -> Callable[..., Any]:
    return serve


@pytest.fixture(name="Recording", scope="session")
def recording_fixture() -> type[Recording]:
    return Recording


@pytest.fixture(name="mock_sender", scope="session")
def mock_sender_fixture() -> Callable[..., Sender]:
    return mock_sender


@pytest.fixture(name="loopback_sender", scope="session")
def loopback_sender_fixture() -> Callable[..., Sender]:
    return loopback_sender


@pytest.fixture(name="StatusApp", scope="session")
def status_app_fixture() -> type[StatusApp]:
    return StatusApp


@pytest.fixture
def unused_port() -> int:
    return free_tcp_port()
