"""The header lines a receiver reads, taken from a WSGI ``environ`` (PEP 3333) by key.

The Flask and Django adapters hand :meth:`~service_webhooks.WebhookReceiver.handle`
these few pairs instead of their framework's header view: that view walks the whole
``environ`` (and re-spells every name) on each request only for the receiver to look
at five of them. A WSGI server has joined repeated lines already, and an empty
``CONTENT_TYPE`` or ``CONTENT_LENGTH`` means the header was absent (PEP 3333).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["environ_headers"]

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
