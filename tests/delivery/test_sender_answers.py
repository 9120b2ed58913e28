"""What counts as the receiver's answer (spec §3.3, §6.1, §7): a 1xx status line with no
final response after it, a status whose body is still coming at the deadline, a status
sent before the body was read and followed by a reset, and a TLS connection verified for
one host name never reused for another."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sw_tls import self_signed

from service_webhooks.delivery import Failure, Result, StaticResolver

BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n-1"}}'

Script = Callable[[asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Script], Awaitable[str]]]:
    """Starts raw TCP receivers on 127.0.0.1 that read one request, then run a script."""
    servers: list[asyncio.Server] = []
    handlers: set[asyncio.Task[Any]] = set()

    async def start(script: Script) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.add(asyncio.current_task())  # type: ignore[arg-type]
            try:
                await reader.readuntil(b"\r\n\r\n")
                await script(writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"

    yield start
    for task in handlers:
        task.cancel()
    await asyncio.gather(*handlers, return_exceptions=True)
    for server in servers:
        server.close()
        await server.wait_closed()


def answer(raw: bytes, *, hold: float = 0.0) -> Script:
    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(raw)
        await writer.drain()
        await asyncio.sleep(hold)

    return script


@pytest.mark.e2e
@pytest.mark.parametrize("status", [100, 101, 103, 199])
async def test_a_lone_1xx_then_close_is_a_permanent_failure(
    status: int, scripted: Any, loopback_sender: Any
) -> None:
    # Spec §7: any other status, including 1xx, is a permanent failure. Before the fix
    # the client skipped the 1xx and reported "disconnected" or a protocol error: retried.
    url = await scripted(answer(f"HTTP/1.1 {status} Info\r\n\r\n".encode()))
    async with loopback_sender(deadline=3) as sender:
        outcome = await sender.send(url, BODY, secret="s", organization_id="o")
    assert outcome.status == status
    assert outcome.failure is None
    assert outcome.result is Result.PERMANENT_FAILURE
    assert outcome.description.startswith(f"HTTP {status}: permanent failure")


@pytest.mark.e2e
async def test_a_1xx_then_silence_is_a_permanent_failure_at_the_deadline(
    scripted: Any, loopback_sender: Any
) -> None:
    url = await scripted(answer(b"HTTP/1.1 199 Info\r\n\r\n", hold=5))
    async with loopback_sender(deadline=0.5) as sender:
        outcome = await sender.send(url, BODY, secret="s", organization_id="o")
    assert (outcome.status, outcome.result) == (199, Result.PERMANENT_FAILURE)
    assert outcome.duration < 2


@pytest.mark.e2e
async def test_a_1xx_followed_by_a_final_response_is_that_response(
    scripted: Any, loopback_sender: Any
) -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"
    url = await scripted(answer(raw))
    async with loopback_sender(deadline=3) as sender:
        outcome = await sender.send(url, BODY, secret="s", organization_id="o")
    assert (outcome.status, outcome.result) == (204, Result.SUCCESS)


def test_the_1xx_hook_is_in_place_on_the_installed_httpcore(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The lone-1xx detection wraps a private attribute of httpx's transport: a release
    that moves it fails here by name, not as a 1xx test that reports a disconnect."""
    import httpx

    from service_webhooks.delivery import sender

    caplog.set_level(logging.WARNING, logger="service_webhooks")
    transport = sender._recording_transport(True, httpx.Limits())
    pool = getattr(transport, sender._HOOK[0])
    assert isinstance(getattr(pool, sender._HOOK[1]), sender._RecordingBackend)
    assert caplog.records == []


@pytest.mark.e2e
@pytest.mark.parametrize("interim", [100, 103])
async def test_a_moved_1xx_hook_is_a_warning_and_deliveries_still_work(
    interim: int,
    scripted: Any,
    loopback_sender: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """If httpx or httpcore renames the attribute the detection hooks, it cannot turn
    off silently: one WARNING per process says what is lost, and every final status
    still counts (an interim response before it is skipped, spec §7)."""
    from service_webhooks.delivery import sender

    monkeypatch.setattr(sender, "_HOOK", ("_pool", "_renamed_network_backend"))
    sender._warn_unhooked.cache_clear()
    caplog.set_level(logging.WARNING, logger="service_webhooks")
    raw = f"HTTP/1.1 {interim} Info\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
    url = await scripted(answer(raw.encode()))
    for _ in range(2):  # two senders, two transports: one warning
        async with loopback_sender(deadline=3) as client:
            outcome = await client.send(url, BODY, secret="s", organization_id="o")
        assert (outcome.status, outcome.result) == (200, Result.SUCCESS)
    sender._warn_unhooked.cache_clear()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "_renamed_network_backend" in warnings[0].getMessage()
    assert "1xx" in warnings[0].getMessage()


@pytest.mark.e2e
@pytest.mark.parametrize("interim", [100, 103])
async def test_an_interim_response_before_the_final_one_is_skipped(
    interim: int, scripted: Any, loopback_sender: Any
) -> None:
    raw = f"HTTP/1.1 {interim} Info\r\nlink: </a.css>\r\n\r\nHTTP/1.1 409 Conflict\r\n\r\n"
    url = await scripted(answer(raw.encode()))
    async with loopback_sender(deadline=3) as sender:
        outcome = await sender.send(url, BODY, secret="s", organization_id="o")
    assert (outcome.status, outcome.result) == (409, Result.PERMANENT_FAILURE)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("status", "result"), [(200, Result.SUCCESS), (503, Result.TEMPORARY_FAILURE)]
)
async def test_a_status_in_time_counts_even_if_its_body_is_late(
    status: int, result: Result, scripted: Any, loopback_sender: Any
) -> None:
    # Spec §6.1: the service ignores the response body and uses only the status code;
    # before the fix a body still coming at the deadline turned a 200 into a timeout.
    raw = f"HTTP/1.1 {status} X\r\ncontent-length: 100\r\n\r\npartial".encode()
    url = await scripted(answer(raw, hold=5))
    async with loopback_sender(deadline=0.5) as sender:
        outcome = await sender.send(url, BODY, secret="s", organization_id="o", linger=True)
        assert not sender._lingering  # answered: nothing is left open on the receiver
    assert (outcome.status, outcome.result, outcome.failure) == (status, result, None)
    assert outcome.response_snippet == "partial"
    assert outcome.duration < 2


@pytest.mark.e2e
async def test_a_lingering_attempt_is_closed_at_linger_limit_even_while_bytes_trickle(
    scripted: Any, loopback_sender: Any
) -> None:
    # On a virtual clock a timed-out attempt lingers until the receiver answers, at most
    # linger_limit seconds (docs/delivery.md). httpx's timeouts are per read, so a status
    # line trickling in a byte at a time (a slow receiver, a lossy link) kept it open for
    # ever before the fix: settle() and `deliver --fast` waited as long as the trickle.
    async def trickle(writer: asyncio.StreamWriter) -> None:
        for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n":
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.25)  # about 10 s for the whole answer

    url = await scripted(trickle)
    async with loopback_sender(deadline=0.3, linger_limit=1.0) as sender:
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome = await sender.send(url, BODY, secret="s", organization_id="o", linger=True)
        assert outcome.failure is Failure.TIMEOUT
        assert await sender.settle() == 1
        assert loop.time() - started < 2.5
        assert not sender._lingering


async def answer_unread_then_reset(answer: bytes) -> tuple[str, asyncio.Server]:
    """A receiver that reads only the request head, answers, then resets the connection
    (SO_LINGER 0) while the body is still coming: an early 413 or 401, as a proxy with a
    smaller body limit sends. A small receive buffer makes the client still be sending."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind(("127.0.0.1", 0))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        await asyncio.sleep(0.2)  # the answer has arrived; the body is still being sent
        linger = struct.pack("ii", 1, 0)
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        writer.transport.abort()

    server = await asyncio.start_server(handle, sock=listener)
    return f"http://127.0.0.1:{listener.getsockname()[1]}/", server


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("status", "result"), [(413, Result.PERMANENT_FAILURE), (503, Result.TEMPORARY_FAILURE)]
)
async def test_a_status_sent_before_the_body_was_read_counts_despite_a_reset(
    status: int, result: Result, loopback_sender: Any
) -> None:
    # Spec §3.3, §7: a response received is classified by its status. Before the fix the
    # reset that followed an early answer discarded it: "transport error: ReadError",
    # a temporary failure, so a 413 was retried for 24 hours. The body is larger than
    # the loopback socket buffers, as a 1 MiB body is over a real network.
    raw = f"HTTP/1.1 {status} X\r\ncontent-length: 5\r\nconnection: close\r\n\r\nearly"
    url, server = await answer_unread_then_reset(raw.encode())
    body = b'{"eventName":"note.created","version":1,"data":"' + b"x" * 8_000_000 + b'"}'
    try:
        async with loopback_sender(deadline=5) as sender:
            outcome = await sender.send(url, body, secret="s", organization_id="o")
    finally:
        server.close()
        await server.wait_closed()
    assert (outcome.status, outcome.result, outcome.failure) == (status, result, None)
    assert outcome.response_snippet == "early"


@pytest.fixture(scope="module")
def receiver_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls-pool"), "receiver.test", "DNS:receiver.test")


@pytest.fixture(scope="module")
def tls_receiver(receiver_cert: tuple[Path, Path], serve: Any, StatusApp: Any) -> Iterator[str]:
    key, cert = receiver_cert
    with serve(StatusApp(), ssl_keyfile=str(key), ssl_certfile=str(cert)) as url:
        yield url


@pytest.mark.e2e
async def test_a_tls_connection_is_not_reused_for_another_host_name(
    tls_receiver: str, receiver_cert: tuple[Path, Path], loopback_sender: Any
) -> None:
    # Two names at one address; the certificate is valid for receiver.test only. Spec
    # §3.3: an untrusted certificate is a (temporary) failure. Before the fix the pooled
    # connection to 127.0.0.1, verified for receiver.test, carried other.test's delivery.
    port = tls_receiver.rsplit(":", 1)[1]
    trusted = ssl.create_default_context(cafile=str(receiver_cert[1]))
    resolver = StaticResolver({"receiver.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    async with loopback_sender(resolver=resolver, verify=trusted) as sender:
        good = await sender.send(
            f"https://receiver.test:{port}/status/200", BODY, secret="s", organization_id="o"
        )
        other = await sender.send(
            f"https://other.test:{port}/status/200", BODY, secret="s", organization_id="o"
        )
        again = await sender.send(
            f"https://receiver.test:{port}/status/200", BODY, secret="s", organization_id="o"
        )
    assert good.status == 200
    assert other.failure is Failure.TLS
    assert other.result is Result.TEMPORARY_FAILURE
    assert again.status == 200
