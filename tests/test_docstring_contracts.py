"""Public docstrings tell the truth: each test pins one documented type rule, refusal or
default that the code had answered otherwise (a float status kept, a NaN bound taken, a
``str`` secret failing with an ``AttributeError``...)."""

from __future__ import annotations

import asyncio
import inspect
import math
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import (
    ConfigurationError,
    PayloadTooLargeError,
    Secret,
    Unprocessable,
    WebhookReceiver,
    decode_envelope,
    encode_envelope,
    sign,
    verify,
)
from service_webhooks.delivery import Emulator, RateLimiter, ScaledClock, Sender, deliver_to_app
from service_webhooks.inbox import MemoryInbox, SQLiteInbox
from service_webhooks.stores import PostgresStore, SQLiteStore

BODY = encode_envelope("note.created", {"id": "n-1", "author": "a@example.com", "text": "t"})
NOW = 1_763_700_000
HEADER = sign(BODY, "whsec-k", "o-1", timestamp=NOW)


@pytest.mark.parametrize(
    "secrets", ["whsec-k", b"whsec-k", Secret("whsec-k"), ["whsec-k"], ("other", b"whsec-k")]
)
def test_verify_takes_secrets_as_str_bytes_or_secret(secrets: Any) -> None:
    """A bare ``"k"`` (a str is a Sequence) or ``["k"]`` had raised AttributeError."""
    assert verify(BODY, HEADER, secrets, now=NOW).organization_id == "o-1"


@pytest.mark.parametrize("secrets", [[5], "", ["  "], [], ()])
def test_verify_refuses_a_bad_secret_with_configuration_error(secrets: Any) -> None:
    """An empty list or tuple (none at all) had answered SignatureMismatchError, as if
    the delivery were forged rather than the receiver misconfigured."""
    with pytest.raises(ConfigurationError):
        verify(BODY, HEADER, secrets, now=NOW)


@pytest.mark.parametrize("status", [422.0, 450.5, True, "422"])
def test_unprocessable_status_must_be_an_int(status: Any) -> None:
    with pytest.raises(ConfigurationError, match="Unprocessable status"):
        Unprocessable("x", status=status)


def test_unprocessable_status_http_status_is_kept_as_a_plain_int() -> None:
    from http import HTTPStatus

    error = Unprocessable("x", status=HTTPStatus.CONFLICT)
    assert error.status == 409
    assert type(error.status) is int


@pytest.mark.parametrize("inbox", [False, "memory"])
@pytest.mark.parametrize("body", [bytearray(BODY), memoryview(BODY), BODY.decode()])
def test_process_refuses_a_body_that_is_not_bytes(inbox: Any, body: Any) -> None:
    """A bytearray was processed (the handler got ``event.body`` as a bytearray), and a
    ``str`` with a bad header was answered 401 instead of the documented TypeError."""
    receiver = WebhookReceiver("whsec-k", store="memory", inbox=inbox)
    receiver.on("note.created", lambda event: None)
    for signature in (sign(BODY, "whsec-k", "o-1"), None):
        with pytest.raises(TypeError, match="body must be the exact request body as bytes"):
            receiver.process(body, signature)
        with pytest.raises(TypeError, match="body must be the exact request body as bytes"):
            asyncio.run(receiver.aprocess(body, signature))


@pytest.mark.parametrize("limit", [1.5, True, 0, 1001])
def test_inbox_search_refuses_a_limit_that_is_not_an_int_in_range(
    tmp_path: Path, limit: Any
) -> None:
    """``limit=1.5`` had raised TypeError (memory) or sqlite3.IntegrityError (SQLite)."""
    for inbox in (MemoryInbox(), SQLiteInbox(tmp_path / "inbox.sqlite3")):
        with pytest.raises(ConfigurationError, match="limit must be an int"):
            inbox.search(limit=limit)
        with pytest.raises(ConfigurationError, match="limit must be an int"):
            inbox.slowest(limit=limit)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout", -1),
        ("timeout", math.nan),
        ("timeout", math.inf),
        ("timeout", True),
        ("prune_every", -1),
        ("prune_every", 1.5),
        ("prune_every", True),
    ],
)
def test_sqlite_store_and_inbox_refuse_bad_bounds(tmp_path: Path, option: str, value: Any) -> None:
    """They had been kept, to fail at the first write (``int(nan * 1000)``) or to prune
    on every claim (``count % -1 == 0``)."""
    with pytest.raises(ConfigurationError, match=option):
        SQLiteStore(tmp_path / "store.sqlite3", **{option: value})
    with pytest.raises(ConfigurationError, match=option):
        SQLiteInbox(tmp_path / "inbox.sqlite3", **{option: value})


def test_sqlite_store_timeout_zero_still_means_try_once(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "store.sqlite3", timeout=0, prune_every=0).close()


def test_postgres_store_refuses_a_negative_prune_every() -> None:
    with pytest.raises(ConfigurationError, match="prune_every"):
        PostgresStore("postgresql://postgres@127.0.0.1/test", prune_every=-1)


@pytest.mark.parametrize(
    ("option", "value"),
    [("timeout", 0), ("timeout", -1), ("timeout", math.nan), ("max_size", 0), ("prune_every", -1)],
)
def test_postgres_inbox_refuses_bad_bounds(option: str, value: Any) -> None:
    pytest.importorskip("psycopg")
    from service_webhooks.inbox import PostgresInbox

    with pytest.raises(ConfigurationError, match=option):
        PostgresInbox("postgresql://postgres@127.0.0.1/test", **{option: value})


@pytest.mark.parametrize("max_size", [math.nan, -1, 1.5, "1024", True])
def test_decode_envelope_refuses_a_max_size_that_is_not_an_int(max_size: Any) -> None:
    """NaN had turned the size check off (``len(body) > nan`` is never true)."""
    with pytest.raises(ConfigurationError, match="max_size"):
        decode_envelope(BODY, max_size=max_size)


def test_decode_envelope_max_size_still_bounds_the_body() -> None:
    assert decode_envelope(BODY, max_size=len(BODY)).event_name == "note.created"
    with pytest.raises(PayloadTooLargeError):
        decode_envelope(BODY, max_size=len(BODY) - 1)


@pytest.mark.parametrize("timeout", [True, math.nan, math.inf, 0, -1, "5"])
def test_redis_store_refuses_a_timeout_that_is_not_finite_seconds(timeout: Any) -> None:
    """``True`` (a 1 s timeout by accident) and infinity had been kept."""
    pytest.importorskip("redis")
    from service_webhooks.stores import RedisStore

    with pytest.raises(ConfigurationError, match="timeout"):
        RedisStore("redis://127.0.0.1:6379/0", timeout=timeout)


def test_delivery_bounds_refuse_nan() -> None:
    """``> 0`` is documented; NaN passed the ``<= 0`` tests."""
    with pytest.raises(ConfigurationError):
        RateLimiter(10, math.nan)
    with pytest.raises(ConfigurationError):
        ScaledClock(math.nan)
    with pytest.raises(ConfigurationError):
        Sender(deadline=math.nan)


def test_emulator_rate_limiter_none_keeps_the_default_throttle() -> None:
    """As now documented: ``rate_limiter=None`` is the default limiter, ``throttle=False``
    turns throttling off."""
    assert isinstance(Emulator(Sender(), rate_limiter=None).rate_limiter, RateLimiter)
    assert Emulator(Sender(), throttle=False).rate_limiter is None
    assert "throttle" in (Emulator.__doc__ or "")


def test_deliver_to_app_is_documented_as_a_coroutine_function() -> None:
    assert inspect.iscoroutinefunction(deliver_to_app)
    assert "await deliver_to_app(" in (deliver_to_app.__doc__ or "")
