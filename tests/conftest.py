"""Fixtures shared by the whole suite.

* ``unavailable(what, why)``: skip a test whose real server is absent, or fail it when
  ``SERVICE_WEBHOOKS_REQUIRE_SERVICES=1`` (set by ``.ci/run``).
* ``postgres_url``: the tests' PostgreSQL URL (``sw_services.POSTGRES_URL``) once the
  server has answered, asked once per session; else ``unavailable``.
* ``free_port``: a free TCP port on 127.0.0.1.
* ``secret`` / ``signed``: sign bodies the way the service does.
* ``drive``: one delivery through ``process`` or ``aprocess`` (parametrized: the two
  drivers must agree); ``receiver``: a receiver for ``secret`` with a memory store.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable
from typing import Any, NoReturn

import pytest
from sw_services import POSTGRES_URL

from service_webhooks import MemoryStore, Outcome, WebhookReceiver, sign

SECRET = "whsec-test-0123456789abcdef0123456789abcdef"
ORG = "o-TEST-na1"


@pytest.fixture
def unavailable() -> Callable[[str, str], NoReturn]:
    def report(what: str, why: str) -> NoReturn:
        message = f"{what} is not reachable: {why}"
        if os.environ.get("SERVICE_WEBHOOKS_REQUIRE_SERVICES") == "1":
            pytest.fail(message + " (SERVICE_WEBHOOKS_REQUIRE_SERVICES=1)")
        pytest.skip(message)

    return report


@pytest.fixture(scope="session")
def postgres_unreachable() -> str | None:
    """Why PostgreSQL at ``POSTGRES_URL`` does not answer (the psycopg error's class
    name), or ``None`` when it does: asked once per session, within 2 seconds."""
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except psycopg.Error as error:
        return type(error).__name__
    return None


@pytest.fixture
def postgres_url(
    postgres_unreachable: str | None, unavailable: Callable[[str, str], NoReturn]
) -> str:
    """``POSTGRES_URL`` when PostgreSQL answers; else the test is skipped (or failed
    under ``SERVICE_WEBHOOKS_REQUIRE_SERVICES=1``) with the reason."""
    if postgres_unreachable is not None:
        unavailable(f"PostgreSQL at {POSTGRES_URL}", postgres_unreachable)
    return POSTGRES_URL


@pytest.fixture
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def secret() -> str:
    return SECRET


def envelope(name: str = "note.created", version: int = 1, data: Any = None) -> bytes:
    if data is None:
        data = {"id": "n-1", "author": "ana@example.com", "text": "hello"}
    return json.dumps({"eventName": name, "version": version, "data": data}).encode()


@pytest.fixture
def make_body() -> Callable[..., bytes]:
    return envelope


@pytest.fixture
def signed() -> Callable[..., tuple[bytes, str]]:
    """``signed(body=None, *, org=ORG, secret=SECRET, timestamp=None) -> (body, header)``."""

    def make(
        body: bytes | None = None,
        *,
        org: str = ORG,
        secret: str = SECRET,
        timestamp: int | None = None,
    ) -> tuple[bytes, str]:
        body = envelope() if body is None else body
        return body, sign(body, secret, org, timestamp=timestamp)

    return make


@pytest.fixture(params=["sync", "async"])
def drive(request: pytest.FixtureRequest) -> Callable[..., Outcome]:
    """``drive(receiver, body, header, method="POST") -> Outcome`` through each driver."""

    def run(
        receiver: WebhookReceiver, body: bytes, header: str | None, method: str = "POST"
    ) -> Outcome:
        if request.param == "sync":
            return receiver.process(body, header, method=method)
        return asyncio.run(receiver.aprocess(body, header, method=method))

    return run


@pytest.fixture
def receiver(secret: str) -> WebhookReceiver:
    return WebhookReceiver(secrets=secret, store=MemoryStore())


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """``inbox serve`` without serving: each run's app and settings, in a list.

    The settings are the ``host`` and ``port`` asked for, the port actually bound for
    them (``bound_port``: a free one, so tests never race for a fixed port) and what the
    uvicorn server was configured with (``log_level``, ``server_header``, ``root_path``).
    """
    import importlib

    command = importlib.import_module("service_webhooks.cli.inbox")
    calls: list[tuple[Any, dict[str, Any]]] = []
    asked: list[tuple[str, int]] = []
    real_bind = command.bind

    def bind(host: str, port: int) -> socket.socket:
        asked.append((host, port))
        return real_bind(host, 0)

    def serve(server: Any, sock: socket.socket) -> None:
        bound_port = sock.getsockname()[1]
        sock.close()
        host, port = asked[-1]
        config = server.config
        options = {"host": host, "port": port, "bound_port": bound_port}
        options.update(
            log_level=config.log_level,
            server_header=config.server_header,
            root_path=config.root_path,
        )
        calls.append((config.app, options))

    monkeypatch.setattr(command, "bind", bind)
    monkeypatch.setattr(command, "serve_until_stopped", serve)
    monkeypatch.delenv("SERVICE_WEBHOOKS_DASHBOARD_AUTH", raising=False)
    monkeypatch.delenv("SERVICE_WEBHOOKS_DASHBOARD_TRUSTED_ORIGINS", raising=False)
    return calls
