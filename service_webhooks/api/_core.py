"""The no-I/O core shared by :class:`~.client.Client` and :class:`~.aclient.AsyncClient`.

Rule of this module: nothing here sends a request or sleeps (the drivers do, with
the ``sleep`` they were given). It validates arguments, builds :class:`Call`
descriptions of requests, turns a response or a transport failure into a result or an
:class:`~.errors.APIError`, and decides whether and after how long to retry. The two
drivers only do the I/O and read line for line alike.

Retry rules (spec §4, §8; API rate limits are not documented, so the service's own
``Retry-After`` is trusted when it is reasonable):

- 429 is retried for every method: the service refused the request, so it had no effect.
- 502, 503, 504 and transport failures are retried for GETs (safe to repeat).
- ``POST .../cancel`` is also retried when the connection was never established
  (the request surely did not reach the service), never after a 5xx or a read failure.
- Delay: ``Retry-After`` when the response has one and it is at most
  ``max_retry_after`` seconds (a longer one is not waited for: the error is raised with
  its ``retry_after``); otherwise exponential backoff with "equal jitter":
  ``cap = min(backoff_max, backoff_base * 2**retry)``, delay in ``[cap/2, cap)``.
"""

from __future__ import annotations

import email.utils
import inspect
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from .._exceptions import ConfigurationError
from .._reporting import printable
from .errors import (
    APIConnectionError,
    APIError,
    APIResponseError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    NotFoundError,
    ParameterError,
    RateLimitError,
    ServerError,
)
from .models import HistoryPage, OperationsPage, OperationState, OperationType

__all__ = [
    "HISTORY_LIMIT_DEFAULT",
    "HISTORY_PATH",
    "MAX_LIMIT",
    "OPERATIONS_PATH",
    "AsyncSleep",
    "Call",
    "ClientCore",
    "Jitter",
    "RetryPolicy",
    "Sleep",
    "cancel_call",
    "decode_page",
    "history_call",
    "operations_call",
    "operations_filters",
    "validate_limit",
]

T = TypeVar("T")
PageT = TypeVar("PageT", HistoryPage, OperationsPage)

HISTORY_PATH = "/settings/recording/v1/privacy/history"
"""Spec §4.1."""
OPERATIONS_PATH = "/operations/v1"
"""Spec §4.2; cancel is ``{OPERATIONS_PATH}/{id}/cancel`` (spec §4.3)."""
HISTORY_LIMIT_DEFAULT = 20
"""Versions per history page when ``limit`` is not given (spec §8)."""
MAX_LIMIT = 100
"""Largest ``limit`` of either listing (spec §4.1, §4.2, §8)."""

_RETRIED_STATUSES = frozenset({502, 503, 504})
_ERROR_TEXT_MAX = 200


class Sleep(Protocol):
    """Blocks for ``seconds`` (a float, >= 0). ``time.sleep`` by default."""

    def __call__(self, seconds: float, /) -> None: ...


class AsyncSleep(Protocol):
    """Waits for ``seconds`` (a float, >= 0) without blocking. ``asyncio.sleep`` by default."""

    def __call__(self, seconds: float, /) -> Awaitable[None]: ...


class Jitter(Protocol):
    """Returns a float in ``[0, 1)`` that spreads retry delays. ``random.random`` by default."""

    def __call__(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Call:
    """One API request, described without doing it.

    Attributes:
        method: ``"GET"`` or ``"POST"``.
        path: Path relative to the client's ``base_url``, already escaped.
        params: Query parameters, in the order they are sent.
        idempotent: Whether repeating the request after an unknown outcome is safe.
    """

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    idempotent: bool = True


def validate_limit(limit: object, *, default: int | None) -> int | None:
    """Check a page size against spec §4.1 / §4.2 / §8 before any request is built.

    Args:
        limit: The caller's value; ``None`` means "use the service default".
        default: What ``None`` becomes (``20`` for history, ``None`` for operations,
            which the service reads as its maximum of 100).

    Returns:
        The limit to send, or ``None`` to leave the parameter out.

    Raises:
        ParameterError: ``limit`` is not an int in 1-100 (bools are refused).
    """
    if limit is None:
        return default
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise ParameterError(f"limit must be an int in 1-{MAX_LIMIT}, got {limit!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ParameterError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def _validate_token(token: object) -> str | None:
    if token is None or token == "":
        return None
    if not isinstance(token, str):
        raise ParameterError(f"pagination_token must be a str, got {type(token).__name__}")
    return token


def _page_params(limit: int | None, token: str | None) -> tuple[tuple[str, str], ...]:
    params: tuple[tuple[str, str], ...] = ()
    if token is not None:
        params += (("paginationToken", token),)
    if limit is not None:
        params += (("limit", str(limit)),)
    return params


def history_call(limit: int | None, pagination_token: str | None) -> Call:
    """Build ``GET /settings/recording/v1/privacy/history`` (spec §4.1).

    Raises:
        ParameterError: ``limit`` outside 1-100 or a non-str token.
    """
    checked = validate_limit(limit, default=HISTORY_LIMIT_DEFAULT)
    return Call("GET", HISTORY_PATH, _page_params(checked, _validate_token(pagination_token)))


def _filter_value(
    value: object, known: type[OperationState] | type[OperationType], name: str
) -> str:
    """Any non-empty string: the enums are open (spec §9), ``known`` lists today's values."""
    if isinstance(value, str) and value:
        # The plain value of any str subclass: ``str()`` of a ``(str, Enum)`` member
        # is ``"Cls.MEMBER"``, which would be sent as the filter.
        return str.__str__(value)
    examples = ", ".join(member.value for member in known)
    raise ParameterError(f"{name} must be a non-empty str (known: {examples}); got {value!r}")


def operations_filters(state: object = None, type: object = None) -> tuple[tuple[str, str], ...]:
    """Build the operation filters of spec §4.2.

    The values are open enums (spec §9: the service may add states and types), so any
    non-empty string is sent as it is; :class:`~.models.OperationState` and
    :class:`~.models.OperationType` hold the values known today (spec §2.5).

    Args:
        state: ``None`` or a state, e.g. ``PENDING``, ``COMPLETED``, ``FAILED``.
        type: ``None`` or a type, e.g. ``DELETE_USER``, ``SEARCH_EXPORT``.

    Returns:
        The filter query parameters, fixed for the whole iteration.

    Raises:
        ParameterError: A value that is not a non-empty ``str`` (checked before sending).
    """
    filters: tuple[tuple[str, str], ...] = ()
    if state is not None:
        filters += (("state", _filter_value(state, OperationState, "state")),)
    if type is not None:
        filters += (("type", _filter_value(type, OperationType, "type")),)
    return filters


def operations_call(
    filters: tuple[tuple[str, str], ...], limit: int | None, pagination_token: str | None
) -> Call:
    """Build ``GET /operations/v1`` (spec §4.2) from filters made by :func:`operations_filters`.

    Raises:
        ParameterError: ``limit`` outside 1-100 or a non-str token.
    """
    checked = validate_limit(limit, default=None)
    page = _page_params(checked, _validate_token(pagination_token))
    return Call("GET", OPERATIONS_PATH, page + filters)


def cancel_call(operation_id: object) -> Call:
    """Build ``POST /operations/v1/{id}/cancel`` (spec §4.3).

    The id is percent-escaped as one path segment (``/``, ``?``, ``#``, ``%`` and
    spaces included), and the dot segments ``.`` and ``..`` are escaped too, so no id
    can address another path.

    Raises:
        ParameterError: ``operation_id`` is not a non-empty str.
    """
    if not isinstance(operation_id, str) or not operation_id:
        raise ParameterError(f"operation id must be a non-empty str, got {operation_id!r}")
    segment = quote(operation_id, safe="")
    if segment in {".", ".."}:
        segment = segment.replace(".", "%2E")
    return Call("POST", f"{OPERATIONS_PATH}/{segment}/cancel", idempotent=False)


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Read ``Retry-After`` as seconds from ``now`` (Unix seconds).

    Accepts delta-seconds (``"3"``, ``"0.5"``) or an HTTP-date. Returns ``None`` when
    absent or unreadable; a date in the past gives ``0.0``.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(text).timestamp() - now
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


def _body_json(content: bytes) -> Any:
    if not content:
        return None
    try:
        return msgspec.json.decode(content)
    except (msgspec.DecodeError, RecursionError):  # not JSON, or nested too deeply
        return None


def _service_text(text: str, secret: str | None) -> str:
    """A text of the service (reason phrase, error message) fit for an error message:
    the key masked (before the cut, so no part of it is left), at most 200 characters,
    control characters escaped (no forged log line, no terminal escape)."""
    if secret:
        text = text.replace(secret, "***")
    return printable(text[:_ERROR_TEXT_MAX])


def _detail(body: Any, secret: str | None) -> str:
    if isinstance(body, Mapping):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return ": " + _service_text(value, secret)
    return ""


_STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    401: AuthenticationError,
    403: AuthenticationError,
    404: NotFoundError,
    429: RateLimitError,
}


def request_path(request: httpx.Request) -> str:
    """The path of ``request`` as sent: still percent-escaped, without the query.

    An error names this path, so ``cancel("a/b")`` reads ``/operations/v1/a%2Fb/cancel``
    (what the service received), not ``/operations/v1/a/b/cancel``.
    """
    return request.url.raw_path.split(b"?", 1)[0].decode("ascii")


def status_error(
    call: Call, response: httpx.Response, *, now: float, secret: str | None = None
) -> APIStatusError | None:
    """Map a response to ``None`` (2xx) or the matching :class:`APIStatusError`.

    Args:
        call: The request the response answers.
        response: A response whose body has been read.
        now: Current Unix time in seconds, for an HTTP-date ``Retry-After``.
        secret: The API key: masked in the message if the service echoes it (an
            error body such as ``{"message": "invalid key <key>"}``, or the reason
            phrase).

    The message holds the service's texts (reason phrase, the body's ``message``,
    ``error`` or ``detail``) with control characters escaped; ``body`` keeps them as
    received. Only 500-599 make a :class:`ServerError`.
    """
    status = response.status_code
    if 200 <= status <= 299:
        return None
    cls = _STATUS_CLASSES.get(status)
    if cls is None:
        cls = ServerError if 500 <= status <= 599 else APIStatusError
    body = _body_json(response.content)
    phrase = _service_text(response.reason_phrase, secret) or "error"
    moved = ""
    location = response.headers.get("Location") if 300 <= status <= 399 else None
    if location:  # never followed: say where, so the base URL can be corrected
        moved = f" (redirected to {_service_text(location, secret)}, not followed)"
    return cls(
        f"{status} {phrase}{moved}{_detail(body, secret)}",
        method=call.method,
        path=request_path(response.request),
        status_code=status,
        body=body,
        retry_after=parse_retry_after(response.headers.get("Retry-After"), now=now),
    )


def detach(response: httpx.Response) -> None:
    """Drop the (consumed, closed) stream of a read response.

    httpx's response and its bound stream refer to each other; left alone, each page's
    bytes live until a full garbage collection. Breaking the cycle frees a page as soon
    as it is decoded, so iterating keeps memory flat (one page held).
    """
    response.stream = httpx.ByteStream(b"")


_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def connection_error(call: Call, path: str, exc: httpx.RequestError) -> APIConnectionError:
    """Map an ``httpx`` failure to :class:`APIConnectionError` / :class:`APITimeoutError`.

    ``sent`` is ``False`` only for failures before the connection existed (connect
    error or timeout, no free connection in the pool).
    """
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    error = cls(
        f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
        method=call.method,
        path=path,
        sent=not isinstance(exc, _NOT_SENT),
    )
    error.__cause__ = exc
    return error


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {
    HistoryPage: msgspec.json.Decoder(HistoryPage),
    OperationsPage: msgspec.json.Decoder(OperationsPage),
}


def decode(call: Call, response: httpx.Response, type_: type[T]) -> T:
    """Decode a 2xx body into ``type_`` (a model of :mod:`.models`).

    Raises:
        APIResponseError: The body is not JSON, does not match the model, or nests
            arrays or objects deeper than the decoder can follow (a ``RecursionError``
            of msgspec, for example in an undocumented ``details``).
    """
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders.setdefault(type_, msgspec.json.Decoder(type_))
    try:
        result: T = decoder.decode(response.content)
    except (msgspec.DecodeError, RecursionError) as exc:  # ValidationError is a DecodeError
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise APIResponseError(
            f"unexpected response body: {reason}",
            method=call.method,
            path=request_path(response.request),
            status_code=response.status_code,
        ) from exc
    return result


class _SnakeToken(msgspec.Struct):
    next_pagination_token: Any = None


class _CamelToken(msgspec.Struct, rename={"next_pagination_token": "nextPaginationToken"}):
    next_pagination_token: Any = None


_OTHER_SPELLING: dict[type[Any], tuple[str, str, msgspec.json.Decoder[Any]]] = {
    # page model: (its token's name, the other endpoint's name, a decoder of the latter)
    HistoryPage: (
        "next_pagination_token",
        "nextPaginationToken",
        msgspec.json.Decoder(_CamelToken),
    ),
    OperationsPage: (
        "nextPaginationToken",
        "next_pagination_token",
        msgspec.json.Decoder(_SnakeToken),
    ),
}


def decode_page(
    call: Call, response: httpx.Response, type_: type[PageT]
) -> tuple[PageT, APIResponseError | None]:
    """Decode a 2xx page body, and tell whether its next-page token is where the spec
    puts it.

    The two listings spell the token differently: history ``next_pagination_token``
    (spec §4.1), operations ``nextPaginationToken`` (spec §4.2), and spec §9 makes a
    renamed field a new API version. A page whose documented token is empty or missing
    while it holds a non-empty token under the other listing's name is not taken as the
    last page (that would end an iteration silently, the later pages lost).

    Returns:
        ``(page, None)``, or ``(page, error)`` for such a page: an
        :class:`~.errors.APIResponseError` naming both fields and the token found, for
        the caller to raise (a pager raises it once the page's items are yielded).

    Raises:
        APIResponseError: The body is not JSON or does not match the model.
    """
    page = decode(call, response, type_)
    if page.next_pagination_token:
        return page, None
    documented, other, decoder = _OTHER_SPELLING[type_]
    token = decoder.decode(response.content).next_pagination_token
    if token is None or token == "":
        return page, None
    return page, APIResponseError(
        f"next-page token under {other} ({_service_text(repr(token), None)}) instead of "
        f"{documented}: not taken as the last page",
        method=call.method,
        path=request_path(response.request),
        status_code=response.status_code,
    )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and after how long a failed call is repeated (see the module docstring).

    Attributes:
        max_retries: Retries after the first attempt (0 disables retrying).
        backoff_base: Seconds; the first backoff cap.
        backoff_max: Seconds; no backoff delay exceeds it.
        max_retry_after: Seconds; a longer ``Retry-After`` is not waited for.
    """

    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if type(self.max_retries) is not int or self.max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        for name in ("backoff_base", "backoff_max", "max_retry_after"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise ConfigurationError(f"{name} must be a finite number >= 0, got {value!r}")

    def retryable(self, call: Call, error: APIError) -> bool:
        """Whether ``error`` may be retried for ``call``, ignoring the retry count."""
        if isinstance(error, RateLimitError):
            return True
        if isinstance(error, APIStatusError):
            return call.idempotent and error.status_code in _RETRIED_STATUSES
        if isinstance(error, APIConnectionError):
            return call.idempotent or not error.sent
        return False

    def delay(self, call: Call, error: APIError, retries: int, jitter: float) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to raise ``error``.

        Args:
            call: The failed request.
            error: What went wrong on the last attempt.
            retries: Retries already made for this call (0 after the first attempt).
            jitter: A number in ``[0, 1)``.
        """
        if retries >= self.max_retries or not self.retryable(call, error):
            return None
        retry_after = error.retry_after if isinstance(error, APIStatusError) else None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        cap = min(self.backoff_max, self.backoff_base * 2.0**retries)
        return cap / 2 + jitter * cap / 2


def _is_coroutine_function(value: object) -> bool:
    """Whether calling ``value`` makes a coroutine: an ``async def`` function or
    method, a :func:`functools.partial` of one, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(value):
        return True
    call = inspect.getattr_static(type(value), "__call__", None)  # a class's async __call__
    return inspect.iscoroutinefunction(call)


def check_io_options(
    transport: object, transport_type: type[Any], sleep: object, jitter: object
) -> None:
    """Refuse a driver's I/O arguments of the wrong kind when the client is made, not
    at the first request (an async transport given to the sync client, ``sleep=None``).

    ``sleep`` must be a coroutine function for the async client (``transport_type``
    :class:`httpx.AsyncBaseTransport`): a blocking one such as ``time.sleep`` would stop
    the event loop for the whole delay. For the sync client it must not be one: its
    coroutine would never be awaited, so the client would not wait at all.

    Raises:
        ConfigurationError: ``transport`` is not ``None`` nor a ``transport_type``;
            ``sleep`` or ``jitter`` is not callable; ``sleep`` is not a coroutine
            function for the async client, or is one for the sync client.
    """
    if transport is not None and not isinstance(transport, transport_type):
        expected, got = transport_type.__name__, type(transport).__name__
        raise ConfigurationError(f"transport must be an httpx.{expected}, got {got}")
    for name, value in (("sleep", sleep), ("jitter", jitter)):
        if not callable(value):
            raise ConfigurationError(f"{name} must be callable, got {value!r}")
    asynchronous = issubclass(transport_type, httpx.AsyncBaseTransport)
    if asynchronous and not _is_coroutine_function(sleep):
        raise ConfigurationError(
            f"sleep must be a coroutine function (async def, such as asyncio.sleep) for "
            f"AsyncClient, got {sleep!r}: a blocking sleep would stop the event loop"
        )
    if not asynchronous and _is_coroutine_function(sleep):
        raise ConfigurationError(
            f"sleep must be a plain function (such as time.sleep) for Client, got the "
            f"coroutine function {sleep!r}: its coroutine would never be awaited"
        )


def _version() -> str:
    try:
        return metadata.version("service-webhooks")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


class ClientCore:
    """Configuration and decisions shared by the sync and async clients.

    Args:
        api_key: Sent as ``Authorization: Basic <api_key>``, as given (spec §5.1).
        base_url: ``http`` or ``https`` URL the spec's paths are relative to; a path
            prefix is kept.
        timeout: Seconds for each attempt's connect, read, write and pool waits.
        retry: The :class:`RetryPolicy`.

    Raises:
        ConfigurationError: Empty key or one with whitespace, control or non-ASCII
            characters; a base URL that is not absolute http(s), or that has a query,
            a fragment, credentials or a port outside 1-65535; a timeout that is not > 0.
    """

    def __init__(self, api_key: str, *, base_url: str, timeout: float, retry: RetryPolicy) -> None:
        if not isinstance(api_key, str) or not api_key:
            raise ConfigurationError("api_key must be a non-empty str")
        if any(ch.isspace() or not ch.isprintable() for ch in api_key):
            raise ConfigurationError("api_key must not contain whitespace or control characters")
        if not api_key.isascii():
            # An HTTP header value is ASCII: httpx would raise UnicodeEncodeError.
            raise ConfigurationError("api_key must contain only ASCII characters")
        try:
            url = httpx.URL(base_url)
        except (TypeError, httpx.InvalidURL) as exc:
            raise ConfigurationError(f"base_url is not a URL: {base_url!r}") from exc
        if url.userinfo:
            # httpx would send them as Basic credentials instead of the API key.
            raise ConfigurationError("base_url must not contain credentials (user:password@)")
        if url.scheme not in {"http", "https"} or not url.host:
            raise ConfigurationError(f"base_url must be an absolute http(s) URL: {base_url!r}")
        if b"?" in url.raw_path or url.fragment:
            # The spec's paths are appended to the base URL's path: a query or a
            # fragment would swallow them (every request would go to the base path).
            raise ConfigurationError(f"base_url must not have a query or a fragment: {base_url!r}")
        if url.port is not None and not 1 <= url.port <= 65535:
            raise ConfigurationError(f"base_url has a port outside 1-65535: {url.port}")
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not 0 < timeout < float("inf")
        ):
            raise ConfigurationError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.base_url = url
        self.timeout = float(timeout)
        self.retry = retry
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"ClientCore(base_url={str(self.base_url)!r}, timeout={self.timeout})"

    def sent_path(self, path: str) -> str:
        """``path`` (a :class:`Call`'s) as sent: after the base URL's path, as ``httpx``
        joins them (``https://h/api`` and ``/operations/v1`` give ``/api/operations/v1``),
        so every error's ``path`` names the same request."""
        prefix = self.base_url.raw_path.decode("ascii")
        if not prefix.endswith("/"):
            prefix += "/"
        return prefix + path.lstrip("/")

    def headers(self) -> dict[str, str]:
        """Headers of every request (spec §5.1). Contains the key: never log it."""
        return {
            "Authorization": f"Basic {self._api_key}",
            "Accept": "application/json",
            "User-Agent": f"service-webhooks/{_version()}",
        }

    def httpx_options(self) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client`` / ``httpx.AsyncClient``."""
        return {
            "base_url": self.base_url,
            "headers": self.headers(),
            "timeout": httpx.Timeout(self.timeout),
            "follow_redirects": False,
        }

    def outcome(self, call: Call, response: httpx.Response) -> APIStatusError | None:
        """``None`` for a 2xx response, else its error (reads the wall clock once)."""
        return status_error(call, response, now=time.time(), secret=self._api_key)
