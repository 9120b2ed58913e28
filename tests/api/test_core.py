"""The no-I/O core: request building, validation, error mapping, retry decisions."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import unquote

import httpx
import pytest

from service_webhooks._exceptions import ConfigurationError
from service_webhooks.api import (
    APIConnectionError,
    APIResponseError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    NotFoundError,
    PaginationError,
    ParameterError,
    RateLimitError,
    ServerError,
)
from service_webhooks.api._core import (
    Call,
    ClientCore,
    RetryPolicy,
    cancel_call,
    connection_error,
    history_call,
    operations_call,
    operations_filters,
    parse_retry_after,
    status_error,
)
from service_webhooks.api.pagination import Cursor

GET = Call("GET", "/operations/v1")
CANCEL = cancel_call("op-1")


def test_history_call_sends_the_default_limit() -> None:
    assert history_call(None, None) == Call(
        "GET", "/settings/recording/v1/privacy/history", (("limit", "20"),)
    )
    assert history_call(5, "tok").params == (("paginationToken", "tok"), ("limit", "5"))
    assert history_call(5, "").params == (("limit", "5"),)


def test_operations_call_puts_fixed_filters_after_paging_params() -> None:
    filters = operations_filters("PENDING", "SEARCH_EXPORT")
    assert filters == (("state", "PENDING"), ("type", "SEARCH_EXPORT"))
    call = operations_call(filters, None, "t1")
    assert call.params == (
        ("paginationToken", "t1"),
        ("state", "PENDING"),
        ("type", "SEARCH_EXPORT"),
    )
    assert operations_call((), None, None).params == ()


@pytest.mark.parametrize("token", [3, b"tok"])
def test_a_non_str_token_is_refused(token: object) -> None:
    with pytest.raises(ParameterError, match="pagination_token"):
        history_call(20, token)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("operation_id", "path"),
    [
        ("op-1", "/operations/v1/op-1/cancel"),
        ("a/b", "/operations/v1/a%2Fb/cancel"),
        ("a b?c#d", "/operations/v1/a%20b%3Fc%23d/cancel"),
        ("100%", "/operations/v1/100%25/cancel"),
        ("é", "/operations/v1/%C3%A9/cancel"),
        (".", "/operations/v1/%2E/cancel"),
        ("..", "/operations/v1/%2E%2E/cancel"),
        ("...", "/operations/v1/.../cancel"),
    ],
)
def test_cancel_escapes_the_id(operation_id: str, path: str) -> None:
    call = cancel_call(operation_id)
    assert call == Call("POST", path, (), idempotent=False)
    assert unquote(call.path.split("/")[3]) == operation_id


@pytest.mark.parametrize("operation_id", ["", None, 12])
def test_cancel_needs_a_non_empty_str(operation_id: object) -> None:
    with pytest.raises(ParameterError):
        cancel_call(operation_id)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("3", 3.0),
        (" 0.5 ", 0.5),
        ("-4", 0.0),
        ("soon", None),
        ("nan", None),
        ("inf", None),
        (format_datetime(datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True), 30.0),
        (format_datetime(datetime(2029, 12, 31, tzinfo=UTC), usegmt=True), 0.0),
    ],
)
def test_retry_after_is_read_as_seconds(value: str | None, seconds: float | None) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    assert parse_retry_after(value, now=now) == seconds


def _response(
    status: int, content: bytes = b"", headers: dict[str, str] | None = None
) -> httpx.Response:
    request = httpx.Request("GET", "http://h/base/operations/v1?limit=3")
    return httpx.Response(status, content=content, headers=headers, request=request)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (302, APIStatusError),
        (400, APIStatusError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, NotFoundError),
        (409, APIStatusError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
        (504, ServerError),
        (599, ServerError),
        (600, APIStatusError),  # ServerError is 5xx only (was any status >= 500)
        (999, APIStatusError),
    ],
)
def test_status_errors(status: int, cls: type[APIStatusError]) -> None:
    body = b'{"message": "nope", "code": 7}'
    error = status_error(GET, _response(status, body, {"Retry-After": "7"}), now=0)
    assert type(error) is cls
    assert error.status_code == status
    assert error.body == {"message": "nope", "code": 7}
    assert error.retry_after == 7.0
    assert error.method == "GET"
    assert error.path == "/base/operations/v1"
    assert str(error).endswith(": nope (GET /base/operations/v1)")


def test_a_redirect_says_where_it_points_with_the_key_masked() -> None:
    """The client follows no redirect: the error names the ``Location`` (an ``http://``
    base URL a proxy moves to ``https://``), never the API key in it."""
    headers = {"Location": "https://h/base/operations/v1?key=KEY-1&limit=3"}
    error = status_error(GET, _response(301, b"", headers), now=0, secret="KEY-1")
    assert error is not None
    assert str(error).startswith(
        "301 Moved Permanently (redirected to https://h/base/operations/v1?key=***&limit=3, "
        "not followed)"
    )
    no_location = status_error(GET, _response(304), now=0)
    assert no_location is not None
    assert "redirected" not in str(no_location)


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_2xx_is_success(status: int) -> None:
    assert status_error(GET, _response(status), now=0) is None


def test_a_non_json_error_body_is_none() -> None:
    error = status_error(GET, _response(502, b"<html>bad gateway</html>"), now=0)
    assert error is not None
    assert error.body is None
    assert error.retry_after is None


@pytest.mark.parametrize(
    ("exc", "cls", "sent"),
    [
        (httpx.ConnectError("refused"), APIConnectionError, False),
        (httpx.ConnectTimeout("slow"), APITimeoutError, False),
        (httpx.PoolTimeout("busy"), APITimeoutError, False),
        (httpx.ReadTimeout("slow"), APITimeoutError, True),
        (httpx.WriteTimeout("slow"), APITimeoutError, True),
        (httpx.ReadError("reset"), APIConnectionError, True),
        (httpx.RemoteProtocolError("bad"), APIConnectionError, True),
    ],
)
def test_transport_errors(
    exc: httpx.RequestError, cls: type[APIConnectionError], sent: bool
) -> None:
    error = connection_error(GET, "/operations/v1", exc)
    assert type(error) is cls
    assert error.sent is sent
    assert error.__cause__ is exc


def _status(status: int, retry_after: float | None = None) -> APIStatusError:
    cls = RateLimitError if status == 429 else ServerError if status >= 500 else APIStatusError
    return cls("x", method="GET", path="/", status_code=status, retry_after=retry_after)


def _conn(sent: bool) -> APIConnectionError:
    return APIConnectionError("x", method="GET", path="/", sent=sent)


@pytest.mark.parametrize(
    ("error", "get", "cancel"),
    [
        (_status(429), True, True),
        (_status(502), True, False),
        (_status(503), True, False),
        (_status(504), True, False),
        (_status(500), False, False),
        (_status(501), False, False),
        (_status(400), False, False),
        (_status(404), False, False),
        (_conn(sent=False), True, True),
        (_conn(sent=True), True, False),
        (PaginationError("x", method="GET", path="/", token="t"), False, False),
        (APIResponseError("x", method="GET", path="/", status_code=200), False, False),
    ],
)
def test_what_is_retried(error: APIStatusError, get: bool, cancel: bool) -> None:
    policy = RetryPolicy()
    assert policy.retryable(GET, error) is get
    assert policy.retryable(CANCEL, error) is cancel


def test_backoff_doubles_with_equal_jitter_up_to_the_cap() -> None:
    policy = RetryPolicy(max_retries=10, backoff_base=0.5, backoff_max=4.0)
    error = _status(503)
    low = [policy.delay(GET, error, retry, 0.0) for retry in range(6)]
    high = [policy.delay(GET, error, retry, 1.0) for retry in range(6)]
    assert low == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert high == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_retry_after_replaces_backoff_within_its_bound() -> None:
    policy = RetryPolicy(max_retry_after=10)
    assert policy.delay(GET, _status(429, 10.0), 0, 0.9) == 10.0
    assert policy.delay(GET, _status(429, 0.0), 0, 0.9) == 0.0
    assert policy.delay(GET, _status(429, 10.5), 0, 0.9) is None


def test_no_retry_after_max_retries() -> None:
    policy = RetryPolicy(max_retries=2)
    assert policy.delay(GET, _status(429, 1.0), 1, 0) == 1.0
    assert policy.delay(GET, _status(429, 1.0), 2, 0) is None
    assert RetryPolicy(max_retries=0).delay(GET, _status(429, 1.0), 0, 0) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"backoff_base": -1},
        {"max_retry_after": float("inf")},
    ],
)
def test_retry_policy_is_validated(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("api_key", "base_url", "timeout"),
    [
        ("", "https://api.example.com", 10),
        ("key with space", "https://api.example.com", 10),
        ("key\n", "https://api.example.com", 10),
        ("k", "ftp://api.example.com", 10),
        ("k", "/relative", 10),
        ("k", "https://", 10),
        ("k", "https://api.example.com", 0),
        ("k", "https://api.example.com", -1),
        ("k", "https://api.example.com", True),
        ("k", "https://api.example.com", float("nan")),
        # Header values are ASCII: was a UnicodeEncodeError from httpx.
        ("clé", "https://api.example.com", 10),
        # The spec's paths are appended to the base path: a query swallowed them
        # (every request went to GET /?x=1operations/v1).
        ("k", "https://api.example.com/?x=1", 10),
        ("k", "https://api.example.com/base?", 10),
        ("k", "https://api.example.com/#top", 10),
        # httpx sent user:password as Basic credentials instead of the API key.
        ("k", "https://user:pass@api.example.com", 10),
        ("k", "https://api.example.com:99999", 10),
    ],
)
def test_client_configuration_is_validated(api_key: str, base_url: str, timeout: float) -> None:
    with pytest.raises(ConfigurationError):
        ClientCore(api_key, base_url=base_url, timeout=timeout, retry=RetryPolicy())


def test_a_refused_base_url_with_credentials_does_not_show_the_password() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ClientCore("k", base_url="ftp://user:s3cr3t@host", timeout=1, retry=RetryPolicy())
    assert "s3cr3t" not in str(caught.value)


def test_a_status_error_names_the_path_as_sent() -> None:
    request = httpx.Request("POST", "https://api.example.com/operations/v1/a%2Fb/cancel?x=1")
    response = httpx.Response(404, content=b"{}", request=request)
    error = status_error(cancel_call("a/b"), response, now=0)
    assert error is not None
    assert error.path == "/operations/v1/a%2Fb/cancel"
    assert str(error) == "404 Not Found (POST /operations/v1/a%2Fb/cancel)"


def test_headers_are_exactly_those_of_the_spec() -> None:
    core = ClientCore(
        "s3cr3t-key", base_url="https://api.example.com", timeout=5, retry=RetryPolicy()
    )
    headers = core.headers()
    assert headers["Authorization"] == "Basic s3cr3t-key"
    assert headers["Accept"] == "application/json"
    assert "s3cr3t-key" not in repr(core)


def test_cursor_refuses_a_repeated_token_including_the_first() -> None:
    cursor = Cursor(history_call, 20, "start")
    call = cursor.call()
    assert ("paginationToken", "start") in call.params
    cursor.advance(call, "t2")
    cursor.raise_pending()  # nothing pending
    cursor.advance(cursor.call(), "start")  # the page is kept: its items come first
    assert cursor.done
    with pytest.raises(PaginationError) as caught:
        cursor.raise_pending()
    assert caught.value.token == "start"
    cursor.raise_pending()  # raised once


@pytest.mark.parametrize("last", ["", None])
def test_cursor_stops_on_an_empty_or_missing_token(last: str | None) -> None:
    cursor = Cursor(history_call, 20, None)
    cursor.advance(cursor.call(), "t1")
    assert not cursor.done
    cursor.advance(cursor.call(), last)
    assert cursor.pages == 2
    assert cursor.done


def test_cursor_validates_limit_at_creation_and_on_change() -> None:
    with pytest.raises(ParameterError):
        Cursor(history_call, 0, None)
    cursor = Cursor(history_call, 10, None)
    cursor.limit = 100
    assert dict(cursor.call().params)["limit"] == "100"
    with pytest.raises(ParameterError):
        cursor.limit = 101
