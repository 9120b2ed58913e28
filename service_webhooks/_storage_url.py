"""Read a storage URL's scheme and SQLite path, for the store and the inbox alike.

An error about a storage URL names its scheme only: the rest of a URL may hold a
password, and a bare word may be a secret pasted into the wrong setting.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from ._exceptions import ConfigurationError

__all__ = [
    "POSTGRES_SCHEMES",
    "pop_query",
    "prepared_statements_option",
    "quoted_scheme",
    "scheme_of",
    "seconds_option",
    "sqlite_path",
    "sqlite_url",
]

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
    """The file path of ``sqlite:PATH``, ``sqlite:///abs/path`` or ``sqlite://rel/path``
    (without its ``?timeout=``: see :func:`sqlite_url`).

    Raises:
        ConfigurationError: As :func:`sqlite_url`.
    """
    return sqlite_url(text, what)[0]


def sqlite_url(text: str, what: str, default_timeout: float = 5.0) -> tuple[str, float]:
    """The file path and the lock ``timeout`` (seconds) of ``sqlite:PATH?timeout=SECONDS``.

    ``?timeout=`` is the only query parameter: any other ``?…`` (``?mode=ro``) is refused
    rather than taken as the end of the file name, which would open a second, empty
    database beside the one meant. A path that holds a ``?`` itself is passed to
    ``SQLiteStore(path)`` or ``SQLiteInbox(path)`` instead.

    Raises:
        ConfigurationError: No path follows the scheme (``what`` names the setting:
            ``"store"`` or ``"inbox"``), a query parameter other than ``timeout``, or a
            timeout that is not a number of seconds above 0.
    """
    path = text[len("sqlite:") :]
    if path.startswith("//"):  # sqlite:///abs -> /abs, sqlite://rel -> rel
        path = path[2:]
    path, question, query = path.partition("?")
    if not path:
        raise ConfigurationError(f"a sqlite: {what} URL needs a file path")
    if not question:
        return path, default_timeout
    options: dict[str, str] = {}
    for name, value, _ in _parameters(query):
        if name != "timeout":
            raise ConfigurationError(
                f"a sqlite: {what} URL takes no query parameter but ?timeout=SECONDS "
                "(for a file name with a '?', pass the path to the class itself)"
            )
        options[name] = value
    return path, seconds_option(options, default_timeout)


def seconds_option(options: dict[str, str], default: float) -> float:
    """The ``timeout`` of a storage URL's popped query options, in seconds (``default``
    when absent); shared by the store and inbox URLs.

    Raises:
        ConfigurationError: The value is not a finite number of seconds above 0.
    """
    text = options.get("timeout")
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigurationError(f"a store URL's timeout must be seconds > 0, not {text[:20]!r}")
    return seconds


def prepared_statements_option(options: dict[str, str]) -> bool:
    """The ``prepared_statements`` of a PostgreSQL URL's popped query options: ``true``
    (the default) or ``false`` (``1``/``0``, ``on``/``off`` and ``yes``/``no`` too).

    Raises:
        ConfigurationError: Any other value.
    """
    text = options.get("prepared_statements", "true").strip().lower()
    if text in ("true", "1", "on", "yes"):
        return True
    if text in ("false", "0", "off", "no"):
        return False
    raise ConfigurationError(
        f"a PostgreSQL URL's prepared_statements must be true or false, not {text[:20]!r}"
    )


def pop_query(url: str, *names: str) -> tuple[str, dict[str, str]]:
    """``url`` without the query parameters ``names`` (this library's own), and their
    decoded values.

    The other parameters are left for the driver exactly as written: not decoded and
    encoded again, which would turn ``%20`` into ``+``, a literal plus sign to libpq
    (``?options=-c%20synchronous_commit%3Doff`` must reach it unchanged).

    Raises:
        ConfigurationError: ``url`` cannot be split (an unclosed ``[`` of an IPv6
            host); the message does not show the URL (it may hold a password).
    """
    try:
        parts = urlsplit(url)
    except ValueError as error:  # urllib's "Invalid IPv6 URL"
        raise ConfigurationError(f"invalid store URL: {error} (an unclosed '['?)") from None
    ours: dict[str, str] = {}
    kept: list[str] = []
    for name, value, piece in _parameters(parts.query):
        if name in names:
            ours[name] = value
        elif piece:
            kept.append(piece)
    return urlunsplit(parts._replace(query="&".join(kept))), ours


def _parameters(query: str) -> Iterator[tuple[str, str, str]]:
    """Each ``name=value`` piece of a URL's query: its name and value decoded, and the
    piece as written (empty for an empty piece)."""
    for piece in query.split("&"):
        name, _, value = piece.partition("=")
        yield unquote_plus(name), unquote_plus(value), piece
