"""Build an inbox from one string: the receiver's ``inbox=``, the CLI's ``--store``."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .._exceptions import ConfigurationError
from ._base import Inbox
from ._memory import MemoryInbox
from ._sqlite import SQLiteInbox

__all__ = ["inbox_from_url"]


def inbox_from_url(url: str, *, create_schema: bool = True) -> Inbox:
    """The inbox a URL names.

    ==========================================  ======================================
    URL                                         inbox
    ==========================================  ======================================
    ``memory``                                  :class:`MemoryInbox`
    ``sqlite:PATH`` (``sqlite:///abs`` too)      :class:`SQLiteInbox` at ``PATH``
    ``postgresql://…``, ``postgres://…``        :class:`PostgresInbox` (``?table=``)
    ==========================================  ======================================

    The same URL as an idempotency store's puts the inbox beside it (the same SQLite
    file, the same PostgreSQL database).

    Args:
        url: One of the forms above.
        create_schema: For PostgreSQL, create the table now if missing.

    Raises:
        ConfigurationError: An unknown scheme (Redis keeps no inbox) or a missing
            path; the message shows the scheme only, never the URL.
        ImportError: psycopg is not installed (the ``postgres`` extra).
    """
    text = url.strip()
    scheme = text.partition(":")[0].lower() if ":" in text else text.lower()
    if scheme == "memory":
        return MemoryInbox()
    if scheme == "sqlite":
        path = text[len("sqlite:") :]
        if path.startswith("//"):  # sqlite:///abs -> /abs, sqlite://rel -> rel
            path = path[2:]
        if not path:
            raise ConfigurationError("a sqlite: inbox URL needs a file path")
        return SQLiteInbox(path)
    if scheme in ("postgresql", "postgres"):
        from ._postgres import DEFAULT_POSTGRES_INBOX_TABLE, PostgresInbox

        parts = urlsplit(text)
        kept: list[tuple[str, str]] = []
        table = DEFAULT_POSTGRES_INBOX_TABLE
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name == "inbox_table":
                table = value
            elif name != "table":  # the idempotency store's table
                kept.append((name, value))
        inbox = PostgresInbox(urlunsplit(parts._replace(query=urlencode(kept))), table=table)
        if create_schema:
            inbox.create_schema()
        return inbox
    raise ConfigurationError(
        f"no inbox for URL scheme {scheme[:20]!r}: use memory, sqlite:PATH or postgresql://…"
    )
