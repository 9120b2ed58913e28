"""Decode the webhook envelope from an authenticated raw body (spec §2.7, §6.1, §9).

The rule: the body is a JSON object ``{"eventName": str, "version": int, "data": any}``
of at most 1 MiB (1,048,576 bytes). Types are strict: ``version`` must be a JSON
integer (not ``true``, not ``1.0``, not ``"1"``), ``eventName`` a non-empty string,
``data`` present (``null`` allowed). Unknown fields are ignored at every level
(spec §9). The body must be UTF-8 JSON; anything else is malformed (400). A body over
the limit is :class:`~service_webhooks._exceptions.PayloadTooLargeError` (413).

The whole body must be valid UTF-8 (spec §2.7, RFC 8259 §8.1), not only the strings
the typed decoder reads: an overlong form (``C0 AF``), an encoded surrogate
(``ED A0 80``), a truncated sequence or a stray byte anywhere, even in a skipped
unknown field, is malformed (400). The check costs next to nothing for an ASCII body
(``bytes.isascii``, a word-at-a-time scan); in a body holding non-ASCII bytes only the
16 KiB chunks that hold them are decoded strictly, and the text is thrown away.

``data`` is decoded straight into the typed model of :mod:`service_webhooks._events`
when one exists for ``(eventName, version)``, else into plain JSON values. The body
is never copied or turned into ``str``: msgspec reads the bytes directly.

One pass when it can, two when it must. The service writes ``eventName`` and
``version`` first (``{"eventName":"note.created","version":1,...``), so those bytes
choose the decoder: the envelope typed for that event when a model is known, else the
envelope with ``data`` as plain JSON, and the whole body is decoded once. The pass
counts only if the decoded ``eventName`` and ``version`` are the ones it was chosen
for (a duplicated key, say, can make them differ). Anything else (another key order,
a mismatch, any error) takes the general path: the envelope with ``data`` left raw,
then ``data`` with the model its name and version select. That path's verdict and
error message are the ones that count, so both paths accept and refuse the same
bodies and return the same envelope.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from ._events import EVENT_MODELS
from ._exceptions import ConfigurationError, EnvelopeError, PayloadTooLargeError

__all__ = ["CONTENT_TYPE", "MAX_BODY_SIZE", "Envelope", "decode_envelope", "encode_envelope"]

MAX_BODY_SIZE = 1_048_576
"""Largest accepted body in bytes (spec §2.7 and §8: at most 1 megabyte)."""

CONTENT_TYPE = "application/json; charset=utf-8"
"""The ``Content-Type`` of a delivery (spec §6.1); receivers never reject on it."""


def encode_envelope(name: str, data: Any, version: int = 1) -> bytes:
    """Encode the envelope ``{"eventName": name, "version": version, "data": data}``.

    Returns:
        Compact UTF-8 JSON bytes.

    Raises:
        ConfigurationError: ``data`` is not JSON-encodable, ``name`` is empty or
            ``version`` is not an ``int``.
        PayloadTooLargeError: The body exceeds :data:`MAX_BODY_SIZE`.
    """
    if not name or not isinstance(name, str):
        raise ConfigurationError("an event needs a non-empty eventName")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigurationError("version must be an int")
    try:
        body = encode_json({"eventName": name, "version": version, "data": data})
    except TypeError as error:
        raise ConfigurationError(f"event data is not JSON-encodable: {error}") from None
    if len(body) > MAX_BODY_SIZE:
        raise PayloadTooLargeError(f"envelope is {len(body)} bytes, over {MAX_BODY_SIZE}")
    return body


def encode_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (non-ASCII text as raw UTF-8, not ``\\u`` escapes).

    Raises:
        TypeError: ``value`` holds what JSON cannot: a type msgspec does not encode, or
            a NaN or infinite float (RFC 8259 §6), which msgspec would write as ``null``.
    """
    try:
        body = msgspec.json.encode(value)
    except msgspec.EncodeError as error:
        raise TypeError(str(error)) from None
    if b"null" in body and _non_finite(msgspec.to_builtins(value)):  # NaN, ±inf -> null
        raise TypeError("NaN and infinite numbers have no JSON form")
    return body


def _non_finite(value: Any) -> bool:
    """Whether a NaN or infinite float is anywhere in ``value`` (built-in types)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


class _RawEnvelope(msgspec.Struct, frozen=True):
    eventName: Annotated[str, msgspec.Meta(min_length=1)]
    version: int
    data: msgspec.Raw


class Envelope(msgspec.Struct, frozen=True):
    """A decoded envelope.

    Attributes:
        event_name: ``eventName``, e.g. ``"note.created"``.
        version: The payload version (spec §9; currently 1).
        data: The typed model for a known ``(event_name, version)``, else plain JSON.
    """

    event_name: str
    version: int
    data: Any


_UTF8_CHUNK = 16_384  # bytes checked per step by _is_utf8
_utf8_decoder = codecs.getincrementaldecoder("utf-8")

_envelope_decoder = msgspec.json.Decoder(_RawEnvelope)
_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_model_decoders: dict[tuple[str, int], msgspec.json.Decoder[Any]] = {
    key: msgspec.json.Decoder(model) for key, model in EVENT_MODELS.items()
}


class _PlainEnvelope(msgspec.Struct, frozen=True):
    """One pass over an envelope whose event has no model: ``data`` as plain JSON."""

    eventName: Annotated[str, msgspec.Meta(min_length=1)]
    version: int
    data: Any


def _typed_envelope(model: type[Any]) -> type[Any]:
    """One pass over an envelope whose ``data`` is ``model``."""
    return msgspec.defstruct(
        f"_{model.__name__}Envelope",
        [
            ("eventName", Annotated[str, msgspec.Meta(min_length=1)]),
            ("version", int),
            ("data", model),
        ],
        frozen=True,
    )


_plain_decoder = msgspec.json.Decoder(_PlainEnvelope)
_HEAD_PREFIX = len(b'{"eventName":"') + 2  # and the name's first two bytes
# the first _HEAD_PREFIX bytes -> (heads, (name, version), decoder) of each typed event
# starting so: one slice and one lookup rule out every typed head at once
_TYPED_BY_PREFIX: dict[bytes, list[tuple[tuple[bytes, bytes], tuple[str, int], Any]]] = {}
for (_name, _version), _model in EVENT_MODELS.items():
    _start = b'{"eventName":"%s","version":%d' % (_name.encode(), _version)
    _heads = (_start + b",", _start + b"}")  # how the service starts this event's body
    _decoder = msgspec.json.Decoder(_typed_envelope(_model))
    _TYPED_BY_PREFIX.setdefault(_start[:_HEAD_PREFIX], []).append(
        (_heads, (_name, _version), _decoder)
    )
del _name, _version, _model, _start, _heads, _decoder
_MODEL_NAMES = frozenset(name for name, _ in _model_decoders)


def decode_envelope(body: bytes, *, max_size: int = MAX_BODY_SIZE) -> Envelope:
    """Decode and validate one envelope.

    Args:
        body: The raw request body (``bytes``), already authenticated.
        max_size: Largest accepted size in bytes (default 1 MiB, spec §2.7).

    Returns:
        The :class:`Envelope`, with ``data`` typed where a model is known.

    Raises:
        ConfigurationError: ``max_size`` is not an ``int`` >= 0 (NaN would accept
            any size).
        PayloadTooLargeError: ``len(body) > max_size``.
        EnvelopeError: Empty, invalid UTF-8 anywhere (even in a skipped field), not
            JSON, not an object, a missing or mistyped field, or ``data`` that does
            not fit the event's model.
    """
    if type(max_size) is not int or max_size < 0:
        raise ConfigurationError(f"max_size must be an int of bytes >= 0, not {max_size!r}")
    return decode_checked(body, max_size, body.isascii)


def decode_checked(body: bytes, max_size: int, is_ascii: Callable[[], bool]) -> Envelope:
    """:func:`decode_envelope` with the ASCII scan given as a callable, asked after the
    one pass (the receiver runs that scan on another thread for a large body): the
    verdict is the same, whatever the order."""
    if len(body) > max_size:
        raise PayloadTooLargeError(f"body is larger than {max_size} bytes")
    # One pass: the envelope typed at once by the decoder its head selects; None: the
    # general path, which words every error and types a known event written another way.
    envelope: Envelope | None = None
    key = None
    decoder: Any = _plain_decoder
    candidates = _TYPED_BY_PREFIX.get(body[:_HEAD_PREFIX])
    if candidates is not None:
        for heads, candidate, typed in candidates:
            if body.startswith(heads):
                key, decoder = candidate, typed
                break
    try:
        decoded = decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass  # the general path words the error
    else:
        name, version = decoded.eventName, decoded.version
        if key is None:  # a known event written another way: the general path types it
            if name not in _MODEL_NAMES or (name, version) not in _model_decoders:
                envelope = Envelope(name, version, decoded.data)
        elif key == (name, version):
            envelope = Envelope(name, version, decoded.data)
    if not is_ascii() and not _is_utf8(body):  # msgspec skips unknown fields unchecked
        raise EnvelopeError("body is not a valid envelope: not UTF-8")
    return _general(body) if envelope is None else envelope


def _general(body: bytes) -> Envelope:
    """The general path: the envelope with ``data`` left raw, then ``data`` with the
    model its ``(eventName, version)`` selects, else as plain JSON."""
    try:
        raw = _envelope_decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
        detail = _LONE_SURROGATE if _holds_lone_surrogate(body) else _describe(error)
        raise EnvelopeError(f"body is not a valid envelope: {detail}") from None
    model = EVENT_MODELS.get((raw.eventName, raw.version))
    decoder = _any_decoder if model is None else _model_decoders[raw.eventName, raw.version]
    try:
        data = decoder.decode(raw.data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as error:
        mismatch = model is not None and isinstance(error, msgspec.ValidationError)
        if _holds_lone_surrogate(body):
            detail, mismatch = _LONE_SURROGATE, False
        elif model is not None and mismatch:
            detail = f"data does not fit {model.__name__}: {_in_data(str(error))[:200]}"
        else:
            detail = _describe(error)
        raise EnvelopeError(
            f"body is not a valid envelope: {detail}",
            event_name=raw.eventName,
            version=raw.version,
            model_mismatch=mismatch,
        ) from None
    return Envelope(raw.eventName, raw.version, data)


def _in_data(message: str) -> str:
    """msgspec's message for ``data`` validated on its own, with its path (where ``$``
    is ``data``) made the path in the envelope: ``... - at `$.data.duration```."""
    head, at, path = message.rpartition(" - at `$")
    return f"{head} - at `$.data{path}" if at else f"{message} - at `$.data`"


def _is_utf8(body: bytes) -> bool:
    """Whether ``body`` is valid UTF-8 (strict: no overlong forms, surrogates or
    truncated sequences), decoding only the chunks that hold non-ASCII bytes.

    A chunk that is all ASCII while no multi-byte sequence is pending cannot change the
    verdict, so a large body with a few non-ASCII characters costs about one
    ``isascii`` scan instead of a full decode into a discarded ``str``.
    """
    try:
        if len(body) <= _UTF8_CHUNK:
            body.decode("utf-8")
            return True
        decoder = _utf8_decoder()
        pending = False
        for start in range(0, len(body), _UTF8_CHUNK):
            chunk = body[start : start + _UTF8_CHUNK]
            if pending or not chunk.isascii():
                decoder.decode(chunk)
                pending = bool(decoder.getstate()[0])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


_LONE_SURROGATE = (
    "a string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair), "
    "which is no Unicode character (RFC 8259 §8.2; RFC 7493 §2.1 forbids it)"
)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _holds_lone_surrogate(body: bytes) -> bool:
    """Whether ``body`` is JSON holding a lone surrogate escape, which msgspec refuses
    with a message that does not say so ("Input data was truncated", "unexpected end of
    hex escape"): Python's parser takes the escape, and its text then cannot be encoded.
    Only on the way to a 400."""
    if _SURROGATE_ESCAPE.search(body) is None:
        return False
    try:
        json.dumps(json.loads(body, parse_constant=_no_constant), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return True
    except (ValueError, RecursionError):  # not JSON at all, or too deep to tell
        return False
    return False


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is no JSON")  # NaN, Infinity: msgspec's own message then


def _describe(error: Exception) -> str:
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return str(error)[:200]
