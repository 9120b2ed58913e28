"""The dashboard's trusted origins: where browsers reach it through a reverse proxy.

A replay form is refused when its ``Origin`` header names another host than the
``Host`` header the dashboard received. Behind a proxy that rewrites ``Host`` (nginx's
default ``proxy_pass``: ``Host: 127.0.0.1:8001``) the two differ for the dashboard's own
pages, so the operator lists the public origins (``https://ops.example.com``) and an
``Origin`` equal to one of them is accepted too. ``X-Forwarded-Host`` is never read:
any client can send it.

An origin is compared as a browser serializes it (RFC 6454 §6.2): ``scheme://host``
with ``:port`` only when it is not the scheme's default, lower case, no path.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from service_webhooks import ConfigurationError

__all__ = ["normalize_origin", "parse_trusted_origins"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")  # a DNS name or a dotted IPv4 address
_EXAMPLE = (
    "scheme://host[:port] as the browser's address bar shows it, e.g. https://ops.example.com"
)


def normalize_origin(value: str) -> str:
    """``value`` as a browser sends it in ``Origin``: ``https://OPS.example.com:443/``
    becomes ``https://ops.example.com``.

    Args:
        value: ``http://`` or ``https://``, a host (a DNS name in ASCII, an IPv4
            address, or an IPv6 address in brackets) and an optional port; a trailing
            ``/`` is allowed, any other path, a query, a fragment or credentials are not.

    Returns:
        The serialized origin: lower case, without the scheme's default port.

    Raises:
        ConfigurationError: ``value`` is not such an origin; the message says why and
            what to give instead.
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"trusted origin {value!r}: a string such as {_EXAMPLE}")
    text = value.strip()
    problem = _problem(text)
    if problem:
        raise ConfigurationError(f"trusted origin {value!r}: {problem}")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    shown = f"[{host}]" if ":" in host else host
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


def _problem(text: str) -> str:
    """Why ``text`` is not an origin to trust, or ``""``."""
    if not text.isascii():
        return f"give the host in ASCII (punycode), as browsers send it: {_ascii(text)}"
    if text == "null":
        return "'null' is not an address (sandboxed frames and files send it): give " + _EXAMPLE
    if "://" not in text:
        return f"no scheme: give https://{text} or http://{text}, as the address bar shows it"
    try:
        parts = urlsplit(text)
        port = parts.port  # raises for a port that is no number 0..65535
    except ValueError as error:
        return f"not an origin ({error}): give {_EXAMPLE}"
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.netloc:
        return f"not an origin: give {_EXAMPLE}"
    if "@" in parts.netloc:
        return "an origin has no user or password: give scheme://host[:port] alone"
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in text or "#" in text:
        return (
            "an origin has no path, query or fragment: give scheme://host[:port] alone "
            "(the dashboard's path does not matter)"
        )
    host = (parts.hostname or "").lower()
    if not host:
        return f"no host: give {_EXAMPLE}"
    if "*" in host:
        return "wildcards are not supported: list each origin the dashboard is reached at"
    if port == 0:
        return "port 0 is not a port a browser connects to: give 1..65535"
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "not an IPv6 address between the brackets"
    elif not _HOST_NAME.fullmatch(host):
        return f"{host!r} is not a host name or address"
    return ""


def _ascii(text: str) -> str:
    """How ``text``'s host is written in punycode (``xn--bcher-kva.example for
    bücher.example``), or an example of that when it cannot be converted."""
    try:
        host = urlsplit(text).hostname or ""
        return f"{host.encode('idna').decode('ascii')} for {host}"
    except (ValueError, UnicodeError):
        return "e.g. xn--bcher-kva.example for bücher.example"


def parse_trusted_origins(values: Iterable[str]) -> tuple[str, ...]:
    """``values`` normalized by :func:`normalize_origin`, in order, without repeats.

    Raises:
        ConfigurationError: ``values`` is one string (give a list) or holds a value
            that is not an origin.
    """
    if isinstance(values, (str, bytes)):
        raise ConfigurationError(
            "trusted_origins must be a list of origins, e.g. ['https://ops.example.com'], "
            "not one string"
        )
    return tuple(dict.fromkeys(normalize_origin(value) for value in values))
