"""Errors raised by the API client (spec §4, §5.1, §8).

Every failure of a call ends in one of these classes; no ``httpx`` or ``msgspec``
exception escapes the client. The tree::

    WebhookError                         (service_webhooks._exceptions, status 500)
    └── APIError                         root of the client's errors: method, path
        ├── ParameterError               an argument was rejected before any request
        │                                (also a ValueError)
        ├── APIConnectionError           no response: DNS, refused, reset, TLS ...
        │   └── APITimeoutError          connect / read / write / pool timeout
        ├── APIStatusError               a response with a non-2xx status_code
        │   ├── AuthenticationError      401 or 403: key missing, wrong or not allowed
        │   ├── NotFoundError            404: unknown path or operation id
        │   ├── RateLimitError           429: see retry_after
        │   └── ServerError              5xx
        ├── APIResponseError             a 2xx whose body is not the documented shape
        └── PaginationError              the service handed back a token already used

``WebhookError.status`` is the status a *webhook receiver* answers with when this
error escapes a handler. API errors keep the inherited 500, so a handler that fails
because the API was unavailable makes the service retry the delivery (spec §3.3).
The HTTP status of the API response itself is :attr:`APIStatusError.status_code`.

No message or ``repr`` contains the API key: only the method and the URL path are
kept, never the headers.
"""

from __future__ import annotations

from typing import Any

from .._exceptions import WebhookError

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIResponseError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "NotFoundError",
    "PaginationError",
    "ParameterError",
    "RateLimitError",
    "ServerError",
]


class APIError(WebhookError):
    """Root of every error the API client raises.

    Attributes:
        method: HTTP method of the failed request (``"GET"``, ``"POST"``), or ``""`` when
            the error was raised before a request was built.
        path: URL path of the failed request, without host or query string.
    """

    reason = "api_error"

    def __init__(self, message: str, *, method: str = "", path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.path = path

    def __str__(self) -> str:
        if self.method:
            return f"{self.message} ({self.method} {self.path})"
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # The subclasses take keyword-only arguments, which the default
        # ``Exception.__reduce__`` (``cls(*args)``) cannot pass: rebuild from the
        # message and restore the attributes, so pickle (multiprocessing, a task
        # queue) and ``copy`` work for every API error.
        return (_rebuild, (type(self), self.message), self.__dict__)


class ParameterError(APIError, ValueError):
    """An argument is outside what the spec allows; raised before any request is sent.

    Examples: a history ``limit`` outside 1-100 (spec §4.1, §8), an operation
    ``state`` or ``type`` filter that is not a non-empty ``str`` (any string is sent:
    they are open enums, spec §9), an empty operation id.
    """

    reason = "api_parameter"


class APIConnectionError(APIError):
    """The request got no HTTP response (connection refused, reset, DNS, TLS ...).

    Attributes:
        sent: ``False`` when the request surely did not reach the service (the
            connection was never established), ``True`` when it may have.
    """

    reason = "api_connection"

    def __init__(self, message: str, *, method: str, path: str, sent: bool) -> None:
        super().__init__(message, method=method, path=path)
        self.sent = sent


class APITimeoutError(APIConnectionError):
    """No response within the client's ``timeout`` (seconds)."""

    reason = "api_timeout"


class APIStatusError(APIError):
    """The service answered with a status outside 200-299.

    Attributes:
        status_code: The HTTP status of the API response (not the receiver status
            ``WebhookError.status``).
        body: The response body decoded from JSON, or ``None`` when it is empty or not
            JSON (spec §7: error bodies are not documented, so nothing is assumed).
        retry_after: Seconds from the ``Retry-After`` header, or ``None`` when absent or
            unreadable.
    """

    reason = "api_status"

    def __init__(
        self,
        message: str,
        *,
        method: str,
        path: str,
        status_code: int,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, method=method, path=path)
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after


class AuthenticationError(APIStatusError):
    """401 or 403: the API key is missing, wrong, or lacks the permission (spec §5.1)."""

    reason = "api_authentication"


class NotFoundError(APIStatusError):
    """404: the path or the operation id does not exist."""

    reason = "api_not_found"


class RateLimitError(APIStatusError):
    """429: too many requests; ``retry_after`` says how long to wait, when sent."""

    reason = "api_rate_limited"


class ServerError(APIStatusError):
    """A 5xx status: the service failed (502, 503 and 504 are retried first)."""

    reason = "api_server_error"


class APIResponseError(APIError):
    """A 2xx response whose body is not JSON of the documented shape (spec §4).

    Attributes:
        status_code: The HTTP status of the response.
    """

    reason = "api_response"

    def __init__(self, message: str, *, method: str, path: str, status_code: int) -> None:
        super().__init__(message, method=method, path=path)
        self.status_code = status_code


class PaginationError(APIError):
    """The service returned a next-page token that was already used in this iteration.

    Following it would loop forever, so iteration stops with this error instead.

    Attributes:
        token: The repeated token.
    """

    reason = "api_pagination"

    def __init__(self, message: str, *, method: str, path: str, token: str) -> None:
        super().__init__(message, method=method, path=path)
        self.token = token


def _rebuild(cls: type[APIError], message: str) -> APIError:
    """Unpickle an :class:`APIError` (see ``APIError.__reduce__``)."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error
