"""Signing secrets (spec §5.2): rotation newest first with stop dates, one secret per
organization, callable resolvers, configuration checks, ``generate_secret``, and values
that never show in a ``repr`` or an error."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from service_webhooks import (
    ConfigurationError,
    Secret,
    SignatureMismatchError,
    UnknownOrganizationError,
    as_resolver,
    generate_secret,
    sign,
    verify,
)
from service_webhooks._signing import compute_signature

BODY = b'{"eventName":"note.created","version":1,"data":{}}'
NOW = 1_763_700_000
KEY = "whsec-0123456789abcdef0123456789abcdef"


def header(body: bytes = BODY, *, secret: str = KEY, org: str = "o-1", t: int = NOW) -> str:
    return sign(body, secret, org, timestamp=t)


def test_rotation_tries_every_secret_newest_first() -> None:
    old, new = "old-secret-" + "x" * 24, "new-secret-" + "y" * 24
    secrets = [Secret(new), Secret(old)]
    assert verify(BODY, header(secret=old), secrets, now=NOW)
    assert verify(BODY, header(secret=new), secrets, now=NOW)


def test_old_secret_stops_verifying_after_its_stop_date() -> None:
    old = "old-secret-" + "x" * 24
    stop = datetime.fromtimestamp(NOW, UTC)
    secrets = [Secret("new-secret-" + "y" * 24), Secret(old, not_after=stop)]
    assert verify(BODY, header(secret=old), secrets, now=NOW)  # on the stop date: still valid
    with pytest.raises(SignatureMismatchError):
        verify(BODY, header(secret=old, t=NOW + 1), secrets, now=NOW + 1)


def test_secret_per_organization() -> None:
    resolver = as_resolver({"o-a": "secret-a" * 4, "o-b": ["secret-b" * 4, "older-b" * 4]})
    assert verify(BODY, header(secret="secret-a" * 4, org="o-a"), resolver, now=NOW)
    assert verify(BODY, header(secret="older-b" * 4, org="o-b"), resolver, now=NOW)
    with pytest.raises(SignatureMismatchError):  # o-a's secret does not sign for o-b
        verify(BODY, header(secret="secret-a" * 4, org="o-b"), resolver, now=NOW)
    with pytest.raises(UnknownOrganizationError) as caught:
        verify(BODY, header(org="o-c"), resolver, now=NOW)
    assert (caught.value.status, caught.value.reason) == (401, "unknown_organization")


def test_callable_resolver_is_asked_with_the_organization() -> None:
    asked: list[str] = []

    def lookup(org: str) -> str | None:
        asked.append(org)
        return KEY if org == "o-1" else None

    resolver = as_resolver(lookup)
    assert verify(BODY, header(), resolver, now=NOW)
    with pytest.raises(UnknownOrganizationError):
        verify(BODY, header(org="o-2"), resolver, now=NOW)
    assert asked == ["o-1", "o-2"]


def test_str_and_bytes_secrets_are_the_same_key() -> None:
    suffix = b":o:1"
    assert compute_signature(BODY, KEY, suffix) == compute_signature(BODY, KEY.encode(), suffix)


def test_secrets_never_show_in_reprs_or_errors() -> None:
    secret = Secret(KEY, not_after=time.time() + 60)
    assert KEY not in repr(secret)
    assert KEY not in repr(as_resolver([secret]))
    assert KEY not in repr(as_resolver({"o": secret}))
    for bad in ("o:o-1,t:1,v:AAAA", header(secret="other-" * 6)):
        with pytest.raises(SignatureMismatchError) as caught:
            verify(BODY, bad, [secret], now=1)
        assert KEY not in str(caught.value)
        assert KEY not in repr(caught.value)


@pytest.mark.parametrize("bad", ["", b"", [], {}, 42, datetime.now()])
def test_bad_secret_configuration_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        as_resolver(bad)  # type: ignore[arg-type]


def test_naive_stop_date_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        Secret(KEY, not_after=datetime.now() + timedelta(days=1))


def test_generate_secret_is_256_random_bits() -> None:
    first, second = generate_secret(), generate_secret()
    assert first != second
    assert len(base64.urlsafe_b64decode(first + "=")) == 32


@pytest.mark.parametrize("bits", [256, 264, 384, 512])
def test_generate_secret_takes_the_spec_range_of_bits(bits: int) -> None:
    secret = generate_secret(bits)
    padded = secret + "=" * (-len(secret) % 4)
    assert len(base64.urlsafe_b64decode(padded)) == bits // 8
    assert generate_secret(bits) != secret


@pytest.mark.parametrize("bits", [128, 255, 260, 520, 1024, 0, -256, 256.0, True, "256"])
def test_generate_secret_refuses_bits_outside_the_spec_range(bits: object) -> None:
    with pytest.raises(ConfigurationError, match="bits must be an int from 256 to 512"):
        generate_secret(bits)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [{"o-1": 42}, [42], {"o-1": [None]}, {"o-1": ["ok-secret", b""]}])
def test_bad_secret_values_inside_a_configuration_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        as_resolver(bad)  # type: ignore[arg-type]


def test_callable_resolver_repr_hides_what_the_callable_holds() -> None:
    import functools

    def lookup(table: dict[str, str], org: str) -> str | None:
        return table.get(org)

    resolver = as_resolver(functools.partial(lookup, {"o-1": KEY}))
    assert KEY not in repr(resolver)
    assert verify(BODY, header(), resolver, now=NOW)


@pytest.mark.parametrize("not_after", ["2026", "2026-12-01", True, float("nan"), [1]])
def test_a_stop_date_that_is_no_time_is_refused(not_after: object) -> None:
    """``"2026"`` was read as 2026 seconds after 1970: a secret that never verified."""
    with pytest.raises(ConfigurationError, match="aware datetime or Unix seconds"):
        Secret(KEY, not_after=not_after)  # type: ignore[arg-type]


@pytest.mark.parametrize("not_after", [1_900_000_000, 1.9e9, float("inf")])
def test_unix_seconds_are_a_stop_date(not_after: float) -> None:
    assert Secret(KEY, not_after=not_after).not_after == float(not_after)


@pytest.mark.parametrize(
    "not_after",
    [time.time() * 1000, 1_900_000_000_000, 253_402_300_800, 1.9e15, 1.9e18, 1e300],
    ids=["time.time()*1000", "ms", "year-10000", "us", "ns", "1e300"],
)
def test_a_stop_date_in_milliseconds_is_refused(not_after: float) -> None:
    """``time.time() * 1000`` or JavaScript's ``Date.now()`` read as seconds is tens of
    thousands of years away: the rotated-out secret would never stop verifying."""
    with pytest.raises(
        ConfigurationError, match=r"past year 9999.*253402300799.*milliseconds"
    ) as raised:
        Secret(KEY, not_after=not_after)
    assert "/ 1000" in str(raised.value)


@pytest.mark.parametrize(
    "not_after",
    [
        253_402_300_799,  # 9999-12-31T23:59:59Z, the last second a datetime holds
        253_402_300_799.5,
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # 253402300800.0 as a float
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),  # past the bound
        -1_900_000_000_000,  # long past: stops nothing it should not
    ],
    ids=["last-second", "last-second-and-a-half", "datetime-max", "datetime-max-west", "past"],
)
def test_the_latest_stop_dates_are_accepted(not_after: datetime | float) -> None:
    assert Secret(KEY, not_after=not_after).not_after is not None


@pytest.mark.parametrize("organization_id", ["o,1", "", "org\u00e9", "o\n1"])
def test_an_organization_no_signature_can_name_is_refused(organization_id: str) -> None:
    with pytest.raises(ConfigurationError, match="can never match a delivery"):
        as_resolver({"o-1": KEY, organization_id: KEY})


def test_organization_keys_that_are_numbers_are_their_text() -> None:
    resolver = as_resolver({123: KEY})  # type: ignore[dict-item]
    assert resolver("123") == (Secret(KEY),)


@pytest.mark.parametrize("key", [b"o-1", None, True, 1.5], ids=["bytes", "none", "bool", "float"])
def test_organization_keys_no_header_can_name_are_refused(key: object) -> None:
    """Such a key was taken as its text (``"b'o-1'"``, ``"None"``): a mapping that
    answered that organization's every delivery 401 ``unknown_organization``."""
    with pytest.raises(ConfigurationError, match="must be a str") as caught:
        as_resolver({"o-2": KEY, key: KEY})  # type: ignore[dict-item]
    assert KEY not in str(caught.value)
    if isinstance(key, bytes):
        assert "key.decode()" in str(caught.value)


def test_a_str_secret_with_a_byte_that_was_not_utf8_is_a_configuration_error() -> None:
    """``os.environ`` and ``sys.argv`` keep such a byte as a lone surrogate; encoding it
    raised ``UnicodeEncodeError``, whose message quotes the character and its place."""
    with pytest.raises(ConfigurationError, match="valid Unicode") as caught:
        Secret("caf\udce9-" + KEY)
    assert "udce9" not in str(caught.value)
    assert caught.value.__context__ is None or caught.value.__suppress_context__
    assert Secret(b"caf\xe9-" + KEY.encode()).value.startswith(b"caf\xe9")


def test_a_refusal_by_a_secret_past_its_stop_date_says_so() -> None:
    """The log line's detail after a rotation: the old secret made the signature, but
    its stop date has passed; never the secret itself."""
    retired = Secret(KEY, not_after=datetime(2025, 11, 21, 4, 39, 59, tzinfo=UTC))
    with pytest.raises(SignatureMismatchError, match="past its stop date") as caught:
        verify(BODY, header(), [Secret("whsec-new-" + "n" * 32), retired], now=NOW)
    assert "(2025-11-21T04:39:59+00:00)" in str(caught.value)
    assert KEY not in str(caught.value)
    with pytest.raises(SignatureMismatchError) as wrong:  # another secret: no such claim
        verify(BODY, header(secret="whsec-other-" + "o" * 30), [retired], now=NOW)
    assert str(wrong.value) == "no accepted secret produces this signature"


def test_an_unknown_organization_is_named_in_the_refusal() -> None:
    with pytest.raises(UnknownOrganizationError, match="for organization 'o-9'"):
        verify(BODY, header(org="o-9"), as_resolver({"o-1": KEY}), now=NOW)


async def _async_lookup(organization_id: str) -> str:
    return "secret-" * 4


@pytest.mark.parametrize(
    ("lookup", "message"),
    [
        (_async_lookup, r"secrets _async_lookup is async"),
        (lambda: "secret-" * 4, r"cannot be called as secrets\(organization_id\)"),
        (lambda organization_id, region: None, r"missing a required argument: 'region'"),
    ],
)
def test_a_secrets_callable_that_could_never_answer_is_refused(lookup: Any, message: str) -> None:
    """Accepted before, such a callable answered every delivery 500 (async) or 503
    (wrong arity: retried for 24 h, then the event died)."""
    with pytest.raises(ConfigurationError, match=message):
        as_resolver(lookup)
