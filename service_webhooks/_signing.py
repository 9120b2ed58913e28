"""``Service-Signature``: parse, sign and verify over raw bytes (spec §5.2).

The rule, from spec §5.2:

1. The header value is exactly three comma-separated ``key:value`` pairs with the keys
   ``o`` (organization ID), ``t`` (Unix seconds, base-10 digits) and ``v`` (standard
   base64, RFC 4648 §4), in any order. Each pair splits at its first colon. A missing,
   duplicate or unknown key, an empty ``o`` or a non-digit ``t`` is a format error.
2. The signed bytes are ``raw_body + b":" + o + b":" + t``, with ``t`` exactly as sent.
   The body is fed to the HMAC as is and the ``:o:t`` suffix separately: never copied,
   never decoded.
3. HMAC-SHA256 keyed with each accepted secret (newest first; a secret past its stop
   date is skipped); ``v`` compared with :func:`hmac.compare_digest` to the digest's
   base64 (RFC 4648 §4), the one spelling of 32 bytes accepted. An undecodable ``v`` is
   a mismatch, like a wrong one, and so is a non-canonical one (set bits after the last
   byte: another spelling of the same digest), so that no change to ``v`` is ever
   accepted.
4. ``abs(floor(now) - t) > tolerance`` is rejected, in both directions (clock skew):
   ``t`` is whole seconds, so the clock is read in whole seconds too, and a difference
   equal to the tolerance is accepted (spec §5.2: rejected when "greater than five
   minutes"). So at any instant of second ``N``, ``t = N - 300`` and ``t = N + 300``
   pass and ``N - 301`` and ``N + 301`` do not: the same 300 s each way (comparing the
   exact reading would refuse ``N - 300`` as soon as the clock is past ``N.0``). A
   correct signature does not excuse an old timestamp. The clock is :func:`time.time`
   looked up at call time, so ``freezegun`` works; pass ``now`` to pin it.

Everything here is pure: no I/O, no logging.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from hmac import compare_digest
from math import floor
from typing import Any

import msgspec

from ._credentials import Secret, SecretLike, SecretResolver, signable_organization, to_secrets
from ._exceptions import (
    ConfigurationError,
    SignatureFormatError,
    SignatureMismatchError,
    TimestampError,
    UnknownOrganizationError,
)

__all__ = [
    "DEFAULT_TOLERANCE",
    "SIGNATURE_HEADER",
    "SignatureHeader",
    "compute_signature",
    "parse_signature_header",
    "sign",
    "verify",
]

SIGNATURE_HEADER = "Service-Signature"
"""Name of the header that carries the signature (spec §5.2, §6.1)."""

DEFAULT_TOLERANCE = 300
"""Accepted difference between ``t`` and now, in seconds (spec §5.2, §8: five minutes)."""

_MAX_HEADER_LENGTH = 4096  # far above any real header; bounds the work on garbage
_MAX_T_DIGITS = 12  # Unix seconds until the year 33658
_SERVICE_ORDER = re.compile(r"o:([^,]*),t:([0-9]{1,12}),v:([^,]*)(?<![ \t])").fullmatch
"""``o:…,t:…,v:…`` as the service writes it (no comma inside a value, ``t`` 1-12 ASCII
digits, no space or tab around the whole): one C call instead of splitting and slicing
(about 140 ns less per header), and no test for that whitespace first."""
_DIGEST_SIZE = hashlib.sha256().digest_size
_OWS = " \t"  # optional whitespace around a header value (RFC 9110 §5.6.3)


class SignatureHeader(msgspec.Struct, frozen=True):
    """A parsed ``Service-Signature`` value.

    Attributes:
        organization_id: ``o``, the account that sent the delivery.
        timestamp: ``t`` as an integer, Unix seconds.
        timestamp_text: ``t`` exactly as sent; it is what was signed.
        signature: ``v`` exactly as sent (base64 text, not yet decoded).
    """

    organization_id: str
    timestamp: int
    timestamp_text: str
    signature: str

    def signed_suffix(self) -> bytes:
        """The bytes signed after the body: ``b":" + o + b":" + t`` (UTF-8)."""
        return f":{self.organization_id}:{self.timestamp_text}".encode()


def parse_signature_header(value: str | bytes | None) -> SignatureHeader:
    """Parse a ``Service-Signature`` header value strictly (spec §5.2 step 1).

    Args:
        value: The header value as ``str`` or raw ``bytes`` (decoded as ASCII), or
            ``None`` when the request had no such header.

    Returns:
        The parsed :class:`SignatureHeader`.

    Spaces and tabs around the whole value are not part of it (RFC 9110 §5.5) and
    are ignored; inside it, nothing is.

    Raises:
        SignatureFormatError: Missing, empty, too long, not ASCII, not exactly the
            three pairs ``o``, ``t``, ``v``, duplicate or unknown key, empty ``o``,
            or ``t`` not 1-12 base-10 digits.
    """
    if value is None:
        raise SignatureFormatError(f"missing {SIGNATURE_HEADER} header")
    if len(value) > _MAX_HEADER_LENGTH:
        raise SignatureFormatError(f"{SIGNATURE_HEADER} header is too long")
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            raise SignatureFormatError(f"{SIGNATURE_HEADER} header is not ASCII") from None
    elif not value.isascii():
        raise SignatureFormatError(f"{SIGNATURE_HEADER} header is not ASCII")
    match = _SERVICE_ORDER(value)  # the service's order, each value well-formed: done
    if match is not None:
        organization_id, t, v = match.groups()
        if organization_id and organization_id.isprintable():
            return SignatureHeader(organization_id, int(t), t, v)
    if value[-1:] in _OWS or value[:1] in _OWS:  # never in the service's order above
        # Whitespace around a field value is not part of it (RFC 9110 §5.5), but some
        # servers pass it on (uvicorn on httptools keeps what follows the value).
        value = value.strip(_OWS)
    pairs = value.split(",")  # any other spelling: the general parse, which names the fault
    if len(pairs) != 3:
        raise SignatureFormatError(
            f"{SIGNATURE_HEADER} must hold exactly 3 key:value pairs, got {len(pairs)}"
        )
    organization_id, t, v = _pairs_in_any_order(pairs)
    if not organization_id or not organization_id.isprintable():
        raise SignatureFormatError(f"{SIGNATURE_HEADER} o is empty or not printable")
    if not (t.isdigit() and len(t) <= _MAX_T_DIGITS):
        raise SignatureFormatError(f"{SIGNATURE_HEADER} t is not a Unix time in seconds")
    return SignatureHeader(organization_id, int(t), t, v)


def _pairs_in_any_order(pairs: list[str]) -> tuple[str, str, str]:
    """``(o, t, v)`` from three pairs in any order; each splits at its first colon."""
    organization_id = t = v = None
    for pair in pairs:
        key, colon, item = pair.partition(":")
        if not colon:
            key = pair + "?"  # no colon: not a pair at all
        if key == "o" and organization_id is None:
            organization_id = item
        elif key == "t" and t is None:
            t = item
        elif key == "v" and v is None:
            v = item
        elif key in ("o", "t", "v"):
            raise SignatureFormatError(f"{SIGNATURE_HEADER} repeats the key {key!r}")
        else:
            raise SignatureFormatError(f"{SIGNATURE_HEADER} pair {key[:16]!r} is not o, t or v")
    if organization_id is None or t is None or v is None:  # pragma: no cover - 3 distinct keys
        raise SignatureFormatError(f"{SIGNATURE_HEADER} lacks one of o, t, v")
    return organization_id, t, v


def compute_signature(body: bytes, secret: Secret | SecretLike, suffix: bytes) -> bytes:
    """Return the raw HMAC-SHA256 digest (32 bytes) of ``body + suffix``.

    Args:
        body: The exact raw request body.
        secret: The signing secret (``str`` is UTF-8 encoded).
        suffix: ``b":" + o + b":" + t`` (see :meth:`SignatureHeader.signed_suffix`).
    """
    return _digest(
        body, secret.value if isinstance(secret, Secret) else Secret(secret).value, suffix
    )


def _digest(body: bytes, key: bytes, suffix: bytes) -> bytes:
    # HMAC-SHA256 as RFC 2104 defines it, over hashlib's SHA-256:
    # SHA256((K ^ opad) + SHA256((K ^ ipad) + body + suffix)). The two keyed states are
    # hashed once per secret and copied per message, and the body is streamed, never
    # copied to append the suffix. Not a copied hmac.new object: under OpenSSL 3 an
    # HMAC goes through the EVP_MAC layer, whose context copy and finish cost more
    # (0.90 against 0.78 µs per 200 B message, timed alone in one process); not the
    # one-shot hmac.digest either, slower still (it looks the MAC and the digest up by
    # name on every call). Tested equal to hmac.new for keys shorter and longer than B.
    pads = _KEYED.get(key)
    if pads is None:
        pads = _keyed(key)
    inner = pads[0].copy()
    inner.update(body)
    inner.update(suffix)
    outer = pads[1].copy()
    outer.update(inner.digest())
    digest: bytes = outer.digest()
    return digest


_BLOCK_SIZE = hashlib.sha256().block_size  # RFC 2104's B: 64 bytes
_INNER_PAD = bytes(byte ^ 0x36 for byte in range(256))  # RFC 2104's ipad, as a translation
_OUTER_PAD = bytes(byte ^ 0x5C for byte in range(256))  # and opad
_KEYED: dict[bytes, tuple[Any, Any]] = {}  # secret -> SHA-256 fed K ^ ipad, fed K ^ opad
_MAX_KEYED = 256  # secrets kept keyed; a resolver serving more starts over when full


def _keyed(key: bytes) -> tuple[Any, Any]:
    """SHA-256 states fed ``K ^ ipad`` and ``K ^ opad`` (RFC 2104 §2), to be copied per
    message; ``K`` is the key zero-padded to 64 bytes, or its SHA-256 when longer."""
    shortened = hashlib.sha256(key).digest() if len(key) > _BLOCK_SIZE else key
    block = shortened.ljust(_BLOCK_SIZE, b"\0")
    pads = (
        hashlib.sha256(block.translate(_INNER_PAD)),
        hashlib.sha256(block.translate(_OUTER_PAD)),
    )
    if len(_KEYED) >= _MAX_KEYED:
        _KEYED.clear()
    _KEYED[key] = pads
    return pads


def require_body_bytes(body: object) -> None:
    """Refuse a body that is not ``bytes``, naming its type: the signature covers the
    exact bytes, so a decoded ``str`` cannot be checked, and hashlib's own message
    ("Strings must be encoded before hashing") does not say which argument is wrong.

    Raises:
        TypeError: ``body`` is not ``bytes``.
    """
    if isinstance(body, bytes):
        return
    if isinstance(body, str):
        hint = ": pass the raw bytes as received (a body you build: its .encode())"
    elif isinstance(body, (bytearray, memoryview)):
        hint = ": pass bytes(body)"
    else:
        hint = ""
    raise TypeError(
        f"body must be the exact request body as bytes, not {type(body).__name__}{hint}"
    )


def sign(
    body: bytes,
    secret: Secret | SecretLike,
    organization_id: str,
    *,
    timestamp: int | None = None,
) -> str:
    """Sign ``body`` the way the service does and return the header value.

    Args:
        body: The exact bytes that will be sent as the request body.
        secret: The endpoint's signing secret.
        organization_id: The ``o`` value: the sending account's organization ID.
        timestamp: ``t``, Unix seconds as an ``int`` (not a ``float`` or a ``bool``);
            defaults to ``int(time.time())``.

    Returns:
        ``"o:<org>,t:<unix seconds>,v:<base64 HMAC-SHA256>"`` for the
        ``Service-Signature`` header.

    Raises:
        TypeError: ``body`` is not ``bytes``.
        SignatureFormatError: ``organization_id`` is empty, not printable ASCII or
            contains ``,``, or ``timestamp`` is not an ``int``, negative or over 12
            digits: the header could not be parsed back.
    """
    require_body_bytes(body)
    if not signable_organization(organization_id):
        raise SignatureFormatError("organization_id must be non-empty printable ASCII, without ','")
    t = int(time.time()) if timestamp is None else timestamp
    if not isinstance(t, int) or isinstance(t, bool):  # "1.5", "True": t its parser refuses
        raise SignatureFormatError(
            "timestamp must be an int of Unix seconds, e.g. int(time.time()), "
            f"not {type(t).__name__}"
        )
    if not 0 <= t < 10**_MAX_T_DIGITS:
        hint = f" ({t} looks like milliseconds: divide by 1000)" if 13 <= len(str(t)) <= 14 else ""
        raise SignatureFormatError(
            f"timestamp must be a non-negative Unix time in seconds, of at most "
            f"{_MAX_T_DIGITS} digits{hint}"
        )
    digest = compute_signature(body, secret, f":{organization_id}:{t}".encode())
    return f"o:{organization_id},t:{t},v:{base64.b64encode(digest).decode('ascii')}"


_CANONICAL_LAST = frozenset("AEIMQUYcgkosw048")  # base64 digits whose 2 low bits are 0
_V_LENGTH = 44  # base64 of 32 bytes: 43 digits and one "="


def _decode_v(v: str) -> bytes | None:
    """The 32 bytes ``v`` spells in canonical base64, else ``None`` (:func:`check` asks
    only to word a mismatch).

    Canonical: 44 characters, and the last digit before the ``=`` leaves the two
    unused bits at zero (RFC 4648 §3.5); strict decoding checks the alphabet and the
    padding (§4). Any other spelling of a digest is refused, not normalized.
    """
    if len(v) != _V_LENGTH or v[42] not in _CANONICAL_LAST:
        return None
    try:
        raw = binascii.a2b_base64(v, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == _DIGEST_SIZE else None


def verify(
    body: bytes,
    header: str | bytes | SignatureHeader | None,
    secrets: SecretResolver | SecretLike | Sequence[SecretLike],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> SignatureHeader:
    """Authenticate one delivery (spec §5.2 steps 1-5).

    Args:
        body: The exact raw request body, as received.
        header: The ``Service-Signature`` value (or an already parsed one); ``None``
            when absent.
        secrets: The accepted secrets, newest first (each a :class:`Secret`, a
            ``str`` or ``bytes``; one alone too), or a resolver that finds them from
            the organization ID ``o``.
        tolerance: Largest accepted ``abs(now - t)``, in seconds (default 300):
            a finite ``int`` or ``float``, ``>= 0``.
        now: The current Unix time in seconds (``float``); defaults to
            :func:`time.time`. Compared in whole seconds (``floor(now)``) with ``t``,
            which is whole seconds, and exactly with a secret's stop date.

    Returns:
        The parsed header, once the signature and the timestamp both check out.

    Raises:
        TypeError: ``body`` is not ``bytes``.
        ConfigurationError: ``tolerance`` is not a finite number ``>= 0`` (NaN or
            infinity would turn the timestamp check off), or ``secrets`` holds a value
            :class:`Secret` refuses, or none.
        SignatureFormatError: The header is missing or malformed.
        UnknownOrganizationError: The resolver knows no secret for ``o``.
        SignatureMismatchError: No active secret yields ``v``.
        TimestampError: ``t`` is more than ``tolerance`` seconds from ``now``.
    """
    if type(tolerance) is not int or tolerance < 0:  # the default passes one test
        check_tolerance(tolerance)
    if isinstance(header, str):  # the usual case, and the cheapest test: an exact type
        parsed = parse_signature_header(header)
    else:
        parsed = header if isinstance(header, SignatureHeader) else parse_signature_header(header)
    if now is None:
        now = time.time()
    candidates: Sequence[Secret] | None
    if callable(secrets):  # a resolver (first: the prepared, fastest way)
        candidates = secrets(parsed.organization_id)
    elif isinstance(secrets, (list, tuple)) and secrets and all(type(s) is Secret for s in secrets):
        candidates = secrets
    else:  # one secret alone (a str is a Sequence), or "k" as well as Secret("k")
        candidates = to_secrets(secrets)
    if candidates is None:
        raise UnknownOrganizationError(
            f"no secret is configured for organization {parsed.organization_id!r}"
        )
    try:
        check(body, parsed, candidates, tolerance, now)
    except TypeError:  # free unless raised: name a body of the wrong type
        require_body_bytes(body)
        raise
    return parsed


_LARGEST_FLOAT = sys.float_info.max


def check_tolerance(tolerance: object) -> None:
    """Refuse a ``tolerance`` that is not a finite ``int`` or ``float`` ``>= 0`` (a bool,
    a string, NaN or infinity: the last two would turn the timestamp check off), or an
    ``int`` too large for a ``float`` (the receiver's ``repr`` and the timestamp error's
    message format it as one: they raised ``OverflowError``).

    Raises:
        ConfigurationError: Naming the parameter and what it must be.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)):
        raise ConfigurationError(
            "tolerance must be a finite number of seconds >= 0 (an int or float), "
            f"not {type(tolerance).__name__}"
        )
    if isinstance(tolerance, int) and tolerance > _LARGEST_FLOAT:  # 10**400: no float
        raise ConfigurationError(
            "tolerance must be a finite number of seconds >= 0, not an int too large for "
            "a float (300 is five minutes)"
        )
    if not (tolerance >= 0 and (isinstance(tolerance, int) or math.isfinite(tolerance))):
        raise ConfigurationError(
            f"tolerance must be a finite number of seconds >= 0, not {tolerance!r}"
        )


def _retired_match(
    body: bytes, suffix: bytes, v: bytes, candidates: Sequence[Secret], now: float
) -> str:
    """For a refused signature's detail (the log line, never the answer): whether a
    secret past its stop date made it, and that date. After a rotation's stop date, an
    operator reading ``401 signature`` can then tell the service's retries signed with the
    old secret from a wrong or missing secret. Only on the refusal path, never for a
    delivery that verifies."""
    for secret in candidates:
        if (
            secret.not_after is not None
            and now > secret.not_after
            and compare_digest(
                binascii.b2a_base64(_digest(body, secret.value, suffix), newline=False), v
            )
        ):
            return f": it was made with a secret past its stop date ({_utc(secret.not_after)})"
    return ""


def _utc(seconds: float) -> str:
    """Unix seconds as ISO 8601 UTC, or the number itself out of ``datetime``'s range."""
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"{seconds:g} Unix seconds"


def check(
    body: bytes,
    parsed: SignatureHeader,
    candidates: Sequence[Secret],
    tolerance: float,
    now: float,
) -> None:
    """:func:`verify` once the header is parsed and the secrets are known (spec §5.2
    steps 2-5): the receiver's hot path calls this directly.

    Raises:
        SignatureMismatchError: No active secret yields ``v``, or ``v`` is not a
            canonical base64 HMAC-SHA256 digest. When a secret past its stop date
            yields it, the message says so, with that date (never the secret).
        TimestampError: ``t`` is more than ``tolerance`` seconds from ``now``.
    """
    # v against each digest's base64: equal exactly when v is canonical and decodes to
    # that digest, and cheaper than decoding v strictly (about 1,100 instructions less);
    # surrogatepass: a SignatureHeader built by hand may hold any text
    v = parsed.signature.encode("utf-8", "surrogatepass")
    suffix = parsed.signed_suffix()
    for secret in candidates:
        if (secret.not_after is None or now <= secret.not_after) and compare_digest(
            binascii.b2a_base64(_digest(body, secret.value, suffix), newline=False), v
        ):
            break
    else:
        if _decode_v(parsed.signature) is None:
            raise SignatureMismatchError("v is not a base64 HMAC-SHA256 digest")
        raise SignatureMismatchError(
            "no accepted secret produces this signature"
            + _retired_match(body, suffix, v, candidates, now)
        )
    # spec §5.2: "greater than five minutes"; t is whole seconds, so is the clock's reading
    # (floor imported as a name: int arithmetic after it costs less than the float's)
    if abs(floor(now) - parsed.timestamp) > tolerance:
        raise TimestampError(f"t is more than {tolerance:g} s from the receiver's clock")
