"""Signature rules of spec §5.2 beyond the shared vectors: parsing, tolerance, clocks (the
secrets themselves, rotation and resolvers: tests/test_credentials.py)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from service_webhooks import (
    Secret,
    SignatureFormatError,
    SignatureHeader,
    SignatureMismatchError,
    TimestampError,
    parse_signature_header,
    sign,
    verify,
)

BODY = b'{"eventName":"note.created","version":1,"data":{}}'
NOW = 1_763_700_000
KEY = "whsec-0123456789abcdef0123456789abcdef"


def header(body: bytes = BODY, *, secret: str = KEY, org: str = "o-1", t: int = NOW) -> str:
    return sign(body, secret, org, timestamp=t)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "o:a,t:1",
        "o:a,t:1,v:x,o:b",
        "o:a,t:1,o:b",
        "o:a,t:1,x:1",
        "O:a,t:1,v:x",
        "o:a, t:1,v:x",  # whitespace inside the value is part of it
        "o:a,t:1 ,v:x",
        "o,t:1,v:x",
        "o:,t:1,v:x",
        "o:a,t:,v:x",
        "o:a,t:-1,v:x",
        "o:a,t:+1,v:x",
        "o:a,t:1.0,v:x",
        "o:a,t:1e9,v:x",
        "o:a,t:1234567890123,v:x",
        "o:a,t:١٢٣,v:x",
        "o:é,t:1,v:x",
        b"o:\xff,t:1,v:x",
        "o:a\x00b,t:1,v:x",
        "o:a,t:1,v:" + "A" * 5000,
    ],
)
def test_malformed_headers_are_format_errors(value: str | bytes | None) -> None:
    with pytest.raises(SignatureFormatError) as caught:
        parse_signature_header(value)
    assert (caught.value.status, caught.value.reason) == (401, "format")


def test_pairs_split_at_their_first_colon_and_keep_t_as_sent() -> None:
    parsed = parse_signature_header("t:001763700000,v:abc=,o:org:with:colons")
    assert parsed.organization_id == "org:with:colons"
    assert parsed.timestamp == 1763700000
    assert parsed.timestamp_text == "001763700000"
    assert parsed.signature == "abc="
    assert parsed.signed_suffix() == b":org:with:colons:001763700000"


@pytest.mark.parametrize("around", [(" ", ""), ("", " "), ("\t ", " \t"), ("", "\t")])
def test_whitespace_around_the_value_is_not_part_of_it(around: tuple[str, str]) -> None:
    """RFC 9110 §5.5: h11 and the WSGI servers drop it, uvicorn on httptools keeps
    what follows the value; a correct signature must verify either way."""
    value = header()
    spaced = around[0] + value + around[1]
    assert parse_signature_header(spaced) == parse_signature_header(value)
    assert parse_signature_header(spaced.encode()) == parse_signature_header(value)
    assert verify(BODY, spaced, [Secret(KEY)], now=NOW).organization_id == "o-1"


def test_header_bytes_and_str_parse_alike() -> None:
    value = header()
    assert parse_signature_header(value.encode()) == parse_signature_header(value)


def test_sign_matches_the_spec_formula() -> None:
    import hashlib
    import hmac

    expected = hmac.new(KEY.encode(), BODY + b":o-1:" + str(NOW).encode(), hashlib.sha256)
    assert header() == f"o:o-1,t:{NOW},v:{base64.b64encode(expected.digest()).decode()}"


@pytest.mark.parametrize("key_size", [1, 32, 63, 64, 65, 128, 300])
@pytest.mark.parametrize("size", [0, 200, 70_000])
def test_the_hmac_equals_the_standard_librarys_for_every_key_length(
    key_size: int, size: int
) -> None:
    """The digest is RFC 2104 HMAC-SHA256 built on hashlib (keys over 64 bytes hashed
    first, shorter ones zero-padded): byte for byte what :func:`hmac.new` computes."""
    import hashlib
    import hmac

    from service_webhooks._signing import compute_signature

    key = bytes((7 * i + key_size) % 256 for i in range(key_size))
    body = bytes(i % 251 for i in range(size))
    suffix = b":o-1:" + str(NOW).encode()
    expected = hmac.new(key, body + suffix, hashlib.sha256).digest()
    assert compute_signature(body, key, suffix) == expected
    assert compute_signature(body, key, suffix) == expected  # from the kept keyed states
    assert compute_signature(body, key + b"!", suffix) != expected


@pytest.mark.parametrize("org", ["", "a,b", "tab\there"])
def test_sign_refuses_organization_ids_that_cannot_round_trip(org: str) -> None:
    with pytest.raises(SignatureFormatError):
        sign(BODY, KEY, org)


def test_sign_refuses_negative_timestamps() -> None:
    with pytest.raises(SignatureFormatError):
        sign(BODY, KEY, "o-1", timestamp=-1)


@pytest.mark.parametrize("skew", [-300, -1, 0, 1, 300])
def test_tolerance_is_inclusive_in_both_directions(skew: int) -> None:
    assert verify(BODY, header(t=NOW + skew), [Secret(KEY)], now=NOW).timestamp == NOW + skew


@pytest.mark.parametrize("skew", [-301, 301, -86_400])
def test_beyond_tolerance_is_rejected_even_with_a_good_signature(skew: int) -> None:
    with pytest.raises(TimestampError) as caught:
        verify(BODY, header(t=NOW + skew), [Secret(KEY)], now=NOW)
    assert caught.value.reason == "timestamp"


@pytest.mark.parametrize(
    ("t_offset", "now_offset", "accepted"),
    [
        (-300, 0.0, True),  # exactly 300 s old
        (-300, 0.5, True),  # still second NOW: 300 whole seconds (t has no fraction)
        (-300, 0.999, True),
        (-300, 1.0, False),  # 301 s: "greater than five minutes" (spec §5.2)
        (-300, -0.5, True),
        (300, 0.0, True),  # 300 s in the future (clock skew)
        (300, 0.999, True),
        (300, -0.5, False),  # second NOW - 1: 301 s
    ],
)
def test_tolerance_compares_whole_seconds(t_offset: int, now_offset: float, accepted: bool) -> None:
    """``abs(floor(now) - t) > tolerance`` is rejected: the same 300 s each way."""
    signed = header(t=NOW + t_offset)
    if accepted:
        assert verify(BODY, signed, [Secret(KEY)], now=NOW + now_offset).timestamp == NOW + t_offset
    else:
        with pytest.raises(TimestampError):
            verify(BODY, signed, [Secret(KEY)], now=NOW + now_offset)


@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.999])
@pytest.mark.parametrize("skew", [-301, 301])
def test_one_second_past_tolerance_fails_whatever_the_fraction(skew: int, fraction: float) -> None:
    with pytest.raises(TimestampError):
        verify(BODY, header(t=NOW + skew), [Secret(KEY)], now=NOW + fraction)


def test_the_boundary_under_the_default_clock_is_whole_seconds() -> None:
    with freeze_time(datetime.fromtimestamp(NOW + 0.75, UTC)):
        assert verify(BODY, header(t=NOW - 300), [Secret(KEY)]).timestamp == NOW - 300
    with freeze_time(datetime.fromtimestamp(NOW + 1, UTC)), pytest.raises(TimestampError):
        verify(BODY, header(t=NOW - 300), [Secret(KEY)])  # 301 s old


def test_custom_tolerance() -> None:
    verify(BODY, header(t=NOW - 30), [Secret(KEY)], now=NOW, tolerance=30)
    with pytest.raises(TimestampError):
        verify(BODY, header(t=NOW - 31), [Secret(KEY)], now=NOW, tolerance=30)


def test_default_clock_is_time_time_so_freezegun_applies() -> None:
    with freeze_time(datetime.fromtimestamp(NOW, UTC)):
        verify(BODY, header(), [Secret(KEY)])
    with freeze_time(datetime.fromtimestamp(NOW + 301, UTC)), pytest.raises(TimestampError):
        verify(BODY, header(), [Secret(KEY)])


@pytest.mark.parametrize(
    "v",
    ["", "!!!", "R2r/Vwhs6Lgi9KgGhEq5", "R2r_Vwhs6Lgi9KgGhEq5lRXuhtokQK7Vw2YARti5zZY=", "AAAA"],
)
def test_undecodable_or_short_v_is_a_mismatch(v: str) -> None:
    with pytest.raises(SignatureMismatchError):
        verify(BODY, f"o:o-1,t:{NOW},v:{v}", [Secret(KEY)], now=NOW)


def test_the_mismatch_says_whether_v_is_a_digest_at_all() -> None:
    """The detail a receiver logs and keeps: a ``v`` that is no canonical base64 of 32
    bytes is named as such, whichever secrets are active; a well-formed wrong one is not."""
    good = header()
    wrong = base64.b64encode(bytes(32)).decode()
    non_canonical = good[:-2] + ("B" if good[-2] != "B" else "C") + "="
    retired = Secret(KEY, not_after=NOW - 1)
    cases = [
        (f"o:o-1,t:{NOW},v:{wrong}", [Secret(KEY)], "no accepted secret produces this signature"),
        (f"o:o-1,t:{NOW},v:{wrong}", [retired], "no accepted secret produces this signature"),
        (non_canonical, [Secret(KEY)], "v is not a base64 HMAC-SHA256 digest"),
        (f"o:o-1,t:{NOW},v:!!!", [retired], "v is not a base64 HMAC-SHA256 digest"),
        # no candidate at all (a resolver's empty answer; an empty list is refused)
        (f"o:o-1,t:{NOW},v:!!!", lambda o: [], "v is not a base64 HMAC-SHA256 digest"),
    ]
    for value, secrets, message in cases:
        with pytest.raises(SignatureMismatchError, match=message):
            verify(BODY, value, secrets, now=NOW)


@pytest.mark.parametrize("v", ["é" * 44, "\ud800" + "A" * 42 + "=", "A" * 43 + "\x00"])
def test_a_parsed_header_with_any_v_is_a_mismatch_not_a_crash(v: str) -> None:
    """``verify`` takes an already parsed header too, whose ``v`` was never checked for
    ASCII: any text there is a mismatch (401), never an encoding error."""
    parsed = parse_signature_header(header())
    forged = SignatureHeader(parsed.organization_id, parsed.timestamp, parsed.timestamp_text, v)
    with pytest.raises(SignatureMismatchError):
        verify(BODY, forged, [Secret(KEY)], now=NOW)


def test_signature_covers_every_byte_of_body_org_and_t() -> None:
    good = header()
    for tampered_body in (BODY + b" ", BODY[:-1], b" " + BODY):
        with pytest.raises(SignatureMismatchError):
            verify(tampered_body, good, [Secret(KEY)], now=NOW)
    with pytest.raises(SignatureMismatchError):
        verify(BODY, good.replace("o:o-1", "o:o-2"), [Secret(KEY)], now=NOW)
    with pytest.raises(SignatureMismatchError):
        verify(BODY, good.replace(f"t:{NOW}", f"t:{NOW - 1}"), [Secret(KEY)], now=NOW)
