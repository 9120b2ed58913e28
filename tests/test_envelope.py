"""Envelope decoding (spec §2.7, §6.1, §9): malformed envelopes answer 400, event data
is decoded into its typed model, and the whole body must be valid UTF-8 (RFC 8259 §8.1),
even in skipped fields.

``tests/helpers/sw_bad_inputs.py`` sends the small cases through every adapter; the
UTF-8 tests here pin the chunked check of large bodies, where a bad sequence can sit
across a chunk boundary. The decoding vectors are in ``tests/test_vectors.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service_webhooks import (
    Duration,
    EnvelopeError,
    Outcome,
    SegmentTrendAlert,
    WebhookReceiver,
)
from service_webhooks._envelope import _UTF8_CHUNK, _is_utf8, decode_envelope

HEAD = b'{"eventName":"catalogue.probe","version":1,"x":"'
TAIL = b'","data":1}'

Signed = Callable[..., tuple[bytes, str]]
Drive = Callable[..., Outcome]


def padded(insert: bytes, at: int, size: int = 3 * _UTF8_CHUNK) -> bytes:
    """An envelope of about ``size`` bytes with ``insert`` at offset ``at`` of a skipped field."""
    filler = size - len(HEAD) - len(TAIL) - len(insert)
    offset = at - len(HEAD)
    return HEAD + b"a" * offset + insert + b"a" * (filler - offset) + TAIL


GOOD = ["é".encode(), "€".encode(), "😀".encode()]
BAD = [
    b"\xc0\xaf",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\x80",
    b"\xff",
    b"\xf4\x90\x80\x80",
]


@pytest.mark.parametrize("shift", range(-4, 2))
@pytest.mark.parametrize("sequence", GOOD, ids=["2-byte", "3-byte", "4-byte"])
def test_valid_sequences_across_a_chunk_boundary_are_accepted(sequence: bytes, shift: int) -> None:
    body = padded(sequence, _UTF8_CHUNK + shift)
    assert decode_envelope(body).data == 1


@pytest.mark.parametrize("shift", range(-4, 2))
@pytest.mark.parametrize("sequence", BAD)
def test_invalid_sequences_anywhere_in_a_large_body_are_refused(
    sequence: bytes, shift: int
) -> None:
    for at in (_UTF8_CHUNK + shift, 2 * _UTF8_CHUNK + shift, len(HEAD)):
        with pytest.raises(EnvelopeError, match="not UTF-8"):
            decode_envelope(padded(sequence, at))


def test_a_sequence_truncated_by_the_end_of_a_large_body_is_refused() -> None:
    body = padded(b"", len(HEAD)) + "€".encode()[:2]
    assert not _is_utf8(body)
    assert _is_utf8(body[:-2])


@given(st.binary(min_size=0, max_size=40), st.integers(0, 3 * _UTF8_CHUNK))
def test_the_chunked_check_agrees_with_a_strict_decode(noise: bytes, at: int) -> None:
    body = b"a" * at + noise + b"a" * (2 * _UTF8_CHUNK)
    try:
        body.decode("utf-8")
        expected = True
    except UnicodeDecodeError:
        expected = False
    assert _is_utf8(body) is expected


@pytest.mark.parametrize(
    "body",
    [b"", b"{}", b"[1]", b'{"eventName":"note.created","version":true,"data":{}}', b"\xff\xfe"],
)
def test_malformed_envelope_answers_400(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, body: bytes
) -> None:
    outcome = drive(receiver, *signed(body))
    assert (outcome.status, outcome.reason) == (400, "malformed_envelope")


def test_known_event_with_data_not_fitting_its_model_answers_400(
    receiver: WebhookReceiver, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    receiver.on("note.created", lambda event: None)
    body = make_body("note.created", data={"id": "n-1"})
    outcome = drive(receiver, *signed(body, org="o-DRIFT-1"))
    assert (outcome.status, outcome.reason) == (400, "malformed_envelope")
    assert outcome.event_name == "note.created"  # a schema drift still names its event
    assert outcome.organization_id == "o-DRIFT-1"  # verified: the answer names it


@pytest.mark.parametrize("unhandled_status", [200, 500])
def test_data_not_fitting_the_model_of_an_event_no_handler_takes_is_unhandled(
    secret: str,
    signed: Signed,
    make_body: Callable[..., bytes],
    drive: Drive,
    unhandled_status: int,
) -> None:
    """Nothing would read it: ``unhandled_status`` as for any event without a handler,
    not a 400 (permanent, and counted by the service's failure-rate rule) for a model
    the application never uses."""
    receiver = WebhookReceiver(secret, store="memory", unhandled_status=unhandled_status)
    receiver.on("segment.trend.alert", lambda event: None)  # another event only
    body = make_body("note.created", data={"id": "n-1"})
    outcome = drive(receiver, *signed(body, org="o-DRIFT-2"))
    assert (outcome.status, outcome.reason) == (unhandled_status, "unhandled")
    assert (outcome.event_name, outcome.organization_id) == ("note.created", "o-DRIFT-2")


def test_a_schema_drift_error_names_the_event_and_version() -> None:
    body = b'{"eventName":"note.created","version":1,"data":{"id":5}}'
    with pytest.raises(EnvelopeError, match=r"\$\.data\.id") as caught:
        decode_envelope(body)
    assert (caught.value.event_name, caught.value.version) == ("note.created", 1)
    assert caught.value.model_mismatch  # JSON that fits no model, not JSON unread


def test_data_this_library_cannot_read_is_no_model_mismatch() -> None:
    body = b'{"eventName":"order.created","version":1,"data":1e999}'  # out of range
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(body)
    assert caught.value.event_name == "order.created"
    assert not caught.value.model_mismatch  # a 400 even when no handler takes it


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'{"duration":5}',
            "data does not fit SegmentTrendAlert: Expected `str`, got `int` - at `$.data.duration`",
        ),
        (
            b"{}",
            "data does not fit SegmentTrendAlert: Object missing required field "
            "`duration` - at `$.data`",
        ),
        (
            b"null",
            "data does not fit SegmentTrendAlert: Expected `object`, got `null` - at `$.data`",
        ),
    ],
)
def test_a_schema_drift_error_gives_the_model_and_the_path_in_the_body(
    data: bytes, message: str
) -> None:
    body = b'{"eventName":"segment.trend.alert","version":1,"data":%s}' % data
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(body)
    assert str(caught.value) == f"body is not a valid envelope: {message}"


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"eventName":"note.created"}', b'{"eventName":"note.created","version":"1"}', b"{"],
)
def test_an_envelope_that_does_not_decode_names_no_event(body: bytes) -> None:
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(body)
    assert (caught.value.event_name, caught.value.version) == (None, None)


def test_unknown_duration_is_kept_as_a_string(
    receiver: WebhookReceiver, signed: Signed, make_body: Callable[..., bytes], drive: Drive
) -> None:
    seen: list[SegmentTrendAlert] = []
    receiver.on("segment.trend.alert", lambda event: seen.append(event.data))
    drive(receiver, *signed(make_body("segment.trend.alert", data={"duration": "HOURLY"})))
    drive(receiver, *signed(make_body("segment.trend.alert", data={"duration": "DAILY"})))
    assert [a.duration for a in seen] == ["HOURLY", Duration.DAILY]
    assert seen[0].known_duration is None
    assert seen[1].known_duration is Duration.DAILY


# -- one pass or two: the same envelope, the same error ------------------------------------

from service_webhooks._envelope import _general  # noqa: E402

_NOTE = {"id": "n-1", "author": "ada@example.com", "text": "hi"}


def _outcome_of(decode: Callable[[bytes], object], body: bytes) -> object:
    try:
        return decode(body)
    except EnvelopeError as error:
        return ("error", str(error))


_FIELDS = st.sampled_from(["eventName", "version", "data", "extra"])
_NAMES = st.sampled_from(["note.created", "segment.trend.alert", "order.created", "", "x"])
_VALUES = st.one_of(
    _NAMES,
    st.integers(-1, 3),
    st.just(_NOTE),
    st.just({"id": "n-1"}),
    st.just({"duration": "DAILY", "segmentId": "s", "change": 1.5}),
    st.none(),
    st.booleans(),
)


@given(st.lists(st.tuples(_FIELDS, _VALUES), max_size=6), st.booleans())
def test_the_one_pass_and_the_general_path_agree(
    pairs: list[tuple[str, object]], service_head: bool
) -> None:
    """Whatever the key order, repeats and values, one pass returns what the general
    path returns, and refuses with its error."""
    import json

    if service_head:  # start the way the service does, so a typed one pass is tried
        pairs = [("eventName", "note.created"), ("version", 1), *pairs]
    body = (
        "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in pairs)
    ).encode() + b"}"
    assert _outcome_of(decode_envelope, body) == _outcome_of(_general, body)


@pytest.mark.parametrize(
    ("body", "name", "typed"),
    [
        # the service's head chooses the typed pass; a later eventName wins, untyped
        (
            b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a","text":"t"}'
            b',"eventName":"order.created"}',
            "order.created",
            False,
        ),
        # a known event written another way is still typed
        (
            b'{"version":1,"eventName":"note.created","data":{"id":"n-1","author":"a","text":"t"}}',
            "note.created",
            True,
        ),
        (
            b'{ "eventName": "note.created", "version": 1, "data": '
            b'{"id":"n-1","author":"a","text":"t"}}',
            "note.created",
            True,
        ),
        # the head names version 1, the body says 2: no model, plain JSON
        (
            b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a","text":"t"}'
            b',"version":2}',
            "note.created",
            False,
        ),
    ],
)
def test_the_decoded_name_and_version_choose_the_type(body: bytes, name: str, typed: bool) -> None:
    envelope = decode_envelope(body)
    assert envelope.event_name == name
    assert (type(envelope.data).__name__ == "NoteCreated") is typed
    assert envelope == _general(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"eventName":"x.y","version":1,"data":{"id":"\\ud800"}}',
        b'{"eventName":"x.y","version":1,"data":{"id":"\\udc00x"}}',
        b'{"eventName":"x.y","version":1,"data":{"\\ud83d":1}}',
        b'{"eventName":"note.created","version":1,"data":{"id":"\\ud83d","author":"a","text":"t"}}',
    ],
    ids=["high", "low", "in-a-key", "typed"],
)
def test_a_lone_surrogate_escape_is_refused_and_named(body: bytes) -> None:
    """JSON's grammar lets it through (RFC 8259 §8.2), but it is no character: msgspec
    refused it saying "Input data was truncated" or "unexpected end of hex escape", which
    sent a reader looking for a body cut short."""
    with pytest.raises(EnvelopeError, match="lone UTF-16 surrogate escape") as caught:
        decode_envelope(body)
    assert not caught.value.model_mismatch


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"eventName":"x.y","version":1,"data":{"id":"\\ud800', "truncated"),
        (b'{"eventName":"x.y","version":1,"data":NaN,"x":"\\ud800"}', "malformed"),
    ],
)
def test_a_body_with_a_surrogate_escape_but_other_faults_says_those(
    body: bytes, message: str
) -> None:
    with pytest.raises(EnvelopeError, match=message):
        decode_envelope(body)


def test_a_surrogate_pair_and_an_escaped_backslash_decode() -> None:
    pair = decode_envelope(b'{"eventName":"x.y","version":1,"data":"\\ud83d\\ude00"}')
    assert pair.data == "\U0001f600"
    text = decode_envelope(b'{"eventName":"x.y","version":1,"data":"\\\\ud800"}')
    assert text.data == "\\ud800"
