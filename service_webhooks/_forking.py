"""What a forked child runs before it uses anything its parent built.

A process that builds a receiver and then forks workers from it (gunicorn
``--preload``, uWSGI without ``lazy-apps``, Celery's prefork pool, ``multiprocessing``'s
fork start method) hands each child its parent's objects but none of its threads, and
objects that must not be shared (claim-token prefixes, pool connections). Each module
that holds such state registers a callback here with :func:`after_fork_in_child`;
the callbacks run in each child once, in the order they were registered.

Python runs them through :func:`os.register_at_fork` on every :func:`os.fork`. uWSGI
forks its workers from C and skips those hooks unless it is told
``--py-call-osafterfork`` (or ``--py-call-uwsgi-fork-hooks``): without them a worker
claimed with its siblings' token prefix (one worker's claim counted as another's
renewal, so an event sent to both at once ran twice), waited for ever for a large
body's key from a hashing thread that did not exist there, and renewed no claim. So
inside uWSGI (its ``uwsgi`` module is loaded) the callbacks also run from
``uwsgi.post_fork_hook``, chained before any hook set earlier; a child in which they
already ran skips them.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["after_fork_in_child", "after_fork_of", "keep_inherited"]

T = TypeVar("T")

_CALLBACKS: list[Callable[[], None]] = []
_OWNERS: weakref.WeakKeyDictionary[Any, Callable[[Any], None]] = weakref.WeakKeyDictionary()
_KEPT: list[object] = []  # a child's copies of its parent's resources, referenced for ever
_ran_in = os.getpid()  # the process the callbacks last ran in (or the first one)


def after_fork_in_child(callback: Callable[[], None]) -> None:
    """Run ``callback()`` in every child forked from this process from now on."""
    _CALLBACKS.append(callback)


def after_fork_of(owner: T, reset: Callable[[T], None]) -> None:
    """Run ``reset(owner)`` in every child forked from this process from now on, for as
    long as ``owner`` (a store, an inbox, a renewer: held weakly) lives."""
    _OWNERS[owner] = reset


def keep_inherited(copies: Iterable[object]) -> None:
    """Keep a child's ``copies`` of its parent's resources (connections, pools)
    referenced for ever: closing one would end the parent's use of it, and collecting
    one would do the same or stop threads that are not there."""
    _KEPT.extend(copies)


def _in_child() -> None:
    global _ran_in
    pid = os.getpid()
    if pid == _ran_in:
        return  # already ran here (uWSGI's hook after Python's)
    _ran_in = pid
    for callback in _CALLBACKS:
        callback()
    for owner, reset in list(_OWNERS.items()):
        reset(owner)


os.register_at_fork(after_in_child=_in_child)


def _hook_uwsgi() -> None:
    """Inside uWSGI, run the callbacks from its post-fork hook too."""
    uwsgi: Any = sys.modules.get("uwsgi")  # only uWSGI's embedded module: pip's uwsgi has none
    if uwsgi is None or not hasattr(uwsgi, "masterpid"):
        return
    earlier = getattr(uwsgi, "post_fork_hook", None)

    def post_fork_hook() -> None:
        _in_child()
        if earlier is not None:
            earlier()

    uwsgi.post_fork_hook = post_fork_hook


_hook_uwsgi()
