"""Build an inbox from one string: the receiver's ``inbox=``, the CLI's ``--store``."""

from __future__ import annotations

from .._exceptions import ConfigurationError
from .._storage_url import (
    POSTGRES_SCHEMES,
    pop_query,
    prepared_statements_option,
    quoted_scheme,
    scheme_of,
    seconds_option,
    sqlite_url,
)
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
    ``sqlite:PATH`` (``sqlite:///abs`` too)      :class:`SQLiteInbox` at ``PATH`` (``?timeout=``)
    ``postgresql://…``, ``postgres://…``        :class:`PostgresInbox` (``?inbox_table=``)
    ==========================================  ======================================

    The same URL as an idempotency store's puts the inbox beside it (the same SQLite
    file, the same PostgreSQL database).

    Args:
        url: One of the forms above.
        create_schema: For PostgreSQL, create the table now if missing. A table made
            beforehand (by your migrations, as a role that may ``CREATE``) is used as it
            is when this URL's role may not run the DDL.

    Raises:
        ConfigurationError: An unknown scheme (Redis keeps no inbox) or a missing
            path; the message shows the scheme only (when the text has one), never
            the URL nor a bare word (it may be a secret set in the wrong place).
        ImportError: psycopg is not installed (the ``postgres`` extra).
    """
    text = url.strip()
    scheme = scheme_of(text)
    if scheme == "memory":
        return MemoryInbox()
    if scheme == "sqlite":
        path, timeout = sqlite_url(text, "inbox")
        return SQLiteInbox(path, timeout=timeout)
    if scheme in POSTGRES_SCHEMES:
        from ._postgres import DEFAULT_POSTGRES_INBOX_TABLE, PostgresInbox

        # ?table= names the idempotency store's table: dropped here, like ?inbox_table=;
        # ?timeout= bounds the inbox's calls as it bounds the store's
        conninfo, ours = pop_query(text, "inbox_table", "table", "timeout", "prepared_statements")
        table = ours.get("inbox_table", DEFAULT_POSTGRES_INBOX_TABLE)
        inbox = PostgresInbox(
            conninfo,
            table=table,
            timeout=seconds_option(ours, 5.0),
            prepared_statements=prepared_statements_option(ours),
        )
        if create_schema:
            import psycopg

            try:
                inbox.create_schema()
            except psycopg.errors.InsufficientPrivilege:
                # CREATE ... IF NOT EXISTS asks for the privilege even when the table
                # exists: a role that only writes the records gets here
                if not inbox.has_table():
                    raise
        return inbox
    raise ConfigurationError(
        f"no inbox for URL{quoted_scheme(text)}: use memory, sqlite:PATH or postgresql://…"
    )
