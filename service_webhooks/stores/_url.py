"""Build an idempotency store from one string: settings, ``SERVICE_WEBHOOKS_STORE``, the CLI.

=================================================  ==========================================
URL                                                store
=================================================  ==========================================
``memory``                                         :class:`~.memory.MemoryStore`
``sqlite:PATH`` (``sqlite:///abs/path`` too)        :class:`~.sqlite.SQLiteStore` at ``PATH``
``redis://…``, ``rediss://…``, ``unix://…``          :class:`~.redis.RedisStore`
``postgresql://…``, ``postgres://…``               :class:`~.postgres.PostgresStore`
=================================================  ==========================================

Redis URLs accept ``?prefix=…`` (the key prefix); PostgreSQL URLs accept ``?table=…``
(optionally ``schema.table``); all three accept ``?timeout=SECONDS`` (how long a store
call may take, or wait for another process's SQLite write lock, before it fails, 5 by
default), the only parameter a SQLite URL takes. Every other query parameter of a
server's URL is passed to the driver as part of the URL. The PostgreSQL table is
created on first use (``create_schema=True`` creates it now, to fail early).
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote_plus

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
from ._base import IdempotencyStore
from ._memory import MemoryStore
from ._sqlite import DEFAULT_SQLITE_PATH, SQLiteStore

__all__ = ["ENV_VAR", "redact_url", "store_from_env", "store_from_url"]

ENV_VAR = "SERVICE_WEBHOOKS_STORE"
"""The environment variable :func:`store_from_env` reads."""

_REDACTED = "***"
_SECRET_PARAMETERS = frozenset({"password", "passwd", "pwd", "secret", "token", "sslpassword"})

_REDIS_SCHEMES = ("redis", "rediss", "unix")


def store_from_url(url: str, *, create_schema: bool = False) -> IdempotencyStore:
    """The idempotency store a URL names (see the module table).

    Args:
        url: ``memory``, ``sqlite:PATH``, a Redis URL or a PostgreSQL URL.
        create_schema: For PostgreSQL, create the table now if missing (else it is
            created on first use).

    Raises:
        ConfigurationError: An unknown scheme or a missing path; the message shows
            the scheme only (when the text has one), never the URL (it may hold a
            password) nor a bare word (it may be a secret set in the wrong place).
        ImportError: The backend's optional dependency is not installed (the message
            names the extra to install).
    """
    text = url.strip()
    scheme = scheme_of(text)
    if scheme == "memory":
        return MemoryStore()
    if scheme == "sqlite":
        path, timeout = sqlite_url(text, "store")
        return SQLiteStore(path, timeout=timeout)
    if scheme in _REDIS_SCHEMES:
        from ._redis import DEFAULT_PREFIX, RedisStore

        rest, options = pop_query(text, "prefix", "timeout")
        if scheme == "unix" and not rest[len("unix:") :].startswith("//"):
            rest = "unix://" + rest[len("unix:") :]  # urlunsplit drops an empty host's //
        prefix = options.get("prefix", DEFAULT_PREFIX)
        return RedisStore.from_url(rest, prefix=prefix, timeout=seconds_option(options, 5.0))
    if scheme in POSTGRES_SCHEMES:
        from ._postgres import DEFAULT_TABLE, PostgresStore

        # ?inbox_table= names the inbox's table beside this store (inbox=True): not ours
        rest, options = pop_query(text, "table", "timeout", "inbox_table", "prepared_statements")
        store = PostgresStore.from_url(
            rest,
            table=options.get("table", DEFAULT_TABLE),
            timeout=seconds_option(options, 5.0),
            prepared_statements=prepared_statements_option(options),
        )
        if create_schema:
            store.create_schema()
        return store
    raise ConfigurationError(
        f"unknown store URL{quoted_scheme(text)}: use memory, sqlite:PATH, redis://… "
        "or postgresql://…"
    )


def redact_url(url: str) -> str:
    """``url`` safe to print or log: every password in it becomes ``***``.

    ``redis://:s3cret@host:6379/0`` -> ``redis://:***@host:6379/0``;
    ``postgresql://app:s3cret@db/app`` -> ``postgresql://app:***@db/app``. Query
    parameters that carry a secret (``password``, ``token``, ...) and a ``password=…``
    field of a libpq key/value connection string are masked too. Anything else is
    returned unchanged (``memory``, ``sqlite:PATH``). Never raises.
    """
    if "://" not in url:
        return _PASSWORD_FIELD.sub(r"\1***", url)
    scheme, _, rest = url.partition("://")
    at = _userinfo_end(scheme, rest)
    if at >= 0:
        userinfo, rest = rest[:at], rest[at:]
        if ":" in userinfo:
            userinfo = userinfo.partition(":")[0] + ":" + _REDACTED
        rest = userinfo + rest
    return scheme + "://" + _SECRET_PARAM.sub(r"\1" + _REDACTED, rest)


def _userinfo_end(scheme: str, rest: str) -> int:
    """Where the userinfo of ``scheme://rest`` ends (the index of its ``@`` in ``rest``),
    or -1 without one.

    The last ``@`` before the query ends it, even in a password with an unescaped
    ``/``. libpq reads a PostgreSQL URL's userinfo up to an ``@`` met before any ``/``,
    so a password holding an unescaped ``?`` or ``#`` connects: that ``@`` ends it too.
    """
    before_query = rest.split("?", 1)[0].split("#", 1)[0]
    at = before_query.rfind("@")
    if scheme.lower() in POSTGRES_SCHEMES:
        at = max(at, rest.split("/", 1)[0].rfind("@"))
    return at


def _passwords(url: str) -> list[str]:
    """The password of ``url`` as each reader of it may cut it (raw and decoded)."""
    if "://" not in url:
        field = _PASSWORD_FIELD.search(url)
        return [field.group(2).strip("'")] if field else []
    scheme, _, rest = url.partition("://")
    found: list[str] = []
    # the widest cut of all: urllib ends the host at a "#", "?" or "/" of the password
    at = max(_userinfo_end(scheme, rest), rest.split("/", 1)[0].rfind("@"))
    if at >= 0 and ":" in rest[:at]:
        found.append(rest[:at].partition(":")[2])
    found += [match.group(1) for match in _SECRET_VALUE.finditer(rest)]
    found += [unquote_plus(text) for text in found]
    return [text for text in found if text]


def redact_message(message: str, url: str) -> str:
    """A driver's message about ``url`` safe to print or log: the URL's password, and
    any quoted piece of it, masked as ``***`` (redis-py quotes the "port" it found in a
    password with an unescaped ``#``, libpq a badly percent-encoded password whole).
    Any URL the message holds is redacted too (:func:`redact_url`). Never raises."""
    passwords = _passwords(url)

    def quoted(match: re.Match[str]) -> str:
        text = match.group(2)
        if text and any(text in password for password in passwords):
            return match.group(1) + _REDACTED + match.group(1)
        return match.group(0)

    message = _QUOTED.sub(quoted, message)
    for password in sorted(passwords, key=len, reverse=True):
        message = message.replace(password, _REDACTED)
    return redact_url(message)


def store_from_env(default: str = f"sqlite:{DEFAULT_SQLITE_PATH}") -> IdempotencyStore:
    """The store named by ``$SERVICE_WEBHOOKS_STORE``, else by ``default``.

    Raises:
        ConfigurationError: As :func:`store_from_url`.
    """
    return store_from_url(os.environ.get(ENV_VAR) or default)


_SECRET_PARAM = re.compile(r"(?i)([?&](?:" + "|".join(sorted(_SECRET_PARAMETERS)) + r")=)[^&]*")
# libpq reads a query value up to the next "&": a "#" is part of it
_SECRET_VALUE = re.compile(r"(?i)[?&](?:" + "|".join(sorted(_SECRET_PARAMETERS)) + r")=([^&]*)")
_QUOTED = re.compile(r"""(["'])(.*?)\1""")
_PASSWORD_FIELD = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
