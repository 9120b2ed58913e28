"""Send one signed delivery attempt over HTTP (spec §3.3, §5.2, §6.1, §8).

The rules:

* ``POST`` the event's exact body bytes with ``Content-Type: application/json;
  charset=utf-8`` and a ``Service-Signature`` computed by
  :func:`service_webhooks._signing.sign` at send time (a new ``t`` every attempt).
* One overall deadline per attempt (10 s): resolving, connecting, sending, waiting and
  reading the response together, not per phase. At the deadline the connection is
  closed and the attempt is a temporary failure. (With ``linger=True``, used by the
  emulator on a virtual clock, the attempt is reported as timed out at the deadline but
  the request stays open until the receiver answers, so :meth:`Sender.settle` can tell
  when the receiver is done with it.)
* Only the status counts. At most ``snippet_size`` bytes of the response body are read
  for the audit log; the rest is discarded with the connection. A status that arrived
  within the deadline is the attempt's answer even when its body is still coming at the
  deadline (the snippet then holds what arrived).
* A receiver may answer before it has read the body (an early 413 or 401) and then
  reset the connection. The client's write fails first, and the event loop's transport,
  closing on that error, would discard the answer already waiting in the socket; so
  each plain-HTTP connection keeps a duplicate of its socket, and the answer is read
  from it: the status counts, as any status received does.
* A 1xx status is an answer like any other (spec §7: permanent failure). HTTP clients
  skip an informational response and wait for a final one, so the first bytes each
  request reads are kept: when no final response follows (the connection closes, a
  101 without an upgrade, or the deadline), the 1xx status line that did arrive
  classifies the attempt. A 1xx followed by a final response is that final response.
* Redirects are never followed; proxies from the environment are never used.
* The host is resolved and every address checked (:mod:`.addresses`); the request is
  sent to a checked address (the ``Host`` header and TLS SNI keep the original name, so
  certificates are verified against it). If a checked address refuses the connection
  the next one is tried, within the same deadline. HTTPS connections are pooled per
  host name, never shared between two names that resolve to the same address: a
  connection whose certificate was verified for one name is not reused for another.

The transport is injectable: pass ``httpx.ASGITransport(app)`` to deliver into an app
in-process (see :func:`service_webhooks.delivery.asgi_sender`), or a recording
transport in tests.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import functools
import logging
import re
import socket
import ssl
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType

import httpcore
import httpx

from .._credentials import Secret
from .._envelope import CONTENT_TYPE
from .._reporting import printable
from .._signing import SIGNATURE_HEADER, sign
from .addresses import (
    ReservedAddressError,
    Resolver,
    SystemResolver,
    UnresolvableHostError,
    check_addresses,
)
from .classification import Failure, Result, classify_failure, classify_status, describe_status
from .endpoint import check_url

__all__ = ["CONTENT_TYPE", "DEFAULT_DEADLINE", "USER_AGENT", "AttemptResult", "Sender"]

DEFAULT_DEADLINE = 10.0
"""Seconds one attempt may take, start to end (spec §3.3, §8)."""

USER_AGENT = "service-webhooks-emulator"
"""The ``User-Agent`` the emulator sends."""

logger = logging.getLogger("service_webhooks")

_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}


_HEAD_SIZE = 64
"""Bytes kept from the start of what each request reads: enough for a status line."""

_INFORMATIONAL = re.compile(rb"\s*HTTP/\d(?:\.\d)? (1\d\d)(?:[ \r\n]|$)")

_head: contextvars.ContextVar[bytearray | None] = contextvars.ContextVar(
    "service_webhooks_delivery_head", default=None
)
"""Where the stream wrapper puts the first bytes the current attempt reads."""


@dataclass(slots=True)
class _Progress:
    """What one attempt got so far, shared between :meth:`Sender.send` and its exchange."""

    addresses: list[str] = field(default_factory=list)  # tried, in order
    status: int | None = None  # the final status, once its headers arrived
    location: str | None = None  # a 3xx answer's Location header
    received: bytearray = field(default_factory=bytearray)  # the start of the body
    head: bytearray = field(default_factory=bytearray)  # the first bytes read

    def informational(self) -> int | None:
        """The 1xx status the receiver sent when no final response followed."""
        match = _INFORMATIONAL.match(bytes(self.head))
        return None if match is None else int(match.group(1))


class _RecordingStream(httpcore.AsyncNetworkStream):
    """Keeps the first bytes read for the current attempt (see :data:`_head`).

    ``spare`` is a duplicate of a plain TCP stream's socket: when a read fails because
    the connection broke (the receiver reset it after answering, and the failed write of
    the body closed the event loop's transport), what the receiver sent before the reset
    is still in the socket and is read from the duplicate.
    """

    def __init__(
        self, inner: httpcore.AsyncNetworkStream, spare: socket.socket | None = None
    ) -> None:
        self._inner = inner
        self._spare = spare

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            data = await self._inner.read(max_bytes, timeout)
        except httpcore.ReadError:
            data = self._unread(max_bytes)
            if not data:
                raise
        head = _head.get()
        if head is not None and len(head) < _HEAD_SIZE:
            head += data[: _HEAD_SIZE - len(head)]
        return data

    def _unread(self, max_bytes: int) -> bytes:
        """Bytes received before the connection broke, still unread (``b""``: none)."""
        if self._spare is None:
            return b""
        try:
            return self._spare.recv(max_bytes)  # non-blocking, as the stream's socket
        except OSError:  # nothing was left (BlockingIOError), or only the reset
            return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._close_spare()

    def _close_spare(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # The socket now carries TLS records: its raw bytes are no answer to read.
        self._close_spare()
        return _RecordingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> object:
        return self._inner.get_extra_info(info)


class _RecordingBackend(httpcore.AsyncNetworkBackend):
    """Wraps every stream of a connection pool in a :class:`_RecordingStream`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _RecordingStream(stream, _duplicate(stream.get_extra_info("socket")))

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover - the sender never uses one
        stream = await self._inner.connect_unix_socket(path, timeout, socket_options)
        return _RecordingStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _duplicate(raw: object) -> socket.socket | None:
    """A duplicate of a stream's socket (asyncio hands out a ``TransportSocket`` wrapper,
    whose ``dup`` gives a plain socket), or ``None`` when the stream exposes none."""
    dup = getattr(raw, "dup", None)
    spare = dup() if callable(dup) else None
    if not isinstance(spare, socket.socket):
        return None
    spare.setblocking(False)  # shares the stream's file status: non-blocking already
    return spare


_HOOK = ("_pool", "_network_backend")
"""Where the stream wrapper goes: ``AsyncHTTPTransport._pool._network_backend``, private
attributes of httpx 0.2x and httpcore 1.x (no public hook sees a 1xx status line)."""


def _recording_transport(
    verify: ssl.SSLContext | bool, limits: httpx.Limits
) -> httpx.AsyncHTTPTransport:
    """httpx's own transport, its pool's streams wrapped to see 1xx status lines.

    Where the installed httpx or httpcore no longer has :data:`_HOOK`, the transport is
    returned unwrapped and a WARNING is logged once per process (the detection would
    otherwise turn off silently): every final status still counts, but a lone 1xx, or an
    answer sent before the body was read and followed by a reset, is then reported as
    the connection failure the client saw (temporary, retried) rather than as its status
    (spec §7).
    """
    transport = httpx.AsyncHTTPTransport(verify=verify, limits=limits, trust_env=False)
    pool = getattr(transport, _HOOK[0], None)
    backend = getattr(pool, _HOOK[1], None)
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        setattr(pool, _HOOK[1], _RecordingBackend(backend))
    else:
        _warn_unhooked()
    return transport


@functools.cache
def _warn_unhooked() -> None:
    """Log, once, that :data:`_HOOK` is missing (see :func:`_recording_transport`)."""
    logger.warning(
        "service_webhooks.delivery: httpx %s / httpcore %s has no AsyncHTTPTransport.%s "
        "to wrap: a 1xx status with no final response after it is reported as a "
        "connection failure (temporary, retried) instead of its status (a permanent "
        "failure, spec §7), and so is an answer sent before the body was read and "
        "followed by a reset; every other answer is unaffected. Install the httpx and "
        "httpcore the emulator supports: pip install 'httpx>=0.27,<1' 'httpcore>=1,<2'",
        httpx.__version__,
        getattr(httpcore, "__version__", "?"),
        ".".join(_HOOK),
    )


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one attempt did.

    Attributes:
        result: success / temporary failure / permanent failure (spec §7).
        status: The receiver's HTTP status, or ``None`` if none was received.
        failure: Why there is no status (``None`` when there is one).
        description: One line for the audit log.
        response_snippet: The start of the response body (UTF-8, invalid bytes
            replaced), at most ``snippet_size`` bytes; ``""`` without a response.
        duration: Wall time the attempt took, seconds.
        timestamp: The ``t`` that was signed, Unix seconds.
        address: The checked address the request went to, if one was chosen.
        location: A 3xx answer's ``Location`` header as sent (never followed, spec
            §7), else ``None``.
    """

    result: Result
    status: int | None
    failure: Failure | None
    description: str
    response_snippet: str
    duration: float
    timestamp: int
    address: str | None = None
    location: str | None = None


class _Failed(Exception):
    def __init__(self, failure: Failure, description: str) -> None:
        super().__init__(description)
        self.failure = failure
        self.description = description


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _classify_transport_error(error: Exception) -> _Failed:
    """Map an httpx / OS error raised while sending to a :class:`Failure`."""
    chain = _chain(error)
    text = str(error) or type(error).__name__
    if isinstance(error, httpx.TimeoutException):
        return _Failed(Failure.TIMEOUT, f"timeout: {text}")
    for cause in chain:
        if isinstance(cause, ssl.SSLError):
            detail = f"{cause.reason or cause}"
            if "WRONG_VERSION_NUMBER" in detail or "record layer" in detail.lower():
                return _Failed(Failure.PROTOCOL, f"HTTP/HTTPS mismatch: {detail}")
            return _Failed(Failure.TLS, f"TLS error: {detail}")
        if isinstance(cause, ConnectionRefusedError):
            return _Failed(Failure.REFUSED, "connection refused")
        if isinstance(cause, (ConnectionResetError, BrokenPipeError)):
            return _Failed(Failure.TRANSPORT, "connection reset by the receiver without a response")
        if isinstance(cause, OSError) and cause.errno in _UNREACHABLE:
            return _Failed(Failure.UNREACHABLE, f"host unreachable: {cause.strerror}")
    if isinstance(error, httpx.ConnectError):
        if "refused" in text.lower():
            return _Failed(Failure.REFUSED, "connection refused")
        if "certificate" in text.lower() or "ssl" in text.lower():
            return _Failed(Failure.TLS, f"TLS error: {text}")
        return _Failed(Failure.UNREACHABLE, f"cannot connect: {text}")
    if isinstance(error, httpx.RemoteProtocolError) and "without sending" in text:
        # The receiver accepted the request and closed the connection without answering
        # (h11: "Server disconnected without sending a response."): not a protocol mismatch.
        return _Failed(
            Failure.TRANSPORT, f"connection closed by the receiver without a response: {text}"
        )
    if isinstance(error, httpx.ProtocolError):
        return _Failed(Failure.PROTOCOL, f"protocol error (HTTP/HTTPS mismatch?): {text}")
    return _Failed(Failure.TRANSPORT, f"transport error: {type(error).__name__}: {text}")


class Sender:
    """Sends delivery attempts; one instance holds its connection pools (plain HTTP,
    and one per HTTPS host name).

    Args:
        deadline: Seconds one whole attempt may take (default 10, spec §8). Lower it
            in tests; the service's value is 10.
        transport: An ``httpx.AsyncBaseTransport`` (default: real sockets).
        resolver: Resolves host names (default: :class:`SystemResolver`).
        allow_private_destinations: ``True`` skips the reserved-address check, for
            local testing against ``localhost`` or a private network. The default,
            ``False``, is what the service does.
        verify: TLS verification: ``True`` (certifi's CA bundle; ``SSL_CERT_FILE`` is
            not read), ``False`` or an :class:`ssl.SSLContext` (a private CA:
            ``ssl.create_default_context(cafile=...)``). The service refuses untrusted
            certificates.
        snippet_size: Most response-body bytes kept for the audit log.
        max_connections: Size of each connection pool.
        linger_limit: Real seconds a lingering attempt (``send(linger=True)``) may
            take in all, from its start, before it is closed (default 60; never less
            than ``deadline``).
        user_agent: The ``User-Agent`` of every request (default :data:`USER_AGENT`).

    Raises:
        ConfigurationError: ``deadline`` is not positive (or is NaN).
    """

    def __init__(
        self,
        *,
        deadline: float = DEFAULT_DEADLINE,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver | None = None,
        allow_private_destinations: bool = False,
        verify: ssl.SSLContext | bool = True,
        snippet_size: int = 1024,
        max_connections: int = 100,
        linger_limit: float = 60.0,
        user_agent: str = USER_AGENT,
    ) -> None:
        from .._exceptions import ConfigurationError

        if not deadline > 0:  # NaN too: it would time every attempt out at once
            raise ConfigurationError("deadline must be positive (seconds)")
        self.deadline = float(deadline)
        self.allow_private_destinations = allow_private_destinations
        self.snippet_size = snippet_size
        self.user_agent = user_agent
        self.linger_limit = max(float(linger_limit), self.deadline)
        self._lingering: set[asyncio.Future[None]] = set()
        self._resolver: Resolver = resolver or SystemResolver()
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=32)
        self._verify = verify
        self._transport = transport
        # One client (one pool) for plain HTTP, one per host name for HTTPS: the pool
        # is keyed by the address a request is sent to, and a TLS connection verified
        # for one name must not carry a request for another name at that address.
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._closed = False
        self._client = self._client_for("")

    async def __aenter__(self) -> Sender:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close lingering attempts and the connection pool."""
        for task in list(self._lingering):
            task.cancel()
        if self._lingering:
            await asyncio.gather(*list(self._lingering), return_exceptions=True)
        self._closed = True
        for client in {id(client): client for client in self._clients.values()}.values():
            await client.aclose()

    def _client_for(self, tls_host: str) -> httpx.AsyncClient:
        """The client for plain HTTP (``""``) or for HTTPS to ``tls_host``."""
        client = self._clients.get(tls_host)
        if client is None:
            if self._closed:
                raise RuntimeError("the Sender is closed")
            if self._transport is not None:  # an injected transport is one pool anyway
                client = self._clients.get("")
            if client is None:
                transport = self._transport or _recording_transport(self._verify, self._limits)
                client = httpx.AsyncClient(
                    transport=transport,
                    follow_redirects=False,
                    trust_env=False,
                    timeout=httpx.Timeout(self.deadline),
                )
            self._clients[tls_host] = client
        return client

    async def send(
        self,
        url: str,
        body: bytes,
        *,
        secret: Secret | str | bytes,
        organization_id: str,
        timestamp: int | None = None,
        linger: bool = False,
    ) -> AttemptResult:
        """Make one attempt: resolve, check, sign, POST, classify. Never raises for
        anything the receiver or the network does.

        Args:
            url: The endpoint URL (``http``/``https``; see :class:`.Endpoint`).
            body: The exact envelope bytes.
            secret: The endpoint's signing secret.
            organization_id: The ``o`` of the signature.
            timestamp: The ``t`` to sign, Unix seconds (default: now, per attempt).
            linger: At the deadline, report the timeout but keep the request open
                (up to :attr:`linger_limit` real seconds) instead of closing it, so
                :meth:`settle` can wait until the receiver is done with it. The
                emulator does this on a virtual clock, where the next attempt would
                otherwise start while the receiver still handles this one.

        Returns:
            The :class:`AttemptResult`.

        Raises:
            ConfigurationError: ``url`` is not an endpoint URL (:func:`.check_url`):
                another scheme, no host, or credentials, which httpx would otherwise
                send to the receiver as ``Authorization: Basic``.
        """
        check_url(url)
        started = time.perf_counter()
        t = int(time.time()) if timestamp is None else timestamp
        headers = {
            "Content-Type": CONTENT_TYPE,
            SIGNATURE_HEADER: sign(body, secret, organization_id, timestamp=t),
            "User-Agent": self.user_agent,
        }
        progress = _Progress()
        exchange = asyncio.ensure_future(self._exchange(url, body, headers, progress, linger))
        try:
            done, _ = await asyncio.wait({exchange}, timeout=self.deadline)
        except asyncio.CancelledError:
            exchange.cancel()
            raise
        address = progress.addresses[-1] if progress.addresses else None
        if not done:
            if linger and progress.status is None:
                # httpx's timeout is per read or write: an answer trickling in (a
                # byte every few seconds, a lossy link) would keep the request open for
                # ever; linger_limit bounds the attempt as a whole, from its start.
                left = self.linger_limit - (time.perf_counter() - started)
                closing = asyncio.get_running_loop().call_later(max(left, 0.0), exchange.cancel)
                exchange.add_done_callback(lambda _: closing.cancel())
                self._lingering.add(exchange)
                exchange.add_done_callback(self._forget)
            else:  # not lingering, or answered: only the rest of the body is late
                exchange.cancel()
                await asyncio.gather(exchange, return_exceptions=True)
            if progress.status is not None:
                return self._answered(progress, started, t, address)
            timeout = _Failed(Failure.TIMEOUT, f"no response within {self.deadline:g} s")
            return self._failed(timeout, started, t, address, progress)
        try:
            exchange.result()
        except _Failed as failed:
            return self._failed(failed, started, t, address, progress)
        except TimeoutError:
            timeout = _Failed(Failure.TIMEOUT, f"no response within {self.deadline:g} s")
            return self._failed(timeout, started, t, address, progress)
        except (httpx.HTTPError, OSError) as error:
            problem = _classify_transport_error(error)
            return self._failed(problem, started, t, address, progress)
        return self._answered(progress, started, t, address)

    def _answered(
        self, progress: _Progress, started: float, t: int, address: str | None
    ) -> AttemptResult:
        status = progress.status
        assert status is not None
        snippet = bytes(progress.received[: self.snippet_size]).decode("utf-8", "replace")
        return AttemptResult(
            result=classify_status(status),
            status=status,
            failure=None,
            description=_with_location(describe_status(status), progress.location),
            response_snippet=snippet,
            duration=time.perf_counter() - started,
            timestamp=t,
            address=address,
            location=progress.location,
        )

    async def _exchange(
        self, url: str, body: bytes, headers: dict[str, str], progress: _Progress, linger: bool
    ) -> None:
        """Resolve, check and POST into ``progress``; the caller enforces the deadline."""
        _head.set(progress.head)  # this task's context: what its requests read
        addresses = await self._destinations(url)
        if not addresses:  # a custom resolver may answer nothing
            raise _Failed(Failure.UNRESOLVABLE, "the host resolved to no address")
        for index, address in enumerate(addresses):
            progress.addresses.append(address)
            try:
                await self._post(url, address, body, headers, progress, linger)
                return
            except httpx.ConnectError:
                if index == len(addresses) - 1:
                    raise

    def _forget(self, task: asyncio.Future[None]) -> None:
        self._lingering.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a late failure is of no interest

    async def settle(self) -> int:
        """Wait until no timed-out attempt is still open on the receiver's side.

        Only attempts sent with ``linger=True`` stay open after their deadline; each
        is waited for at most :attr:`linger_limit` real seconds from its start, then
        closed. Returns how many were still open when called.
        """
        open_now = len(self._lingering)
        if self._lingering:
            await asyncio.gather(*list(self._lingering), return_exceptions=True)
        return open_now

    def _failed(
        self,
        failed: _Failed,
        started: float,
        t: int,
        address: str | None,
        progress: _Progress | None = None,
    ) -> AttemptResult:
        informational = None if progress is None else progress.informational()
        if informational is not None:
            # A 1xx and no final response after it: that status is the answer (spec §7).
            return AttemptResult(
                result=classify_status(informational),
                status=informational,
                failure=None,
                description=f"{describe_status(informational)} (no final response)",
                response_snippet="",
                duration=time.perf_counter() - started,
                timestamp=t,
                address=address,
            )
        return AttemptResult(
            result=classify_failure(failed.failure),
            status=None,
            failure=failed.failure,
            description=failed.description,
            response_snippet="",
            duration=time.perf_counter() - started,
            timestamp=t,
            address=address,
        )

    async def _destinations(self, url: str) -> list[str]:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        try:
            resolved = await self._resolver.resolve(host, port)
        except UnresolvableHostError as error:
            raise _Failed(Failure.UNRESOLVABLE, str(error)) from None
        if self.allow_private_destinations:
            return [a.partition("%")[0] for a in resolved]
        try:
            return check_addresses(resolved)
        except ReservedAddressError as error:
            raise _Failed(Failure.RESERVED_ADDRESS, f"not sent: {error}") from None

    async def _post(
        self,
        url: str,
        address: str,
        body: bytes,
        headers: dict[str, str],
        progress: _Progress,
        linger: bool,
    ) -> None:
        original = httpx.URL(url)
        pinned = original.copy_with(host=address)
        host_header = original.netloc.decode("ascii")
        tls = original.scheme == "https"
        extensions = {"sni_hostname": original.host} if tls else {}
        client = self._client_for(original.host if tls else "")
        request = client.build_request(
            "POST",
            pinned,
            content=body,
            headers={**headers, "Host": host_header},
            extensions=extensions,
            timeout=httpx.Timeout(self.linger_limit) if linger else httpx.USE_CLIENT_DEFAULT,
        )
        progress.head.clear()  # what this request reads, not an earlier address's
        response = await client.send(request, stream=True)
        try:
            progress.status = response.status_code  # the answer: the body cannot change it
            if 300 <= response.status_code < 400:  # where it points: never followed
                progress.location = response.headers.get("location")
            try:
                async for chunk in response.aiter_bytes():
                    progress.received += chunk
                    if len(progress.received) >= self.snippet_size:
                        break
            except httpx.HTTPError:
                pass  # the status arrived; only the snippet is incomplete
        finally:
            await response.aclose()


_SHOWN_LOCATION = 200  # characters of a Location header kept in an attempt's description


def _with_location(description: str, location: str | None) -> str:
    """A 3xx answer's description naming where it pointed (the audit log, ``trigger``'s
    and ``deliver``'s attempt lines): the fix is usually in the receiver's routing. The
    receiver's text, so cut and made printable."""
    if not location:
        return description
    return f"{description}; it points to {printable(location[:_SHOWN_LOCATION])}"
