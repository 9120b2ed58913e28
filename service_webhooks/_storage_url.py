"""Read a storage URL's scheme and SQLite path, for the store and the inbox alike.

An error about a storage URL names its scheme only: the rest of a URL may hold a
password, and a bare word may be a secret pasted into the wrong setting.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from ._exceptions import ConfigurationError

__all__ = ["POSTGRES_SCHEMES", "pop_query", "quoted_scheme", "scheme_of", "sqlite_path"]

POSTGRES_SCHEMES = ("postgresql", "postgres")
"""The schemes of a PostgreSQL URL (a store's or an inbox's)."""

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,19}")  # RFC 3986 §3.1, at most 20 characters


def scheme_of(text: str) -> str:
    """The lowercased part before the first ``:``; the whole text when it has none."""
    return text.partition(":")[0].lower()


def quoted_scheme(text: str) -> str:
    """`` scheme 'x'`` for a message about ``text``, or ``""`` when naming it could leak.

    Only a real scheme (letters first, then letters, digits, ``+``, ``-`` or ``.``, at
    most 20 characters, followed by ``:``) is named; a bare word never is.
    """
    scheme = scheme_of(text)
    return f" scheme {scheme!r}" if ":" in text and _SCHEME.fullmatch(scheme) else ""


def sqlite_path(text: str, what: str) -> str:
    """The file path of ``sqlite:PATH``, ``sqlite:///abs/path`` or ``sqlite://rel/path``.

    Raises:
        ConfigurationError: No path follows the scheme (``what`` names the setting:
            ``"store"`` or ``"inbox"``).
    """
    path = text[len("sqlite:") :]
    if path.startswith("//"):  # sqlite:///abs -> /abs, sqlite://rel -> rel
        path = path[2:]
    if not path:
        raise ConfigurationError(f"a sqlite: {what} URL needs a file path")
    return path


def pop_query(url: str, *names: str) -> tuple[str, dict[str, str]]:
    """``url`` without the query parameters ``names`` (this library's own), and their
    decoded values.

    The other parameters are left for the driver exactly as written: not decoded and
    encoded again, which would turn ``%20`` into ``+``, a literal plus sign to libpq
    (``?options=-c%20synchronous_commit%3Doff`` must reach it unchanged).
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    kept: list[str] = []
    for piece in parts.query.split("&"):
        name, _, value = piece.partition("=")
        if unquote_plus(name) in names:
            ours[unquote_plus(name)] = unquote_plus(value)
        elif piece:
            kept.append(piece)
    return urlunsplit(parts._replace(query="&".join(kept))), ours
