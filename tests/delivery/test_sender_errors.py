"""``Sender``: how each transport error becomes a failure kind (spec §7), through a
scripted transport (no sockets), and the error classifier on its own."""

from __future__ import annotations

import errno
import ssl
from collections.abc import AsyncIterator, Callable, Sequence

import httpx
import pytest

from service_webhooks.delivery import Failure, Result, Sender
from service_webhooks.delivery.sender import _classify_transport_error

SECRET = "whsec-sender-errors"
ORG = "o-SENDERR-eu1"
BODY = b'{"eventName":"note.created","version":1,"data":{}}'


class FixedResolver:
    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        return self.addresses


class Scripted(httpx.AsyncBaseTransport):
    """Answers each request with ``answer(request)`` (a response, or raises)."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.answer = answer
        self.hosts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.hosts.append(request.url.host)
        return self.answer(request)


def sender_for(answer: Callable[[httpx.Request], httpx.Response], *addresses: str) -> Sender:
    return Sender(
        transport=Scripted(answer),
        resolver=FixedResolver(*(addresses or ("203.0.113.7",))),
        allow_private_destinations=True,
    )


def raising(error: BaseException) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        raise error

    return answer


@pytest.mark.parametrize(
    ("error", "failure", "description"),
    [
        (
            OSError(errno.ENETUNREACH, "Network is unreachable"),
            Failure.UNREACHABLE,
            "host unreachable: Network is unreachable",
        ),
        (
            ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
            Failure.REFUSED,
            "connection refused",
        ),
        (
            OSError(errno.EPERM, "not permitted"),
            Failure.TRANSPORT,
            "transport error: PermissionError: [Errno 1] not permitted",
        ),
        (
            httpx.RemoteProtocolError("illegal status line"),
            Failure.PROTOCOL,
            "protocol error (HTTP/HTTPS mismatch?): illegal status line",
        ),
        (
            # The receiver closed the connection without answering: said so, not blamed
            # on an HTTP/HTTPS mismatch.
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            Failure.TRANSPORT,
            "connection closed by the receiver without a response: "
            "Server disconnected without sending a response.",
        ),
        (httpx.ReadError(""), Failure.TRANSPORT, "transport error: ReadError: ReadError"),
        (httpx.WriteTimeout("write timed out"), Failure.TIMEOUT, "timeout: write timed out"),
    ],
)
async def test_transport_errors_are_temporary_failures_without_status(
    error: BaseException, failure: Failure, description: str
) -> None:
    async with sender_for(raising(error)) as sender:
        attempt = await sender.send(
            "http://receiver.test/hooks", BODY, secret=SECRET, organization_id=ORG, timestamp=7
        )
    assert attempt.result is Result.TEMPORARY_FAILURE
    assert attempt.status is None
    assert attempt.failure is failure
    assert attempt.description == description
    assert attempt.response_snippet == ""
    assert attempt.timestamp == 7
    assert attempt.address == "203.0.113.7"


async def test_every_address_refusing_is_one_failure_naming_the_last() -> None:
    transport = Scripted(raising(httpx.ConnectError("[Errno 111] Connection refused")))
    sender = Sender(
        transport=transport,
        resolver=FixedResolver("192.0.2.1", "192.0.2.2"),
        allow_private_destinations=True,
    )
    async with sender:
        attempt = await sender.send(
            "http://receiver.test/", BODY, secret=SECRET, organization_id=ORG
        )
    assert transport.hosts == ["192.0.2.1", "192.0.2.2"]
    assert (attempt.failure, attempt.description) == (Failure.REFUSED, "connection refused")
    assert attempt.address == "192.0.2.2"


class Broken(httpx.AsyncByteStream):
    """A body that breaks after its first chunk (the connection dropped)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"partial \xc3"
        raise httpx.ReadError("connection reset")


async def test_a_body_cut_short_keeps_the_status_and_what_arrived() -> None:
    answer: Callable[[httpx.Request], httpx.Response] = lambda request: httpx.Response(  # noqa: E731
        503, stream=Broken()
    )
    async with sender_for(answer) as sender:
        attempt = await sender.send(
            "http://receiver.test/", BODY, secret=SECRET, organization_id=ORG
        )
    assert attempt.status == 503
    assert attempt.result is Result.TEMPORARY_FAILURE
    assert attempt.failure is None
    assert attempt.response_snippet == "partial \ufffd"  # invalid UTF-8 replaced


async def test_zone_index_of_a_resolved_address_is_dropped() -> None:
    transport = Scripted(lambda request: httpx.Response(204))
    sender = Sender(
        transport=transport, resolver=FixedResolver("fe80::1%eth0"), allow_private_destinations=True
    )
    async with sender:
        attempt = await sender.send(
            "http://receiver.test/", BODY, secret=SECRET, organization_id=ORG
        )
    assert attempt.result is Result.SUCCESS
    assert attempt.address == "fe80::1"
    assert transport.hosts == ["fe80::1"]


def ssl_error(reason: str) -> ssl.SSLError:
    error = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower()}")
    error.reason = reason
    return error


def wrapped(cause: BaseException, error: Exception) -> Exception:
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "failure", "description"),
    [
        (httpx.ConnectTimeout("connect"), Failure.TIMEOUT, "timeout: connect"),
        (httpx.PoolTimeout(""), Failure.TIMEOUT, "timeout: PoolTimeout"),
        (
            wrapped(ssl_error("WRONG_VERSION_NUMBER"), httpx.ConnectError("tls")),
            Failure.PROTOCOL,
            "HTTP/HTTPS mismatch: WRONG_VERSION_NUMBER",
        ),
        (
            wrapped(ssl_error("CERTIFICATE_VERIFY_FAILED"), httpx.ConnectError("tls")),
            Failure.TLS,
            "TLS error: CERTIFICATE_VERIFY_FAILED",
        ),
        (
            wrapped(OSError(errno.EHOSTUNREACH, "No route to host"), httpx.ConnectError("x")),
            Failure.UNREACHABLE,
            "host unreachable: No route to host",
        ),
        (httpx.ConnectError("Connection Refused"), Failure.REFUSED, "connection refused"),
        (
            httpx.ConnectError("[SSL] certificate has expired"),
            Failure.TLS,
            "TLS error: [SSL] certificate has expired",
        ),
        (
            httpx.ConnectError("All connection attempts failed"),
            Failure.UNREACHABLE,
            "cannot connect: All connection attempts failed",
        ),
        (httpx.LocalProtocolError("bad header"), Failure.PROTOCOL,
         "protocol error (HTTP/HTTPS mismatch?): bad header"),
        (httpx.UnsupportedProtocol("gopher"), Failure.TRANSPORT,
         "transport error: UnsupportedProtocol: gopher"),
        # The receiver reset the connection without answering (spec §6.3: the audit log
        # describes the result); before the fix: "transport error: ReadError: ReadError".
        (
            wrapped(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
                    httpx.ReadError("")),
            Failure.TRANSPORT,
            "connection reset by the receiver without a response",
        ),
        (
            wrapped(BrokenPipeError(errno.EPIPE, "Broken pipe"), httpx.WriteError("")),
            Failure.TRANSPORT,
            "connection reset by the receiver without a response",
        ),
    ],
)  # fmt: skip
def test_classifier(error: Exception, failure: Failure, description: str) -> None:
    failed = _classify_transport_error(error)
    assert (failed.failure, failed.description) == (failure, description)


def test_classifier_survives_a_cyclic_chain() -> None:
    outer = httpx.ReadError("outer")
    inner = OSError(errno.EIO, "io")
    outer.__context__ = inner
    inner.__context__ = outer  # a cycle must not loop forever
    failed = _classify_transport_error(outer)
    assert failed.failure is Failure.TRANSPORT


async def test_a_resolver_answering_no_address_is_an_unresolvable_host() -> None:
    transport = Scripted(lambda request: httpx.Response(200))
    sender = Sender(transport=transport, resolver=FixedResolver(), allow_private_destinations=True)
    async with sender:
        attempt = await sender.send(
            "http://receiver.test/hooks", BODY, secret=SECRET, organization_id=ORG, timestamp=7
        )
    assert attempt.result is Result.TEMPORARY_FAILURE
    assert attempt.failure is Failure.UNRESOLVABLE
    assert attempt.status is None
    assert transport.hosts == []  # nothing was contacted
