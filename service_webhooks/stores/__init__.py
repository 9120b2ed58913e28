"""Idempotency stores: the :class:`IdempotencyStore` protocol and its backends.

=======================  =============================================  ===========
backend                  shared by                                      extra
=======================  =============================================  ===========
:class:`MemoryStore`     one process (tests, development)               -
:class:`SQLiteStore`     processes on one machine; survives restarts    -
:class:`RedisStore`      processes and machines (redis-py)              ``redis``
:class:`PostgresStore`   processes and machines (psycopg 3)             ``postgres``
=======================  =============================================  ===========

:func:`store_from_url` builds any of them from ``memory``, ``sqlite:PATH``,
``redis://…`` or ``postgresql://…``. ``RedisStore`` and ``PostgresStore`` are imported
on first use, so this package imports without their optional dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import MIN_RETENTION, ClaimState, IdempotencyStore, SyncStore
from ._memory import MemoryStore
from ._sqlite import SQLiteStore
from ._url import redact_url, store_from_env, store_from_url

if TYPE_CHECKING:
    from ._postgres import PostgresStore
    from ._redis import RedisStore

__all__ = [
    "MIN_RETENTION",
    "ClaimState",
    "IdempotencyStore",
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "SyncStore",
    "redact_url",
    "store_from_env",
    "store_from_url",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from ._redis import RedisStore

        return RedisStore
    if name == "PostgresStore":
        from ._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
