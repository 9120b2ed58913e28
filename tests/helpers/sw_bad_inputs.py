"""The bad-input catalogue: named requests and the answer each one must get.

A data module, not a test module: ``tests/test_bad_input.py`` runs every case through
the core (``process`` and ``aprocess``) and the ASGI adapter, and the Flask and Django
folders run the same cases through their test clients; each imports this module as
``sw_bad_inputs`` (``tests/helpers`` is on pytest's ``pythonpath``).

A case builds its :class:`Request` from a :class:`Signer` (the secret, organization and
clock of the receiver under test), so one table serves receivers with different
secrets. The expected answers follow the status contract (docs/status-codes.md) and the
module docstrings of ``service_webhooks/_signing.py`` and ``_envelope.py``:

* 405 ``method_not_allowed``: any method but POST, before anything else is looked at.
* 413 ``payload_too_large``: more than 1 MiB, declared or streamed.
* 401 ``format``: the header is missing, not ASCII, not exactly ``o``, ``t``, ``v``
  (repeated headers are joined with ``,`` and so have too many pairs), an empty or
  unprintable ``o``, or a ``t`` that is not 1-12 ASCII digits.
* 401 ``signature``: ``v`` is not the standard-base64 HMAC-SHA256 (32 bytes, padded)
  of ``body:o:t`` under an accepted secret.
* 401 ``timestamp``: a correct signature, but ``t`` more than 300 s from now.
* 400 ``malformed_envelope``: authentic, but not a UTF-8 JSON object with a non-empty
  string ``eventName``, an integer ``version`` and a ``data`` member; JSON extensions
  (NaN, comments, BOM) and numbers out of range are refused; nesting is bounded.
* 200 ``unhandled``: a valid envelope for an event nobody listens to (the catalogue
  uses such names, so no case touches a store or a handler). Duplicate keys: the last
  one wins, as with :mod:`json`. Content-Type and Content-Encoding are never read.

Nothing in the catalogue may be answered 5xx, and nothing may raise.
"""

# ruff: noqa: E501  (CASES is a table: one case a line reads best)

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SIGNATURE = "Service-Signature"
MAX = 1_048_576
PROBE_EVENT = "catalogue.probe"  # nobody handles it: a valid envelope answers 200 unhandled


@dataclass(frozen=True)
class Signer:
    """Signs like the service for one receiver: its secret, any organization, its clock."""

    secret: str
    org: str
    now: int

    def digest(self, body: bytes, *, org: str | None = None, t: str | None = None) -> bytes:
        suffix = f":{self.org if org is None else org}:{self.now if t is None else t}"
        return hmac.digest(self.secret.encode(), body + suffix.encode(), "sha256")

    def header(
        self,
        body: bytes,
        *,
        org: str | None = None,
        t: str | None = None,
        v: str | None = None,
        order: str = "otv",
    ) -> bytes:
        """``o:..,t:..,v:..`` over ``body`` (``v`` correct unless given), keys in ``order``."""
        values = {
            "o": self.org if org is None else org,
            "t": str(self.now) if t is None else t,
            "v": base64.b64encode(self.digest(body, org=org, t=t)).decode() if v is None else v,
        }
        return ",".join(f"{key}:{values[key]}" for key in order).encode()


@dataclass(frozen=True)
class Request:
    """One request as it is on the wire.

    ``headers`` are raw ``(name, value)`` pairs, repeated names allowed. ``chunked``
    sends the body without ``Content-Length``, in pieces of ``chunk_size`` bytes
    (``Transfer-Encoding: chunked``).
    """

    body: bytes = b""
    headers: tuple[tuple[str, bytes], ...] = ()
    method: str = "POST"
    content_type: str | None = "application/json"
    chunked: bool = False
    chunk_size: int = 65_536

    def signature(self) -> bytes | None:
        """What an adapter hands the core: repeated headers joined with ``,``."""
        values = [v for k, v in self.headers if k.lower() == SIGNATURE.lower()]
        return b",".join(values) if values else None

    def chunks(self) -> list[bytes]:
        size = self.chunk_size
        return [self.body[i : i + size] for i in range(0, len(self.body), size)] or [b""]

    def wire_headers(self) -> list[tuple[str, bytes]]:
        """Every header an HTTP client would send, Content-Type included."""
        headers = list(self.headers)
        if self.content_type is not None:
            headers.append(("Content-Type", self.content_type.encode("latin-1")))
        if self.chunked:
            headers.append(("Transfer-Encoding", b"chunked"))
        return headers


@dataclass(frozen=True)
class Case:
    """A named input and its documented answer.

    Attributes:
        wire: Can be sent through an HTTP test client (CR/LF in a header or a lowercase
            method cannot: clients refuse or normalise them).
        pinned_clock: Needs the receiver's clock to equal ``Signer.now`` exactly (the
            tolerance edges); only the core tests pin it.
        event_name: The ``eventName`` the core reports, when the case documents it.
    """

    name: str
    build: Callable[[Signer], Request]
    status: int
    reason: str
    wire: bool = True
    pinned_clock: bool = False
    event_name: str | None = None
    extra_headers: Mapping[str, str] = field(default_factory=dict)


def envelope(name: str = PROBE_EVENT, version: Any = 1, data: Any = None, **extra: Any) -> bytes:
    fields = {"eventName": name, "version": version, "data": {"id": "x"} if data is None else data}
    return json.dumps({**fields, **extra}, separators=(",", ":")).encode()


PROBE = envelope()
PREFIX = b'{"eventName":"catalogue.probe","version":1,"data":'


def signed(body: bytes, **options: Any) -> Callable[[Signer], Request]:
    """A POST of ``body`` with a correct signature (``options`` go to :class:`Request`)."""
    return lambda s: Request(body, ((SIGNATURE, s.header(body)),), **options)


def with_header(*values: bytes | Callable[[Signer], bytes], body: bytes = PROBE) -> Any:
    """A POST of ``body`` with these ``Service-Signature`` values (one header each)."""

    def build(s: Signer) -> Request:
        made = [v(s) if callable(v) else v for v in values]
        return Request(body, tuple((SIGNATURE, v) for v in made))

    return build


def header(**options: Any) -> Callable[[Signer], bytes]:
    return lambda s: s.header(PROBE, **options)


def v_of(transform: Callable[[bytes], str]) -> Callable[[Signer], bytes]:
    """The correct header, with ``v`` replaced by ``transform(correct digest)``."""
    return lambda s: s.header(PROBE, v=transform(s.digest(PROBE)))


def urlsafe_v(s: Signer) -> Request:
    """A body whose digest has ``+`` or ``/`` in standard base64, sent with the URL-safe
    alphabet (``-``, ``_``): not RFC 4648 §4 base64, so not the signature."""
    for nonce in range(1000):
        body = envelope(nonce=nonce)
        standard = base64.b64encode(s.digest(body)).decode()
        if "+" in standard or "/" in standard:
            urlsafe = base64.urlsafe_b64encode(s.digest(body)).decode()
            return Request(body, ((SIGNATURE, s.header(body, v=urlsafe)),))
    raise AssertionError("no digest with + or / in 1000 tries")  # pragma: no cover


def _unused_bits_set(v: str) -> str:
    """``v`` with the 2 unused low bits of its last character set: the same 32 bytes."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return v[:-2] + alphabet[alphabet.index(v[-2]) | 3] + "="


def t_shifted(seconds: int) -> Callable[[Signer], bytes]:
    return lambda s: s.header(PROBE, t=str(s.now + seconds))


@functools.cache
def exactly(size: int, filler: bytes = b" ") -> bytes:
    """A valid envelope of exactly ``size`` bytes whose ``data`` is a list of numbers."""
    numbers = b",".join(b"%d" % (i * 7919 % 1_000_000) for i in range(size // 4))
    body = PREFIX + b"[" + numbers
    body = body[: size - 200]
    body = body[: body.rindex(b",")] + b"]}"
    return body + filler * (size - len(body))


def gzipped(s: Signer) -> Request:
    body = gzip.compress(PROBE, mtime=0)
    return Request(body, ((SIGNATURE, s.header(body)), ("Content-Encoding", b"gzip")))


def _deep(depth: int, open_: bytes, close: bytes, inner: bytes = b"") -> bytes:
    return PREFIX + open_ * depth + inner + close * depth + b"}"


def _method(method: str, body: bytes = PROBE) -> Callable[[Signer], Request]:
    return lambda s: Request(body, ((SIGNATURE, s.header(body)),), method=method)


def _with_headers(*extra: tuple[str, bytes]) -> Callable[[Signer], Request]:
    return lambda s: Request(PROBE, ((SIGNATURE, s.header(PROBE)), *extra))


_F, _S, _T = (401, "format"), (401, "signature"), (401, "timestamp")
_BAD, _OK = (400, "malformed_envelope"), (200, "unhandled")
_BIG, _405 = (413, "payload_too_large"), (405, "method_not_allowed")
_ALLOW = {"allow": "POST"}


def _case(
    name: str, build: Callable[[Signer], Request], answer: tuple[int, str], **kw: Any
) -> Case:
    return Case(name, build, answer[0], answer[1], **kw)


CASES: list[Case] = [
    # -- a baseline: the catalogue's valid request is accepted -------------------------
    _case("baseline_valid_probe", signed(PROBE), _OK, event_name=PROBE_EVENT),
    # -- Service-Signature: presence and repetition --------------------------------------
    _case("header_missing", lambda s: Request(PROBE), _F),
    _case("header_empty", with_header(b""), _F),
    _case("header_only_spaces", with_header(b"   "), _F),
    _case("header_other_name_only", lambda s: Request(PROBE, (("X-Service-Signature", s.header(PROBE)),)), _F),
    _case("header_repeated_identical", with_header(header(), header()), _F),
    _case("header_repeated_second_empty", with_header(header(), b""), _F),
    _case("header_repeated_second_garbage", with_header(header(), b"x"), _F),
    _case("header_name_lowercase", lambda s: Request(PROBE, (("service-signature", s.header(PROBE)),)), _OK),
    # -- pair structure -------------------------------------------------------------------
    _case("pairs_two", with_header(lambda s: b",".join(s.header(PROBE).split(b",")[:2])), _F),
    _case("pairs_four_unknown_key", with_header(lambda s: s.header(PROBE) + b",x:1"), _F),
    _case("pairs_four_second_v", with_header(lambda s: s.header(PROBE) + b",v:AAAA"), _F),
    _case("pairs_trailing_comma", with_header(lambda s: s.header(PROBE) + b","), _F),
    _case("pairs_leading_comma", with_header(lambda s: b"," + s.header(PROBE)), _F),
    _case("pairs_duplicate_o", with_header(lambda s: s.header(PROBE).replace(b"t:", b"o:", 1)), _F),
    _case("pairs_duplicate_t_instead_of_v", with_header(lambda s: b"o:%s,t:%d,t:%d" % (s.org.encode(), s.now, s.now)), _F),
    _case("pairs_unknown_key_w", with_header(lambda s: s.header(PROBE).replace(b"v:", b"w:")), _F),
    _case("pairs_uppercase_keys", with_header(lambda s: s.header(PROBE).replace(b"o:", b"O:").replace(b"t:", b"T:")), _F),
    _case("pairs_space_after_comma", with_header(lambda s: s.header(PROBE).replace(b",", b", ")), _F),
    _case("pairs_space_around_colon", with_header(lambda s: s.header(PROBE).replace(b"o:", b"o :")), _F),
    _case("pairs_no_colons", with_header(b"o,t,v"), _F),
    _case("pairs_equals_instead_of_colon", with_header(lambda s: s.header(PROBE).replace(b":", b"=", 3)), _F),
    _case("pairs_semicolon_separated", with_header(lambda s: s.header(PROBE).replace(b",", b";")), _F),
    _case("pairs_any_order_tvo", lambda s: Request(PROBE, ((SIGNATURE, s.header(PROBE, order="tvo")),)), _OK),
    _case("pairs_any_order_vto", lambda s: Request(PROBE, ((SIGNATURE, s.header(PROBE, order="vto")),)), _OK),
    # -- empty, huge, non-ASCII, control characters ---------------------------------------
    _case("o_empty", with_header(lambda s: s.header(PROBE, org="")), _F),
    _case("t_empty", with_header(lambda s: s.header(PROBE, t="")), _F),
    _case("v_empty", with_header(header(v="")), _S),
    _case("all_values_empty", with_header(b"o:,t:,v:"), _F),
    _case("header_huge_8_kib", with_header(lambda s: s.header(PROBE, org="o" * 8192)), _F),
    _case("header_huge_v_5_kib", with_header(header(v="A" * 5000)), _F),
    _case("o_long_but_signed_1000", with_header(lambda s: s.header(PROBE, org="o" * 1000)), _OK),
    _case("o_with_colon_signed", with_header(lambda s: s.header(PROBE, org="o:sub")), _OK),
    _case("o_non_ascii_utf8", with_header(lambda s: s.header(PROBE, org="\u00f6rg")), _F),
    _case("o_latin1_byte", with_header(lambda s: s.header(PROBE).replace(b"o:", b"o:\xe9", 1)), _F),
    _case("v_non_ascii", with_header(lambda s: s.header(PROBE) + "\u00e9".encode()), _F),
    _case("o_control_soh", with_header(lambda s: s.header(PROBE, org="a\x01b")), _F),
    _case("o_control_nul", with_header(lambda s: s.header(PROBE, org="a\x00b")), _F),
    _case("o_control_tab", with_header(lambda s: s.header(PROBE, org="a\tb")), _F),
    _case("o_control_del", with_header(lambda s: s.header(PROBE, org="a\x7fb")), _F),
    _case("o_control_escape", with_header(lambda s: s.header(PROBE, org="a\x1b[31mb")), _F),
    _case("o_newline", with_header(lambda s: s.header(PROBE, org="a\nb")), _F, wire=False),
    _case("o_carriage_return", with_header(lambda s: s.header(PROBE, org="a\rb")), _F, wire=False),
    # -- t ---------------------------------------------------------------------------------
    _case("t_negative", with_header(lambda s: s.header(PROBE, t=str(-s.now))), _F),
    _case("t_minus_zero", with_header(header(t="-0")), _F),
    _case("t_huge_13_digits", with_header(header(t="1" * 13)), _F),
    _case("t_huge_400_digits", with_header(header(t="9" * 400)), _F),
    _case("t_float", with_header(lambda s: s.header(PROBE, t=f"{s.now}.0")), _F),
    _case("t_exponent", with_header(header(t="1.7e9")), _F),
    _case("t_leading_plus", with_header(lambda s: s.header(PROBE, t=f"+{s.now}")), _F),
    _case("t_leading_space", with_header(lambda s: s.header(PROBE, t=f" {s.now}")), _F),
    _case("t_hex", with_header(lambda s: s.header(PROBE, t=hex(s.now))), _F),
    _case("t_underscores", with_header(lambda s: s.header(PROBE, t=f"{s.now:_}")), _F),
    _case("t_arabic_indic_digits", with_header(header(t="\u0661\u0667")), _F),
    _case("t_superscript_digit", with_header(header(t="\u00b2")), _F),
    _case("t_leading_zero_signed", with_header(lambda s: s.header(PROBE, t=f"0{s.now}")), _OK),
    _case("t_leading_zeros_over_12_digits", with_header(lambda s: s.header(PROBE, t=f"000{s.now}")), _F),
    _case("t_leading_zeros_not_signed", with_header(lambda s: s.header(PROBE).replace(b"t:", b"t:0", 1)), _S),
    _case("t_zero", with_header(header(t="0")), _T),
    _case("t_twelve_digits_far_future", with_header(header(t="999999999999")), _T),
    _case("t_401_s_old", with_header(t_shifted(-401)), _T),
    _case("t_401_s_ahead", with_header(t_shifted(+401)), _T),
    _case("t_290_s_old", with_header(t_shifted(-290)), _OK),
    _case("t_290_s_ahead", with_header(t_shifted(+290)), _OK),
    _case("t_300_s_old_edge", with_header(t_shifted(-300)), _OK, pinned_clock=True),
    _case("t_300_s_ahead_edge", with_header(t_shifted(+300)), _OK, pinned_clock=True),
    _case("t_301_s_old_edge", with_header(t_shifted(-301)), _T, pinned_clock=True),
    _case("t_301_s_ahead_edge", with_header(t_shifted(+301)), _T, pinned_clock=True),
    # -- v -----------------------------------------------------------------------------------
    _case("v_urlsafe_alphabet", urlsafe_v, _S),
    _case("v_missing_padding", with_header(v_of(lambda d: base64.b64encode(d).decode().rstrip("="))), _S),
    _case("v_extra_padding", with_header(v_of(lambda d: base64.b64encode(d).decode() + "==")), _S),
    _case("v_31_byte_digest", with_header(v_of(lambda d: base64.b64encode(d[:31]).decode())), _S),
    _case("v_33_byte_digest", with_header(v_of(lambda d: base64.b64encode(d + b"\0").decode())), _S),
    _case("v_64_byte_digest_twice", with_header(v_of(lambda d: base64.b64encode(d + d).decode())), _S),
    _case("v_non_canonical_unused_bits_set", with_header(v_of(lambda d: _unused_bits_set(base64.b64encode(d).decode()))), _S),
    _case("v_hex_digest", with_header(v_of(lambda d: d.hex())), _S),
    _case("v_inner_space", with_header(v_of(lambda d: base64.b64encode(d).decode()[:20] + " " + base64.b64encode(d).decode()[20:])), _S),
    _case("v_not_base64", with_header(header(v="!!!!not-base64!!!!")), _S),
    _case("v_zero_digest", with_header(header(v=base64.b64encode(bytes(32)).decode())), _S),
    _case("v_sha1_hmac", with_header(v_of(lambda d: base64.b64encode(hashlib.sha1(d, usedforsecurity=False).digest()).decode())), _S),
    _case("v_wrong_secret", with_header(lambda s: replace(s, secret=s.secret + "x").header(PROBE)), _S),
    _case("v_for_other_org", with_header(lambda s: s.header(PROBE, v=base64.b64encode(s.digest(PROBE, org="other")).decode())), _S),
    _case("v_for_other_body", with_header(lambda s: s.header(PROBE, v=base64.b64encode(s.digest(PROBE + b" ")).decode())), _S),
    _case("body_changed_after_signing", lambda s: Request(PROBE + b" ", ((SIGNATURE, s.header(PROBE)),)), _S),
    # -- bodies (correctly signed) ----------------------------------------------------------
    _case("body_empty", signed(b""), _BAD),
    _case("body_whitespace", signed(b" \r\n\t "), _BAD),
    _case("body_utf8_bom", signed(b"\xef\xbb\xbf" + PROBE), _BAD),
    _case("body_utf16", signed(json.dumps(json.loads(PROBE)).encode("utf-16")), _BAD),
    _case("body_invalid_utf8_in_name", signed(b'{"eventName":"x\xff","version":1,"data":1}'), _BAD),
    _case("body_invalid_utf8_in_data", signed(PREFIX + b'"\xc3\x28"}'), _BAD),
    _case("body_overlong_utf8", signed(PREFIX + b'"\xc0\xaf"}'), _BAD),
    _case("body_utf8_encoded_surrogate", signed(PREFIX + b'"\xed\xa0\x80"}'), _BAD),
    _case("body_lone_high_surrogate_escape", signed(PREFIX + b'"\\ud800"}'), _BAD),
    _case("body_lone_low_surrogate_escape", signed(PREFIX + b'"\\udc00x"}'), _BAD),
    _case("body_lone_surrogate_escape_in_known_event_data", signed(b'{"eventName":"note.created","version":1,"data":{"id":"\\ud83d","author":"a@example.com","text":"t"}}'), _BAD),
    _case("body_overlong_utf8_in_unknown_field", signed(b'{"eventName":"catalogue.probe","version":1,"x":"\xc0\xaf","data":1}'), _BAD),
    _case("body_encoded_surrogate_in_unknown_field", signed(b'{"eventName":"catalogue.probe","version":1,"x":"\xed\xa0\x80","data":1}'), _BAD),
    _case("body_truncated_utf8_in_unknown_field", signed(b'{"eventName":"catalogue.probe","version":1,"x":"\xe2\x82","data":1}'), _BAD),
    _case("body_lone_continuation_byte_in_unknown_field", signed(b'{"eventName":"catalogue.probe","version":1,"x":"\x80","data":1}'), _BAD),
    _case("body_above_u10ffff_in_unknown_field", signed(b'{"eventName":"catalogue.probe","version":1,"x":"\xf4\x90\x80\x80","data":1}'), _BAD),
    _case("body_invalid_utf8_in_unknown_key", signed(b'{"eventName":"catalogue.probe","version":1,"\xff":1,"data":1}'), _BAD),
    _case("body_overlong_utf8_in_unknown_nested_field", signed(b'{"eventName":"catalogue.probe","version":1,"x":{"y":["\xc0\xaf"]},"data":1}'), _BAD),
    _case("body_overlong_utf8_in_known_event_unknown_data_field", signed(b'{"eventName":"note.created","version":1,"data":{"id":"n","author":"a@example.com","text":"t","x":"\xc0\xaf"}}'), _BAD),
    _case("body_encoded_surrogate_in_known_event_unknown_data_field", signed(b'{"eventName":"note.created","version":1,"data":{"id":"n","author":"a@example.com","text":"t","x":"\xed\xa0\x80"}}'), _BAD),
    _case("body_truncated_utf8_in_known_event_unknown_data_field", signed(b'{"eventName":"note.created","version":1,"data":{"id":"n","author":"a@example.com","text":"t","x":"\xf0\x9f\x98"}}'), _BAD),
    _case("body_valid_multibyte_utf8_in_unknown_field_accepted", signed('{"eventName":"catalogue.probe","version":1,"x":"\u00e9\u20ac\U0001f600","data":1}'.encode()), _OK),
    _case("body_lone_surrogate_escape_in_data", signed(PREFIX + b'"\\ud800"}'), _BAD),
    _case("body_lone_surrogate_escape_in_name", signed(b'{"eventName":"x\\udc00","version":1,"data":1}'), _BAD),
    _case("body_nan", signed(PREFIX + b"NaN}"), _BAD),
    _case("body_infinity", signed(PREFIX + b"Infinity}"), _BAD),
    _case("body_negative_infinity", signed(PREFIX + b"-Infinity}"), _BAD),
    _case("body_float_out_of_range", signed(PREFIX + b"1e400}"), _BAD),
    _case("body_huge_integer_data_5000_digits", signed(PREFIX + b"9" * 5000 + b"}"), _BAD),
    _case("body_huge_integer_version_5000_digits", signed(b'{"eventName":"catalogue.probe","data":1,"version":' + b"9" * 5000 + b"}"), _BAD),
    _case("body_integer_4300_digits_accepted", signed(PREFIX + b"9" * 4300 + b"}"), _OK),
    _case("body_version_2_pow_64", signed(envelope(version=2**64)), _OK),
    _case("body_duplicate_event_name_last_wins", signed(b'{"eventName":"note.created","eventName":"catalogue.probe","version":1,"data":5}'), _OK, event_name=PROBE_EVENT),
    _case("body_duplicate_version_last_is_string", signed(b'{"eventName":"catalogue.probe","version":1,"version":"1","data":1}'), _BAD),
    _case("body_nested_arrays_100k", signed(_deep(100_000, b"[", b"]")), _BAD),
    _case("body_nested_objects_100k", signed(_deep(100_000, b'{"a":', b"}", b"1")), _BAD),
    _case("body_nested_arrays_100k_known_event", signed(_deep(100_000, b"[", b"]").replace(PROBE_EVENT.encode(), b"note.created")), _BAD),
    _case("body_nested_arrays_500_accepted", signed(_deep(500, b"[", b"]")), _OK),
    _case("body_1_mib_of_numbers", signed(exactly(MAX)), _OK),
    _case("body_1_mib_plus_one", signed(exactly(MAX + 1)), _BIG),
    _case("body_1_mib_plus_one_chunked", signed(exactly(MAX + 1), chunked=True), _BIG),
    _case("body_2_mib_chunked", signed(exactly(2 * MAX), chunked=True), _BIG),
    _case("body_version_true", signed(envelope(version=True)), _BAD),
    _case("body_version_float", signed(envelope(version=1.0)), _BAD),
    _case("body_version_string", signed(envelope(version="1")), _BAD),
    _case("body_version_null", signed(envelope(version=None)), _BAD),
    _case("body_version_missing", signed(b'{"eventName":"catalogue.probe","data":1}'), _BAD),
    _case("body_version_negative", signed(envelope(version=-1)), _OK),
    _case("body_event_name_empty", signed(envelope(name="")), _BAD),
    _case("body_event_name_number", signed(envelope(name=7)), _BAD),
    _case("body_event_name_missing", signed(b'{"version":1,"data":1}'), _BAD),
    _case("body_event_name_escaped_nul", signed(b'{"eventName":"a\\u0000b","version":1,"data":1}'), _OK, event_name="a\x00b"),
    _case("body_raw_nul_in_string", signed(b'{"eventName":"a\x00b","version":1,"data":1}'), _BAD),
    _case("body_data_missing", signed(b'{"eventName":"catalogue.probe","version":1}'), _BAD),
    _case("body_data_null", signed(PREFIX + b"null}"), _OK),
    _case("body_unknown_fields_ignored", signed(envelope(extra={"a": [1]}, id="e-1")), _OK),
    _case("body_top_level_array", signed(b"[" + PROBE + b"]"), _BAD),
    _case("body_top_level_string", signed(b'"catalogue.probe"'), _BAD),
    _case("body_top_level_number", signed(b"1"), _BAD),
    _case("body_top_level_null", signed(b"null"), _BAD),
    _case("body_trailing_garbage", signed(PROBE + b"x"), _BAD),
    _case("body_two_objects", signed(PROBE + PROBE), _BAD),
    _case("body_truncated", signed(PROBE[:-1]), _BAD),
    _case("body_comment", signed(b"/* hi */" + PROBE), _BAD),
    _case("body_single_quotes", signed(PROBE.replace(b'"', b"'")), _BAD),
    _case("body_trailing_comma", signed(PROBE[:-1] + b",}"), _BAD),
    _case("body_form_encoded", signed(b"eventName=catalogue.probe&version=1&data=1"), _BAD),
    _case("body_known_event_wrong_data_type", signed(envelope(name="note.created", data=5)), _BAD),
    _case("body_known_event_missing_field", signed(envelope(name="note.created", data={"id": "n"})), _BAD),
    _case("body_gzip_encoded", gzipped, _BAD),
    # -- methods ---------------------------------------------------------------------------------
    _case("method_get", _method("GET", b""), _405, extra_headers=_ALLOW),
    _case("method_get_signed", _method("GET"), _405, extra_headers=_ALLOW),
    _case("method_put", _method("PUT"), _405, extra_headers=_ALLOW),
    _case("method_patch", _method("PATCH"), _405, extra_headers=_ALLOW),
    _case("method_delete", _method("DELETE"), _405, extra_headers=_ALLOW),
    _case("method_options", _method("OPTIONS", b""), _405, extra_headers=_ALLOW),
    _case("method_head", _method("HEAD", b""), _405, extra_headers=_ALLOW),
    _case("method_propfind", _method("PROPFIND"), _405, extra_headers=_ALLOW),
    _case("method_get_oversized", _method("GET", exactly(MAX + 1)), _405, extra_headers=_ALLOW),
    _case("method_lowercase_post", _method("post"), _405, wire=False, extra_headers=_ALLOW),
    _case("method_empty", _method(""), _405, wire=False, extra_headers=_ALLOW),
    # -- content types and transfer encodings (never read: the signature decides) --------------
    _case("content_type_missing", signed(PROBE, content_type=None), _OK),
    _case("content_type_text_plain", signed(PROBE, content_type="text/plain"), _OK),
    _case("content_type_form_urlencoded", signed(PROBE, content_type="application/x-www-form-urlencoded"), _OK),
    _case("content_type_multipart", signed(PROBE, content_type="multipart/form-data; boundary=xyz"), _OK),
    _case("content_type_json_latin1", signed(PROBE, content_type="application/json; charset=latin-1"), _OK),
    _case("content_type_garbage", signed(PROBE, content_type="???/;;;"), _OK),
    _case("transfer_encoding_chunked", signed(PROBE, chunked=True, chunk_size=16), _OK),
    _case("transfer_encoding_chunked_one_byte_pieces", signed(PROBE, chunked=True, chunk_size=1), _OK),
    _case("content_encoding_gzip_header_plain_body", _with_headers(("Content-Encoding", b"gzip")), _OK),
]  # fmt: skip

NAMES = [case.name for case in CASES]
assert len(set(NAMES)) == len(NAMES), "case names must be unique"

WIRE = [case for case in CASES if case.wire and not case.pinned_clock]
"""The cases an HTTP test client can carry against a receiver on the real clock."""


def check(case: Case, method: str, status: int, headers: Mapping[str, str], body: bytes) -> None:
    """Assert an HTTP answer (``headers`` with lowercase names) is the case's documented one."""
    assert status == case.status, (case.name, status, body[:200])
    assert status < 500
    assert not 300 <= status < 400
    for name, value in case.extra_headers.items():
        assert headers.get(name) == value, (case.name, dict(headers))
    if method.upper() != "HEAD":  # a HEAD answer has no body
        assert headers.get("content-type", "").startswith("application/json"), case.name
        assert json.loads(body) == {"status": case.status, "reason": case.reason}, case.name


def now() -> int:
    """The current Unix time, for a :class:`Signer` facing a receiver on the real clock."""
    return int(time.time())
