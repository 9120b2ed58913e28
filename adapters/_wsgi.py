"""The header lines a receiver reads, taken from a WSGI ``environ`` (PEP 3333) by key.

The Flask and Django adapters hand :meth:`~service_webhooks.WebhookReceiver.handle`
these few pairs instead of their framework's header view: that view walks the whole
``environ`` (and re-spells every name) on each request only for the receiver to look
at five of them. A WSGI server has joined repeated lines already, and an empty
``CONTENT_TYPE`` or ``CONTENT_LENGTH`` means the header was absent (PEP 3333).

They also read the body through :func:`body_reader`: a chunked body the client broke
(a bad chunk size, a missing terminator, a close mid-body) makes the server's input
stream raise, and that must end in the core's 4xx, not in the framework's 500.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["body_reader", "environ_headers"]

_HTTP = (  # (header name, environ key): present means sent, even when empty
    ("Service-Signature", "HTTP_SERVICE_SIGNATURE"),
    ("Transfer-Encoding", "HTTP_TRANSFER_ENCODING"),
    ("User-Agent", "HTTP_USER_AGENT"),
)
_CGI = (("Content-Length", "CONTENT_LENGTH"), ("Content-Type", "CONTENT_TYPE"))


_OWS = " \t"  # optional whitespace: never part of a field value (RFC 9110 §5.5)


def environ_headers(environ: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(name, value)`` for each of ``Service-Signature``, ``Transfer-Encoding``,
    ``User-Agent``, ``Content-Length`` and ``Content-Type`` the request carries, without
    the whitespace around the value that some servers keep (werkzeug's development
    server leaves it after the value, which would fail a correct signature)."""
    lines = [(name, environ[key].strip(_OWS)) for name, key in _HTTP if key in environ]
    lines += [(name, environ[key].strip(_OWS)) for name, key in _CGI if environ.get(key)]
    return lines


def body_reader(read: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """``read`` with an error from the input stream taken as the end of the body.

    gunicorn raises ``InvalidChunkSize``, ``ChunkMissingTerminator`` or ``NoMoreData``
    (and werkzeug's development server ``OSError`` or ``ValueError``) from
    ``wsgi.input.read`` for a chunked body the client framed wrongly or cut short. The
    receiver then gets the bytes that arrived: a body missing its end matches no
    signature (401), as an unreadable chunked body does under servers that do not
    terminate the input; nothing the client sends makes the view raise (500, retried).
    """

    def guarded(size: int) -> bytes:
        try:
            return read(size)
        except Exception:  # the server's own parse errors: no common base class
            return b""

    return guarded
