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
import weakref
from typing import Any, Protocol

from .._forking import after_fork_in_child
from ._pg_deadline import LoopPools

__all__ = ["forget_pools_after_fork"]


class _PoolOwner(Protocol):
    _lock: threading.Lock
    _pool: Any
    _own_pool: bool
    _apools: LoopPools


_OWNERS: weakref.WeakSet[Any] = weakref.WeakSet()
_INHERITED: list[Any] = []  # the parent's pools, referenced for ever in a child


def forget_pools_after_fork(owner: _PoolOwner) -> None:
    """Track ``owner`` (a store or an inbox): in a forked child it drops the pools it
    opened (``_pool`` when ``_own_pool``, every ``_apools`` entry) and a lock another
    thread may have held at the fork."""
    _OWNERS.add(owner)


def _in_child() -> None:
    for owner in list(_OWNERS):
        owner._lock = threading.Lock()
        if owner._own_pool and owner._pool is not None:
            _INHERITED.append(owner._pool)
            owner._pool, owner._own_pool = None, False
        _INHERITED.extend(owner._apools.forget())


after_fork_in_child(_in_child)
