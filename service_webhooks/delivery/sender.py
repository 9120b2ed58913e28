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
  for the audit log; the rest is discarded with the connection.
* Redirects are never followed; proxies from the environment are never used.
* The host is resolved and every address checked (:mod:`.addresses`); the request is
  sent to a checked address (the ``Host`` header and TLS SNI keep the original name, so
  certificates are verified against it). If a checked address refuses the connection
  the next one is tried, within the same deadline.

The transport is injectable: pass ``httpx.ASGITransport(app)`` to deliver into an app
in-process (see :func:`service_webhooks.delivery.asgi_sender`), or a recording
transport in tests.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from types import TracebackType

import httpx

from .._credentials import Secret
from .._envelope import CONTENT_TYPE
from .._signing import SIGNATURE_HEADER, sign
from .addresses import (
    ReservedAddressError,
    Resolver,
    SystemResolver,
    UnresolvableHostError,
    check_addresses,
)
from .classification import Failure, Result, classify_failure, classify_status, describe_status

__all__ = ["CONTENT_TYPE", "DEFAULT_DEADLINE", "USER_AGENT", "AttemptResult", "Sender"]

DEFAULT_DEADLINE = 10.0
"""Seconds one attempt may take, start to end (spec §3.3, §8)."""

"""The ``Content-Type`` of every delivery (spec §6.1)."""

USER_AGENT = "service-webhooks-emulator"
"""The ``User-Agent`` the emulator sends."""

_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}


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
    """

    result: Result
    status: int | None
    failure: Failure | None
    description: str
    response_snippet: str
    duration: float
    timestamp: int
    address: str | None = None


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
    """Sends delivery attempts; one instance holds one connection pool.

    Args:
        deadline: Seconds one whole attempt may take (default 10, spec §8). Lower it
            in tests; the service's value is 10.
        transport: An ``httpx.AsyncBaseTransport`` (default: real sockets).
        resolver: Resolves host names (default: :class:`SystemResolver`).
        allow_private_destinations: ``True`` skips the reserved-address check, for
            local testing against ``localhost`` or a private network. The default,
            ``False``, is what the service does.
        verify: TLS verification: ``True`` (system trust store), ``False`` or an
            :class:`ssl.SSLContext`. The service refuses untrusted certificates.
        snippet_size: Most response-body bytes kept for the audit log.
        max_connections: Size of the connection pool.
        linger_limit: Real seconds a lingering attempt (``send(linger=True)``) may
            stay open before it is closed (default 60).

    Raises:
        ConfigurationError: ``deadline`` is not positive.
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
    ) -> None:
        from .._exceptions import ConfigurationError

        if deadline <= 0:
            raise ConfigurationError("deadline must be positive (seconds)")
        self.deadline = float(deadline)
        self.allow_private_destinations = allow_private_destinations
        self.snippet_size = snippet_size
        self.linger_limit = max(float(linger_limit), self.deadline)
        self._lingering: set[asyncio.Future[tuple[int, str]]] = set()
        self._resolver: Resolver = resolver or SystemResolver()
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=32)
        self._client = httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            verify=verify,
            timeout=httpx.Timeout(self.deadline),
            limits=limits,
        )

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
        await self._client.aclose()

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
        """
        started = time.perf_counter()
        t = int(time.time()) if timestamp is None else timestamp
        headers = {
            "Content-Type": CONTENT_TYPE,
            SIGNATURE_HEADER: sign(body, secret, organization_id, timestamp=t),
            "User-Agent": USER_AGENT,
        }
        where: list[str] = []  # the address tried last, for the audit log
        exchange = asyncio.ensure_future(self._exchange(url, body, headers, where, linger))
        try:
            done, _ = await asyncio.wait({exchange}, timeout=self.deadline)
        except asyncio.CancelledError:
            exchange.cancel()
            raise
        address = where[-1] if where else None
        if not done:
            if linger:
                self._lingering.add(exchange)
                exchange.add_done_callback(self._forget)
            else:
                exchange.cancel()
                await asyncio.gather(exchange, return_exceptions=True)
            timeout = _Failed(Failure.TIMEOUT, f"no response within {self.deadline:g} s")
            return self._failed(timeout, started, t, address)
        try:
            status, snippet = exchange.result()
        except _Failed as failed:
            return self._failed(failed, started, t, address)
        except TimeoutError:
            timeout = _Failed(Failure.TIMEOUT, f"no response within {self.deadline:g} s")
            return self._failed(timeout, started, t, address)
        except httpx.HTTPError as error:
            return self._failed(_classify_transport_error(error), started, t, address)
        except OSError as error:
            return self._failed(_classify_transport_error(error), started, t, address)
        return AttemptResult(
            result=classify_status(status),
            status=status,
            failure=None,
            description=describe_status(status),
            response_snippet=snippet,
            duration=time.perf_counter() - started,
            timestamp=t,
            address=address,
        )

    async def _exchange(
        self, url: str, body: bytes, headers: dict[str, str], where: list[str], linger: bool
    ) -> tuple[int, str]:
        """Resolve, check and POST; the caller enforces the deadline."""
        addresses = await self._destinations(url)
        if not addresses:  # a custom resolver may answer nothing
            raise _Failed(Failure.UNRESOLVABLE, "the host resolved to no address")
        for index, address in enumerate(addresses):
            where.append(address)
            try:
                return await self._post(url, address, body, headers, linger)
            except httpx.ConnectError:
                if index == len(addresses) - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _forget(self, task: asyncio.Future[tuple[int, str]]) -> None:
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
        self, failed: _Failed, started: float, t: int, address: str | None
    ) -> AttemptResult:
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
        self, url: str, address: str, body: bytes, headers: dict[str, str], linger: bool
    ) -> tuple[int, str]:
        original = httpx.URL(url)
        pinned = original.copy_with(host=address)
        host_header = original.netloc.decode("ascii")
        extensions = {"sni_hostname": original.host} if original.scheme == "https" else {}
        request = self._client.build_request(
            "POST",
            pinned,
            content=body,
            headers={**headers, "Host": host_header},
            extensions=extensions,
            timeout=httpx.Timeout(self.linger_limit) if linger else httpx.USE_CLIENT_DEFAULT,
        )
        response = await self._client.send(request, stream=True)
        try:
            received = bytearray()
            try:
                async for chunk in response.aiter_bytes():
                    received += chunk
                    if len(received) >= self.snippet_size:
                        break
            except httpx.HTTPError:
                pass  # the status arrived; only the snippet is incomplete
            snippet = bytes(received[: self.snippet_size]).decode("utf-8", "replace")
        finally:
            await response.aclose()
        return response.status_code, snippet
