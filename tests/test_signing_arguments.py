"""sign's timestamp and verify's tolerance: wrong types and values are refused, never
turned into a header the parser refuses or a check that is off."""

from __future__ import annotations

import time
from typing import Any

import pytest

from service_webhooks import (
    ConfigurationError,
    Secret,
    SignatureFormatError,
    TimestampError,
    parse_signature_header,
    sign,
    verify,
)
from service_webhooks.testing import Signer

BODY = b'{"eventName":"note.created","version":1,"data":{}}'
KEY = "whsec-0123456789abcdef0123456789abcdef"
NOW = 1_763_700_000
TIMESTAMP_MESSAGE = r"timestamp must be an int of Unix seconds, e\.g\. int\(time\.time\(\)\)"


@pytest.mark.parametrize("timestamp", [time.time(), 1.0, True, False, "123", b"123"])
def test_sign_refuses_a_timestamp_that_is_no_int(timestamp: Any) -> None:
    with pytest.raises(SignatureFormatError, match=TIMESTAMP_MESSAGE):
        sign(BODY, KEY, "o-1", timestamp=timestamp)


def test_sign_with_an_int_timestamp_parses_back() -> None:
    assert parse_signature_header(sign(BODY, KEY, "o-1", timestamp=NOW)).timestamp == NOW


@pytest.mark.parametrize(
    ("timestamp", "hint"),
    [(NOW * 1000, True), (NOW * 1000 + 999, True), (10**12, True), (-1, False), (10**15, False)],
)
def test_sign_refuses_a_timestamp_out_of_range_naming_milliseconds(
    timestamp: int, hint: bool
) -> None:
    """``int(time.time() * 1000)`` is the likely mistake: the message says to divide."""
    with pytest.raises(SignatureFormatError, match="Unix time in seconds") as caught:
        sign(BODY, KEY, "o-1", timestamp=timestamp)
    assert ("looks like milliseconds: divide by 1000" in str(caught.value)) is hint


@pytest.mark.parametrize("timestamp", [time.time(), True, "123"])
def test_the_signer_refuses_a_timestamp_that_is_no_int(timestamp: Any) -> None:
    signer = Signer(KEY, organization_id="o-1")
    with pytest.raises(SignatureFormatError, match=TIMESTAMP_MESSAGE):
        signer.delivery("note.created", {"id": "n-1"}, timestamp=timestamp)
    with pytest.raises(SignatureFormatError, match=TIMESTAMP_MESSAGE):
        signer.headers(BODY, timestamp=timestamp)
    with pytest.raises(SignatureFormatError, match=TIMESTAMP_MESSAGE):
        signer.sign_body(BODY, timestamp=timestamp)


@pytest.mark.parametrize("tolerance", [float("nan"), float("inf"), -1, -0.5, True, "300", None])
def test_verify_refuses_a_tolerance_that_is_no_finite_number(tolerance: Any) -> None:
    header = sign(BODY, KEY, "o-1", timestamp=NOW)
    with pytest.raises(
        ConfigurationError, match="tolerance must be a finite number of seconds >= 0"
    ):
        verify(BODY, header, [Secret(KEY)], now=NOW, tolerance=tolerance)


def test_verify_with_nan_tolerance_does_not_accept_an_old_timestamp() -> None:
    header = sign(BODY, KEY, "o-1", timestamp=NOW - 10**6)
    with pytest.raises(ConfigurationError):
        verify(BODY, header, [Secret(KEY)], now=NOW, tolerance=float("nan"))


@pytest.mark.parametrize("tolerance", [0, 30, 30.5])
def test_verify_still_takes_a_finite_tolerance(tolerance: float) -> None:
    verify(BODY, sign(BODY, KEY, "o-1", timestamp=NOW), [Secret(KEY)], now=NOW, tolerance=tolerance)
    with pytest.raises(TimestampError):
        verify(
            BODY,
            sign(BODY, KEY, "o-1", timestamp=NOW - 31),
            [Secret(KEY)],
            now=NOW,
            tolerance=tolerance,
        )
