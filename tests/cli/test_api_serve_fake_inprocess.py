"""``service-webhooks api serve-fake`` in-process: ``uvicorn.Server`` is replaced by a
recorder, so the command binds its socket and builds its app but never serves.

``tests/api/test_cli.py`` runs the real command in a subprocess (not measured by
coverage).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner, Result

from service_webhooks.cli import main
from service_webhooks.testing.fake_api import FakeAPI


class Recorder:
    """Stands in for ``uvicorn.Server``: keeps its config and the sockets ``run`` got."""

    made: list[Recorder] = []

    def __init__(self, config: uvicorn.Config) -> None:
        self.config = config
        self.sockets: list[socket.socket] | None = None
        Recorder.made.append(self)

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        self.sockets = sockets


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Any:
    Recorder.made = []
    monkeypatch.setattr(uvicorn, "Server", Recorder)
    yield Recorder
    for made in Recorder.made:
        for sock in made.sockets or []:
            sock.close()


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["api", "serve-fake", *args])


def test_serve_fake_binds_the_port_and_hands_the_fake_to_uvicorn(recorder: Any) -> None:
    result = invoke("--port", "0", "--api-key", "k-123")
    assert result.exit_code == 0, (result.output, result.exception)
    [server] = recorder.made
    [sock] = server.sockets
    host, port = sock.getsockname()[:2]
    assert (host, sock.type) == ("127.0.0.1", socket.SOCK_STREAM)
    assert port > 0
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) != 0
    assert result.stderr == f"fake API: serving on http://127.0.0.1:{port} (API key: k-123)\n"
    assert result.stdout == ""
    config = server.config
    assert (config.lifespan, config.log_level) == ("off", "warning")
    app = config.app
    assert isinstance(app, FakeAPI)

    async def ask(key: str) -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
            answer = await client.get("/operations/v1", headers={"Authorization": f"Basic {key}"})
            return answer.status_code

    assert asyncio.run(ask("k-123")) == 200  # the key given is the one accepted
    assert asyncio.run(ask("test-key")) == 401


def test_serve_fake_defaults_and_an_ipv6_host_in_brackets(recorder: Any) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("no ::1")
    result = invoke("--host", "::1", "--port", "0")
    assert result.exit_code == 0, (result.output, result.exception)
    [server] = recorder.made
    [sock] = server.sockets
    assert sock.family == socket.AF_INET6
    port = sock.getsockname()[1]
    assert result.stderr == f"fake API: serving on http://[::1]:{port} (API key: test-key)\n"


def test_serve_fake_reports_a_port_it_cannot_bind_and_closes_its_socket(
    recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[socket.socket] = []

    class Recording(socket.socket):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(socket, "socket", Recording)
        result = invoke("--port", str(port))
    assert len(made) == 1
    assert made[0].fileno() == -1  # closed, not left to the garbage collector
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}:" in result.stderr
    assert recorder.made == []


def test_serve_fake_without_starlette_says_which_extra(
    recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "service_webhooks.testing.fake_api", None)
    result = invoke("--port", "0")
    assert result.exit_code == 1
    assert "the fake API needs the 'asgi' extra (" in result.stderr
    assert result.stderr.rstrip().endswith("): pip install 'service-webhooks[asgi]'")
    assert recorder.made == []
