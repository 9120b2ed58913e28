"""PostgreSQL pools across ``fork()``: a child leaves the parent's pools to the parent.

A store or inbox used before the process forks (gunicorn ``--preload`` with
``create_schema()`` at import, Celery's prefork pool) would hand its pools to every
child. Their connections' sockets are the parent's (two processes on one socket mix up
each other's replies) and their worker threads did not survive the fork (no new
connection would ever come). So in the child each tracked owner forgets the pools it
opened and opens its own on first use. The inherited pools are kept referenced, never
closed: closing one would end the parent's sessions, and collecting one would try to
stop its threads. A pool the user passed in is theirs to open after the fork.

The sync pools an owner opened are also closed when the interpreter exits (an
``atexit`` hook, while their worker threads still run): left to the pool's ``__del__``
during finalization, Python 3.13 often cannot stop those threads, and psycopg_pool then
waits 5 seconds for each (``couldn't stop thread 'service_webhooks-worker-0' within 5.0
seconds``): a script, a CLI command or a gunicorn worker that never called ``close()``
took 20 seconds more per pool to exit (measured: a gunicorn worker with a PostgreSQL
store and inbox was still stopping when its 30-second graceful timeout ended). Only
the process that opened a pool closes it; a forked child leaves the parent's alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import weakref
from typing import Any, Protocol

from .._forking import after_fork_of, keep_inherited
from ._pg_deadline import LoopPools

__all__ = ["close_at_exit", "forget_pools", "forget_pools_after_fork"]


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


_AT_EXIT: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""Sync pools this library opened, each with the process ID that opened it."""


def close_at_exit(pool: Any) -> None:
    """Close ``pool``, a sync pool an owner opened, when this process exits (unless it
    was closed or collected before)."""
    _AT_EXIT[pool] = os.getpid()


@atexit.register
def _close_pools_at_exit() -> None:
    pid = os.getpid()
    for pool, opener in list(_AT_EXIT.items()):
        if opener == pid and not pool.closed:
            with contextlib.suppress(Exception):  # exiting: nothing left to report to
                pool.close()
