"""PostgreSQL pools across ``fork()``: a child leaves the parent's pools to the parent.

A store or inbox used before the process forks (gunicorn ``--preload`` with
``create_schema()`` at import, Celery's prefork pool) would hand its pools to every
child. Their connections' sockets are the parent's (two processes on one socket mix up
each other's replies) and their worker threads did not survive the fork (no new
connection would ever come). So in the child each tracked owner forgets the pools it
opened and opens its own on first use. The inherited pools are kept referenced, never
closed: closing one would end the parent's sessions, and collecting one would try to
stop its threads. A pool the user passed in is theirs to open after the fork.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from .._forking import after_fork_of, keep_inherited
from ._pg_deadline import LoopPools

__all__ = ["forget_pools", "forget_pools_after_fork"]


class _PoolOwner(Protocol):
    _lock: threading.Lock
    _pool: Any
    _own_pool: bool
    _apools: LoopPools


def forget_pools_after_fork(owner: _PoolOwner) -> None:
    """Track ``owner`` (a store or an inbox): in a forked child it drops the pools it
    opened (``_pool`` when ``_own_pool``, every ``_apools`` entry) and a lock another
    thread may have held at the fork."""
    after_fork_of(owner, forget_pools)


def forget_pools(owner: _PoolOwner) -> None:
    """In a forked child: drop the pools ``owner`` opened (kept referenced, never
    closed) and make a new lock."""
    owner._lock = threading.Lock()
    if owner._own_pool and owner._pool is not None:
        keep_inherited([owner._pool])
        owner._pool, owner._own_pool = None, False
    keep_inherited(owner._apools.forget())
