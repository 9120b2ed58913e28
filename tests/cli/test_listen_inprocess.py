"""``service-webhooks listen`` in-process: the command with uvicorn's ``Server.run``
replaced, its printers, its 404 app, its socket binding and its logging config.

``tests/cli/test_listen.py`` runs the real command as a subprocess; these tests drive
the same pieces inside the pytest process (the ASGI app the command builds is fed
through ``httpx.ASGITransport`` instead of a socket).
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import re
import socket
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from sw_closing import is_closed

from service_webhooks import SIGNATURE_HEADER, Event, WebhookReceiver, sign
from service_webhooks.cli import main

SECRET = "whsec-listen-inprocess"
ORG = "o-INPROC-eu1"
listen_module = importlib.import_module("service_webhooks.cli.listen")  # not the command
serve_module = importlib.import_module("service_webhooks.cli._serve")

NOTE = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a@b.c","text":"hi"}}'


class FakeServer:
    """Stands in for ``uvicorn.Server``: records its config and the sockets it was given,
    then runs ``script(app)`` (the deliveries of a test) instead of serving."""

    instances: list[FakeServer] = []
    script: Any = None

    def __init__(self, config: uvicorn.Config) -> None:
        self.config = config
        self.sockets: list[socket.socket] = []
        FakeServer.instances.append(self)

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        self.sockets = list(sockets or [])
        if FakeServer.script is not None:
            FakeServer.script(self.config.app)


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeServer]]:
    FakeServer.instances = []
    FakeServer.script = None
    monkeypatch.setattr(uvicorn, "Server", FakeServer)
    yield FakeServer
    for server in FakeServer.instances:
        for sock in server.sockets:
            sock.close()


def post_all(app: Any, path: str, bodies: list[tuple[bytes, str]]) -> list[int]:
    """POST each ``(body, secret)`` signed as ORG into the ASGI ``app``; the statuses."""
    return asyncio.run(apost_all(app, path, bodies))


async def apost_all(app: Any, path: str, bodies: list[tuple[bytes, str]]) -> list[int]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://listen") as client:
        statuses = []
        for body, secret in bodies:
            headers = {
                "Content-Type": "application/json; charset=utf-8",
                SIGNATURE_HEADER: sign(body, secret, ORG),
            }
            response = await client.post(path, content=body, headers=headers)
            statuses.append(response.status_code)
        statuses.append((await client.get("/elsewhere")).status_code)
        return statuses


async def lifespan_around(app: Any, work: Callable[[], Awaitable[object]]) -> list[str]:
    """``work()`` between the lifespan's startup and shutdown, as uvicorn runs ``app``;
    the types of the lifespan messages the app sent."""
    messages: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    sent: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    running = asyncio.ensure_future(app({"type": "lifespan"}, messages.get, send))
    await messages.put({"type": "lifespan.startup"})
    while not sent and not running.done():
        await asyncio.sleep(0)
    await work()
    await messages.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(running, 5)
    return sent


def event(data: Any, name: str = "note.created", version: int = 1) -> Event[Any]:
    return Event(name, version, data, ORG, 1_700_000_000, "k" * 64, b"{}")


def test_json_mode_prints_one_object_per_processed_event(fake_server: type[FakeServer]) -> None:
    statuses: list[int] = []
    other = b'{"eventName":"thing.new","version":2,"data":{"k":[1,null]}}'
    FakeServer.script = lambda app: statuses.extend(
        post_all(app, "/hooks", [(NOTE, SECRET), (NOTE, SECRET), (other, "wrong"), (other, SECRET)])
    )
    result = CliRunner().invoke(
        main, ["listen", "--port", "0", "--secret", SECRET, "--path", "/hooks", "--json"]
    )
    assert result.exit_code == 0, result.output
    # processed, duplicate (200, not printed), bad signature, processed; other path 404
    assert statuses == [200, 200, 401, 200, 404]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines == [
        {
            "eventName": "note.created",
            "version": 1,
            "organizationId": ORG,
            "data": {"id": "n-1", "author": "a@b.c", "text": "hi"},
        },
        {"eventName": "thing.new", "version": 2, "organizationId": ORG, "data": {"k": [1, None]}},
    ]

    [server] = fake_server.instances
    [sock] = server.sockets
    host, port = sock.getsockname()[:2]
    assert host == "127.0.0.1"
    assert port != 0  # port 0 was resolved before uvicorn started
    assert f"listening on http://127.0.0.1:{port}/hooks (store: memory)" in result.stderr
    assert f"try: service-webhooks send http://127.0.0.1:{port}/hooks --secret ..." in (
        result.stderr
    )
    assert sock.get_inheritable()
    assert server.config.lifespan == "on"
    assert server.config.access_log is True
    assert server.config.server_header is False


def test_readable_mode_prints_a_line_per_event(fake_server: type[FakeServer]) -> None:
    statuses: list[int] = []
    FakeServer.script = lambda app: statuses.extend(post_all(app, "/webhooks", [(NOTE, SECRET)]))
    result = CliRunner(env={"SERVICE_WEBHOOKS_SECRET": f"other {SECRET}"}).invoke(
        main, ["listen", "--port", "0"]
    )
    assert result.exit_code == 0, result.output
    assert statuses == [200, 404]
    [line] = result.stdout.splitlines()
    assert re.fullmatch(
        rf'\d\d:\d\d:\d\d  {ORG}  note\.created v1  \{{"id":"n-1","author":"a@b\.c","text":"hi"\}}',
        line,
    )


def test_the_lifespan_shutdown_closes_the_receiver(
    fake_server: type[FakeServer], tmp_path: Path
) -> None:
    # With lifespan="off" nothing closed it: a reference cycle kept its SQLite connections
    # to the interpreter's exit, where Python 3.13 reports them open (ResourceWarning:
    # unclosed database), and a Redis store's asyncio client was never closed
    opened: list[sqlite3.Connection] = []
    answers: list[str] = []

    async def deliver(app: Any) -> None:
        assert await apost_all(app, "/webhooks", [(NOTE, SECRET)]) == [200, 404]
        receiver = app.webhooks.receiver
        opened.extend([*receiver.store._connections, *receiver.inbox._connections])
        assert opened
        assert not any(is_closed(connection) for connection in opened)

    FakeServer.script = lambda app: answers.extend(
        asyncio.run(lifespan_around(app, lambda: deliver(app)))
    )
    store = f"sqlite:{tmp_path / 'hooks.sqlite3'}"
    result = CliRunner().invoke(
        main, ["listen", "--port", "0", "--secret", SECRET, "--store", store]
    )
    assert result.exit_code == 0, result.output
    assert answers == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert all(is_closed(connection) for connection in opened)


def test_path_must_start_with_a_slash(fake_server: type[FakeServer]) -> None:
    result = CliRunner().invoke(main, ["listen", "--secret", "s", "--path", "webhooks"])
    assert result.exit_code == 2
    assert "Invalid value for --path: must start with '/'" in result.output
    assert fake_server.instances == []


def test_port_in_use_is_an_error_not_a_traceback(fake_server: type[FakeServer]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        result = CliRunner().invoke(main, ["listen", "--secret", "s", "--port", str(port)])
    assert result.exit_code == 1
    assert f"Error: cannot listen on 127.0.0.1:{port}:" in result.output
    assert "Address already in use" in result.output
    assert fake_server.instances == []


def test_port_out_of_range_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["listen", "--secret", "s", "--port", "70000"])
    assert result.exit_code == 2
    assert "70000 is not in the range 0<=x<=65535" in result.output


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["listen", "--secret", "s", "--tolerance", "nan"], "--tolerance"),
        (["listen", "--secret", "s", "--tolerance", "inf"], "--tolerance"),
        (["trigger", "note.created", "--url", "http://x/", "--fast", "--secret", "s",
          "--timeout", "nan"], "--timeout"),
        (["trigger", "note.created", "--url", "http://x/", "--fast", "--secret", "s",
          "--timeout", "inf"], "--timeout"),
        (["deliver", "--url", "http://x/", "--fast", "--secret", "s", "--events", __file__,
          "--duplicates", "nan"], "--duplicates"),
        (["api", "operations", "--api-key", "k", "--base-url", "http://x", "--timeout", "nan"],
         "--timeout"),
    ],
)  # fmt: skip
def test_a_number_that_is_not_finite_is_a_usage_error_naming_its_option(
    fake_server: type[FakeServer], args: list[str], option: str
) -> None:
    # click's FloatRange lets nan through: it reached the HTTP client (a traceback) or
    # the receiver, whose refusal was reported against --store
    result = CliRunner().invoke(main, args, input="")
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}':" in result.output
    assert "not a finite number" in result.output
    assert fake_server.instances == []


def test_bind_resolves_port_zero_and_listens() -> None:
    sock = listen_module._bind("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        assert port > 0
        assert sock.get_inheritable()
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # accepted into the backlog: it is listening
    finally:
        sock.close()


def test_bind_ipv6_and_the_url_host_in_brackets(fake_server: type[FakeServer]) -> None:
    try:
        sock = listen_module._bind("::1", 0)
    except OSError as error:  # depends on the machine
        pytest.skip(f"no IPv6 loopback: {error}")
    with sock:
        assert sock.family == socket.AF_INET6
    assert listen_module._url_host("::1") == "[::1]"
    assert listen_module._url_host("127.0.0.1") == "127.0.0.1"
    result = CliRunner().invoke(main, ["listen", "--secret", "s", "--host", "::1", "--port", "0"])
    assert result.exit_code == 0, result.output
    assert re.search(r"listening on http://\[::1\]:\d+/webhooks", result.stderr)


def test_bind_failure_closes_the_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[socket.socket] = []
    real_socket = socket.socket

    def recording_socket(*args: Any) -> socket.socket:
        sock = real_socket(*args)
        created.append(sock)
        return sock

    with real_socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        monkeypatch.setattr(socket, "socket", recording_socket)
        with pytest.raises(OSError, match="in use"):
            listen_module._bind("127.0.0.1", port)
    [sock] = created
    assert sock.fileno() == -1  # closed, not leaked


def test_json_printer_writes_bytes_and_flushes(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", out)
    printer = listen_module._json_printer(listen_module._Stdout())
    asyncio.run(printer(event({"text": "h\u00e9llo", "n": [1, 2.5, None, True]})))
    asyncio.run(printer(event(["a"], name="x.y", version=3)))
    lines = out.buffer.getvalue().decode("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "eventName": "note.created",
            "version": 1,
            "organizationId": ORG,
            "data": {"text": "héllo", "n": [1, 2.5, None, True]},
        },
        {"eventName": "x.y", "version": 3, "organizationId": ORG, "data": ["a"]},
    ]


def test_readable_printer_shortens_long_data(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    printer = listen_module._readable_printer(listen_module._Stdout())
    asyncio.run(printer(event({"text": "x" * 300})))
    asyncio.run(printer(event({"short": 1}, name="thing.new", version=2)))
    long_line, short_line = out.getvalue().splitlines()
    summary = long_line.split("  ", 3)[3]
    assert len(summary) == 100
    assert summary.startswith('{"text":"xxx')
    assert summary.endswith("x…")
    assert re.fullmatch(rf'\d\d:\d\d:\d\d  {ORG}  thing\.new v2  \{{"short":1\}}', short_line)


def test_not_found_app_answers_404_with_a_hint_and_passes_the_lifespan_on() -> None:
    app = listen_module._not_found("/hooks", WebhookReceiver(SECRET, store="memory"))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    assert asyncio.run(
        lifespan_around(app, lambda: asyncio.sleep(0))
    ) == [  # the receiver's lifespan
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    asyncio.run(app({"type": "websocket"}, receive, send))
    assert sent == []
    asyncio.run(app({"type": "http", "path": "/x", "method": "GET"}, receive, send))
    start, body = sent
    assert start["status"] == 404
    assert body["body"] == b"not found: deliveries are POSTed to /hooks\n"
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/plain; charset=utf-8"
    assert headers[b"content-length"] == str(len(body["body"])).encode()


def test_log_config_sends_everything_to_stderr_and_adds_the_library_logger() -> None:
    from uvicorn.config import LOGGING_CONFIG

    before = json.dumps(LOGGING_CONFIG, sort_keys=True)
    config = serve_module.log_config()
    assert config["handlers"]["access"]["stream"] == "ext://sys.stderr"
    assert config["handlers"]["default"]["stream"] == "ext://sys.stderr"
    assert config["loggers"]["service_webhooks"] == {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    assert json.dumps(LOGGING_CONFIG, sort_keys=True) == before  # uvicorn's is untouched
