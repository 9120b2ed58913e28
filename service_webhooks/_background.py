"""Store calls that follow a store failure and that the answer does not wait for.

A store server that stops answering holds every call for the store's timeout (5 s by
default). Once it failed a delivery (its completion, or its claim), the receiver still
has work for that database: releasing the delivery's claim, so that the service's retry
(a minute later at the soonest, spec §3.3) runs the handlers at once instead of after
the lease, and, for an inbox in the same PostgreSQL database, recording the 503 answer.
Each would wait the whole timeout again, bringing the answer to two or three timeouts:
past the service's 10 s response wait (spec §8), so the service would see a timeout
instead of the 503. Their outcome does not change the answer (503 either way), so they
run here, after it: a coroutine as a task of the running event loop, a blocking call on
one daemon thread of the process, in turn (a thread of its own each would also give a
SQLite store a connection per call: one per thread). Each catches and logs its own
failure; the calls are token-guarded, so one that runs late is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ._forking import after_fork_in_child

__all__ = ["NAME", "ain_background", "in_background", "wait_idle"]

logger = logging.getLogger("service_webhooks")

NAME = "service-webhooks-after-failure"
"""The name of the thread and of the tasks."""

_Call = tuple[Callable[..., Any], tuple[Any, ...]]

_tasks: set[asyncio.Task[Any]] = set()  # a reference to each task until it is done
_calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_starting = threading.Lock()


def in_background(call: Callable[..., Any], *args: Any) -> None:
    """Queue ``call(*args)`` for the background thread (started on first use); return
    at once."""
    global _worker
    _calls.put((call, args))
    if _worker is None:
        with _starting:
            if _worker is None:
                _worker = threading.Thread(target=_work, name=NAME, daemon=True)
                _worker.start()


def ain_background(work: Coroutine[Any, Any, Any]) -> None:
    """Run ``work`` as a task of the running event loop; return at once."""
    task = asyncio.get_running_loop().create_task(work, name=NAME)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def wait_idle(timeout: float) -> bool:
    """Whether every call queued for the background thread so far ran within
    ``timeout`` seconds (for tests, and for a shutdown that wants them done)."""
    done = threading.Event()
    in_background(done.set)
    return done.wait(timeout)


def _work() -> None:
    while True:
        call, args = _calls.get()
        try:
            call(*args)
        except Exception:  # the calls log their own failures: this is a bug
            logger.exception("service_webhooks: a call after a store failure raised")


def _forget_after_fork() -> None:
    """A child process has no such thread; its queue may be mid-operation: new ones."""
    global _calls, _worker, _starting
    _calls, _worker, _starting = queue.SimpleQueue(), None, threading.Lock()


after_fork_in_child(_forget_after_fork)
