"""Property tests (hypothesis) for signing, the header parser, the envelope and the receiver.

* sign then verify round-trips for any body, organization, secret and timestamp;
* any single-byte change to the body, ``o``, ``t`` or ``v`` is rejected;
* ``parse_signature_header`` raises nothing but ``SignatureFormatError``;
* ``decode_envelope`` raises nothing but ``EnvelopeError`` (``PayloadTooLargeError``);
* the receiver (``process`` and ``aprocess``) never raises and never answers 5xx for any
  method, bytes and header (its store and handlers do not fail here).

Example counts are bounded (``max_examples``) so the file runs in seconds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from service_webhooks import MemoryStore, WebhookReceiver
from service_webhooks._credentials import Secret
from service_webhooks._envelope import MAX_BODY_SIZE, decode_envelope
from service_webhooks._exceptions import (
    EnvelopeError,
    PayloadTooLargeError,
    SignatureError,
    SignatureFormatError,
    SignatureMismatchError,
)
from service_webhooks._signing import parse_signature_header, sign, verify

NOW = 1_760_000_000
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ----------------------------------------------------------------------------

# an organization ID the header can carry: printable ASCII, no "," (the pair separator)
orgs = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters=","),
    min_size=1,
    max_size=64,
)
secrets = st.one_of(st.binary(min_size=1, max_size=128), st.text(min_size=1, max_size=64))
timestamps = st.integers(min_value=0, max_value=10**12 - 1)
bodies = st.binary(max_size=2048)


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )


json_values = _json_values()
event_names = st.one_of(
    st.sampled_from(["note.created", "segment.trend.alert", "other.event", ""]), json_values
)
envelopes = st.builds(
    lambda name, version, data, keep: {
        k: v for k, v in {"eventName": name, "version": version, "data": data}.items() if k in keep
    },
    event_names,
    st.one_of(st.integers(min_value=-2, max_value=3), json_values),
    json_values,
    st.sets(st.sampled_from(["eventName", "version", "data"])).map(
        lambda s: s | {"eventName", "version", "data"} if len(s) == 3 else s
    ),
)
envelope_bodies = st.one_of(
    bodies,
    envelopes.map(lambda e: json.dumps(e).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
)

# header-like text: the right pieces in the wrong amounts and places
header_pieces = st.sampled_from(
    ["o:", "t:", "v:", ",", ":", "o", "t", "v", "1", "0", "-", "+", " ", "=", "A", "/", "\x00", "é"]
)
header_like = st.lists(header_pieces, max_size=24).map("".join)
headers = st.one_of(
    st.none(),
    header_like,
    header_like.map(lambda s: s.encode("utf-8")),
    st.text(max_size=200),
    st.binary(max_size=200),
)


# -- signing ----------------------------------------------------------------------------------


@EXAMPLES
@given(body=bodies, org=orgs, secret=secrets, t=timestamps)
def test_sign_then_verify_round_trips(body: bytes, org: str, secret: str | bytes, t: int) -> None:
    value = sign(body, secret, org, timestamp=t)
    parsed = verify(body, value, [Secret(secret)], now=t)
    assert (parsed.organization_id, parsed.timestamp, parsed.timestamp_text) == (org, t, str(t))
    assert verify(body, value.encode("ascii"), [Secret(secret)], now=t) == parsed
    assert parse_signature_header(value) == parsed


@EXAMPLES
@given(body=bodies, org=st.text(min_size=1, max_size=16), t=st.integers(min_value=0))
def test_sign_refuses_what_it_could_not_parse_back(body: bytes, org: str, t: int) -> None:
    try:
        value = sign(body, "s", org, timestamp=t)
    except SignatureFormatError:
        return
    assert parse_signature_header(value).organization_id == org


def _mutate(data: bytes, index: int, byte: int) -> bytes:
    index %= len(data)
    assume(data[index] != byte)
    return data[:index] + bytes([byte]) + data[index + 1 :]


@EXAMPLES
@given(
    body=bodies,
    org=orgs,
    secret=secrets,
    t=st.integers(min_value=10**8, max_value=10**10),
    part=st.sampled_from(["body", "o", "t", "v"]),
    index=st.integers(min_value=0),
    byte=st.integers(min_value=0, max_value=255),
)
def test_any_single_byte_change_is_rejected(
    body: bytes, org: str, secret: str | bytes, t: int, part: str, index: int, byte: int
) -> None:
    keys = [Secret(secret)]
    header = sign(body, secret, org, timestamp=t).encode("ascii")
    assert verify(body, header, keys, now=t).timestamp == t
    if part == "body":
        assume(body)
        body = _mutate(body, index, byte)
    else:
        o_part, t_part, v_part = header.split(b",")
        pieces = {"o": o_part, "t": t_part, "v": v_part}
        key, value = pieces[part].split(b":", 1)
        pieces[part] = key + b":" + _mutate(value, index, byte)
        header = b",".join(pieces.values())
    with pytest.raises(SignatureError):
        verify(body, header, keys, now=t)


@EXAMPLES
@given(body=bodies, secret=secrets, org=orgs, t=timestamps, v=st.binary(min_size=32, max_size=32))
def test_any_other_digest_is_a_mismatch(
    body: bytes, secret: str | bytes, org: str, t: int, v: bytes
) -> None:
    good = parse_signature_header(sign(body, secret, org, timestamp=t))
    assume(base64.b64decode(good.signature) != v)
    forged = f"o:{org},t:{t},v:{base64.b64encode(v).decode()}"
    with pytest.raises(SignatureMismatchError):
        verify(body, forged, [Secret(secret)], now=t)


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@EXAMPLES
@given(body=bodies, secret=secrets, org=orgs, t=timestamps, last=st.sampled_from(_B64))
def test_only_the_canonical_spelling_of_v_is_accepted(
    body: bytes, secret: str | bytes, org: str, t: int, last: str
) -> None:
    """A 32-byte digest is 43 base64 characters and ``=``; the 43rd carries 2 unused bits.
    Another character there may decode to the same bytes: still a change to ``v``."""
    header = sign(body, secret, org, timestamp=t)
    assume(header[-2] != last)
    changed = header[:-2] + last + "="
    with pytest.raises(SignatureMismatchError):
        verify(body, changed, [Secret(secret)], now=t)


@EXAMPLES
@given(value=headers)
def test_the_header_parser_raises_only_its_format_error(value: str | bytes | None) -> None:
    try:
        parsed = parse_signature_header(value)
    except SignatureFormatError:
        return
    assert parsed.organization_id
    assert parsed.organization_id.isprintable()
    assert parsed.timestamp == int(parsed.timestamp_text)
    assert parsed.timestamp_text.isascii()
    assert parsed.timestamp_text.isdigit()


@EXAMPLES
@given(
    o=st.text(max_size=12),
    t=st.text(max_size=14),
    v=st.text(max_size=50),
    order=st.permutations(["o", "t", "v"]),
)
def test_three_pairs_of_anything_parse_or_raise_the_format_error(
    o: str, t: str, v: str, order: list[str]
) -> None:
    values = {"o": o, "t": t, "v": v}
    value = ",".join(f"{key}:{values[key]}" for key in order)
    try:
        parsed = parse_signature_header(value)
    except SignatureFormatError:
        return
    assert (parsed.organization_id, parsed.timestamp_text, parsed.signature) == (o, t, v)
    with contextlib.suppress(SignatureError):  # and verifying it raises nothing else
        verify(b"", parsed, [Secret("s")], now=NOW)


# -- envelope --------------------------------------------------------------------------------


@EXAMPLES
@given(body=envelope_bodies)
def test_decode_envelope_raises_only_envelope_errors(body: bytes) -> None:
    try:
        envelope = decode_envelope(body)
    except EnvelopeError:
        return
    assert isinstance(envelope.event_name, str)
    assert envelope.event_name
    assert type(envelope.version) is int
    raw = json.loads(body)
    assert (raw["eventName"], raw["version"]) == (envelope.event_name, envelope.version)


@FEW
@given(body=envelope_bodies, limit=st.integers(min_value=1, max_value=64))
def test_decode_envelope_size_cap(body: bytes, limit: int) -> None:
    if len(body) > limit:
        with pytest.raises(PayloadTooLargeError):
            decode_envelope(body, max_size=limit)
    else:
        with contextlib.suppress(EnvelopeError):
            assert decode_envelope(body, max_size=limit).event_name
        assert limit <= MAX_BODY_SIZE


# -- receiver --------------------------------------------------------------------------------


methods = st.one_of(
    st.sampled_from(["POST", "post", "GET", "PUT", "HEAD", ""]), st.text(max_size=10)
)


def _receiver() -> WebhookReceiver:
    receiver = WebhookReceiver("whsec-properties", store=MemoryStore(), clock=lambda: NOW)
    receiver.on("note.created", lambda event: None)
    receiver.on_any(lambda event: None)
    return receiver


@FEW
@given(
    method=methods,
    body=envelope_bodies,
    header=headers,
    sign_it=st.booleans(),
    org=orgs,
    skew=st.integers(min_value=-400, max_value=400),
)
def test_the_receiver_never_raises_and_never_answers_5xx(
    method: str, body: bytes, header: str | bytes | None, sign_it: bool, org: str, skew: int
) -> None:
    if sign_it:  # an authentic delivery of arbitrary bytes reaches the envelope and handlers
        header = sign(body, "whsec-properties", org, timestamp=NOW + skew)
    receiver = _receiver()
    sync = receiver.process(body, header, method=method)
    asynchronous = asyncio.run(_receiver().aprocess(body, header, method=method))
    assert sync == asynchronous
    assert sync.status in (200, 400, 401, 405, 413), sync
    if sync.ok:
        assert method.upper() == "POST"
        assert sign_it
        assert abs(skew) <= 300
        assert sync.reason == "processed"
        assert receiver.process(body, header, method=method).reason == "duplicate"
