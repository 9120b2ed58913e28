"""Idempotency stores: the :class:`IdempotencyStore` protocol and its backends.

=====================  ==========================================  ==================
backend                shared by                                   module
=====================  ==========================================  ==================
:class:`MemoryStore`   one process (tests, development)            ``stores.memory``
:class:`SQLiteStore`   processes on one machine; survives restart  ``stores.sqlite``
=====================  ==========================================  ==================
"""

from .base import MIN_RETENTION, ClaimState, IdempotencyStore, SyncStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "MIN_RETENTION",
    "ClaimState",
    "IdempotencyStore",
    "MemoryStore",
    "SQLiteStore",
    "SyncStore",
]
