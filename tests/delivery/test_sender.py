"""One attempt (spec §3.3, §5.2, §6.1, §8): request shape, deadline, transport failures."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sw_tls

from service_webhooks import SIGNATURE_HEADER, Secret, verify
from service_webhooks._exceptions import ConfigurationError
from service_webhooks.delivery import (
    CONTENT_TYPE,
    DEFAULT_DEADLINE,
    Failure,
    Result,
    Sender,
    StaticResolver,
)

BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n-1"}}'


async def test_request_is_a_signed_post_of_the_exact_body(Recording: Any, mock_sender: Any) -> None:
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        first = await sender.send(
            "https://hooks.example.com/in",
            BODY,
            secret="whsec-1",
            organization_id="o-1",
            timestamp=1_700_000_000,
        )
        second = await sender.send(
            "https://hooks.example.com/in",
            BODY,
            secret="whsec-1",
            organization_id="o-1",
            timestamp=1_700_000_061,
        )
    assert (first.timestamp, second.timestamp) == (1_700_000_000, 1_700_000_061)
    one, two = transport.calls
    for request, t in ((one, 1_700_000_000), (two, 1_700_000_061)):
        assert request.method == "POST"
        assert request.content == BODY
        assert request.headers["content-type"] == CONTENT_TYPE
        parsed = verify(
            request.content, request.headers[SIGNATURE_HEADER], [Secret("whsec-1")], now=t
        )
        assert (parsed.organization_id, parsed.timestamp) == ("o-1", t)
    assert one.headers[SIGNATURE_HEADER] != two.headers[SIGNATURE_HEADER]


@pytest.mark.parametrize(
    "url",
    ["https://user:pw@hooks.example.com/in", "https://user@hooks.example.com/in", "ftp://h/x"],
)
async def test_a_url_that_is_no_endpoint_url_is_refused_before_anything_is_sent(
    Recording: Any, mock_sender: Any, url: str
) -> None:
    """``Endpoint`` and the CLI refused credentials in the URL, but ``Sender.send``
    called directly sent them to the receiver as ``Authorization: Basic``."""
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        with pytest.raises(ConfigurationError, match="endpoint URL"):
            await sender.send(url, BODY, secret="whsec-1", organization_id="o-1")
    assert transport.calls == []


async def test_default_timestamp_is_now(Recording: Any, mock_sender: Any) -> None:
    transport = Recording(200)
    async with mock_sender(transport) as sender:
        before = int(time.time())
        outcome = await sender.send("http://h.example/", BODY, secret="s", organization_id="o")
    assert before <= outcome.timestamp <= int(time.time())


def test_deadline_must_be_positive() -> None:
    with pytest.raises(ConfigurationError):
        Sender(deadline=0)
    assert DEFAULT_DEADLINE == 10.0


@pytest.mark.e2e
async def test_redirect_is_not_followed(status_server: Any, loopback_sender: Any) -> None:
    url, app = status_server
    before = len(app.requests)
    async with loopback_sender() as sender:
        outcome = await sender.send(f"{url}/redirect", BODY, secret="s", organization_id="o")
    assert outcome.status == 302
    assert outcome.result is Result.TEMPORARY_FAILURE
    assert outcome.location == "/status/200"  # named in the audit log's description
    assert outcome.description.endswith("; it points to /status/200")
    assert [r["path"] for r in app.requests[before:]] == ["/redirect"]


@pytest.mark.e2e
async def test_response_body_is_ignored_beyond_a_snippet(
    status_server: Any, loopback_sender: Any
) -> None:
    url, _ = status_server
    async with loopback_sender(snippet_size=1024) as sender:
        outcome = await sender.send(f"{url}/big", BODY, secret="s", organization_id="o")
    assert outcome.result is Result.SUCCESS
    assert outcome.response_snippet == "x" * 1024


@pytest.mark.e2e
async def test_short_deadline_ends_a_slow_attempt(status_server: Any, loopback_sender: Any) -> None:
    url, _ = status_server
    async with loopback_sender(deadline=0.3) as sender:
        outcome = await sender.send(f"{url}/sleep/3", BODY, secret="s", organization_id="o")
    assert outcome.failure is Failure.TIMEOUT
    assert outcome.result is Result.TEMPORARY_FAILURE
    assert outcome.status is None


@pytest.fixture
async def trickle_server() -> AsyncIterator[str]:
    """Answers 200 but sends the response one byte every 50 ms (about 2 s in all)."""

    handlers: set[asyncio.Task[Any]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await reader.readuntil(b"\r\n\r\n")
            for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok":
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.05)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/"
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)


@pytest.mark.e2e
async def test_deadline_covers_the_whole_attempt_not_each_read(
    trickle_server: str, loopback_sender: Any
) -> None:
    # Every byte arrives well within 0.5 s of the previous one, so only an overall
    # deadline can end this attempt.
    async with loopback_sender(deadline=0.5) as sender:
        outcome = await sender.send(trickle_server, BODY, secret="s", organization_id="o")
    assert outcome.failure is Failure.TIMEOUT
    async with loopback_sender(deadline=5) as sender:
        outcome = await sender.send(trickle_server, BODY, secret="s", organization_id="o")
    assert outcome.status == 200


@pytest.mark.e2e
async def test_real_ten_second_deadline(status_server: Any, loopback_sender: Any) -> None:
    """The service's 10 s against a receiver that sleeps 11 s (spec §8)."""
    url, _ = status_server
    started = time.perf_counter()
    async with loopback_sender() as sender:
        outcome = await sender.send(f"{url}/sleep/11", BODY, secret="s", organization_id="o")
    elapsed = time.perf_counter() - started
    assert outcome.failure is Failure.TIMEOUT
    assert outcome.result is Result.TEMPORARY_FAILURE
    assert 10.0 <= elapsed <= 10.5
    assert outcome.duration <= 10.5


@pytest.mark.e2e
async def test_refused_connection_is_temporary(unused_port: int, loopback_sender: Any) -> None:
    async with loopback_sender() as sender:
        outcome = await sender.send(
            f"http://127.0.0.1:{unused_port}/", BODY, secret="s", organization_id="o"
        )
    assert outcome.failure is Failure.REFUSED
    assert outcome.result is Result.TEMPORARY_FAILURE


@pytest.mark.e2e
async def test_next_checked_address_is_tried_after_a_refusal(
    status_server: Any, loopback_sender: Any
) -> None:
    url, _ = status_server
    port = url.rsplit(":", 1)[1]
    resolver = StaticResolver({"receiver.test": ["127.0.0.2", "127.0.0.1"]})
    async with loopback_sender(resolver=resolver) as sender:
        outcome = await sender.send(
            f"http://receiver.test:{port}/status/204", BODY, secret="s", organization_id="o"
        )
    assert outcome.status == 204
    assert outcome.address == "127.0.0.1"


@pytest.mark.e2e
async def test_https_to_an_http_server_is_a_temporary_mismatch(
    status_server: Any, loopback_sender: Any
) -> None:
    url, _ = status_server
    async with loopback_sender() as sender:
        outcome = await sender.send(
            url.replace("http://", "https://") + "/status/200",
            BODY,
            secret="s",
            organization_id="o",
        )
    assert outcome.failure in (Failure.PROTOCOL, Failure.TLS)
    assert outcome.result is Result.TEMPORARY_FAILURE


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sw_tls.self_signed(tmp_path_factory.mktemp("tls"), "receiver.test", "DNS:receiver.test")


@pytest.fixture(scope="module")
def tls_server(self_signed: tuple[Path, Path], serve: Any, StatusApp: Any) -> Iterator[str]:
    key, cert = self_signed
    with serve(StatusApp(), ssl_keyfile=str(key), ssl_certfile=str(cert)) as url:
        yield url


@pytest.mark.e2e
async def test_untrusted_certificate_is_temporary(tls_server: str, loopback_sender: Any) -> None:
    port = tls_server.rsplit(":", 1)[1]
    resolver = StaticResolver({"receiver.test": ["127.0.0.1"]})
    async with loopback_sender(resolver=resolver) as sender:
        outcome = await sender.send(
            f"https://receiver.test:{port}/status/200", BODY, secret="s", organization_id="o"
        )
    assert outcome.failure is Failure.TLS
    assert outcome.result is Result.TEMPORARY_FAILURE


@pytest.mark.e2e
async def test_certificate_is_checked_against_the_name_not_the_address(
    tls_server: str, self_signed: tuple[Path, Path], loopback_sender: Any
) -> None:
    port = tls_server.rsplit(":", 1)[1]
    trusted = ssl.create_default_context(cafile=str(self_signed[1]))
    resolver = StaticResolver({"receiver.test": ["127.0.0.1"]})
    async with loopback_sender(resolver=resolver, verify=trusted) as sender:
        outcome = await sender.send(
            f"https://receiver.test:{port}/status/200", BODY, secret="s", organization_id="o"
        )
    assert outcome.status == 200
    assert outcome.address == "127.0.0.1"


@pytest.mark.e2e
async def test_http_to_an_https_server_is_temporary(tls_server: str, loopback_sender: Any) -> None:
    async with loopback_sender() as sender:
        outcome = await sender.send(
            tls_server.replace("https://", "http://") + "/status/200",
            BODY,
            secret="s",
            organization_id="o",
        )
    assert outcome.result is Result.TEMPORARY_FAILURE
    assert outcome.failure in (Failure.PROTOCOL, Failure.TRANSPORT)
