"""Idempotency plumbing shared by the receive drivers (spec §6.1; the idempotency rule in
the architecture page).

The default key, claim tokens, defaults for leases and retention, opening a store from
its configuration, and the guards that turn any store failure into
:class:`~service_webhooks._exceptions.StoreError` (503: fail closed, the service retries).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import queue
import re
import secrets as _random
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from ._background import ain_background, in_background
from ._exceptions import ConfigurationError, StoreError
from ._forking import after_fork_in_child
from ._reporting import loggable
from .stores._base import IdempotencyStore
from .stores._sqlite import DEFAULT_SQLITE_PATH, SQLiteStore
from .stores._url import redact_url, store_from_url

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_RETENTION",
    "DEFAULT_SQLITE_PATH",
    "OVERLAP_FROM",
    "OverlappedKey",
    "aguard",
    "aguard_release",
    "arelease_later",
    "default_idempotency_key",
    "describe",
    "guard",
    "guard_release",
    "new_token",
    "open_store",
    "release_later",
    "store_failed",
]

logger = logging.getLogger("service_webhooks")

DEFAULT_LEASE = 120.0
"""Seconds a claim holds before another delivery of the same event may take it over."""

DEFAULT_RETENTION = 72 * 3600.0
"""Seconds a processed key is remembered (events are retried for 24 h, spec §3.3)."""


def describe(error: BaseException) -> str:
    """``Type: message`` of a store failure for a log line: one line, and any URL in
    it without its password (drivers quote their connection string in errors)."""
    message = _URL.sub(lambda match: redact_url(match.group(0)), str(error))
    return loggable(f"{type(error).__name__}: {message}" if message else type(error).__name__)


_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)


def store_failed(error: Exception) -> StoreError:
    """Log a store operation's failure; the :class:`StoreError` to raise from it (503,
    fail closed): the one wording of :func:`guard`, :func:`aguard` and the receiver's
    own calls to ``claim`` and ``complete``."""
    logger.error("service_webhooks: idempotency store failed: %s", describe(error))
    return StoreError("the idempotency store is unavailable")


def guard(operation: Callable[..., Any], *args: Any) -> Any:
    """Call a store operation; any failure becomes StoreError (503, fail closed)."""
    try:
        return operation(*args)
    except Exception as error:
        raise store_failed(error) from error


async def aguard(operation: Coroutine[Any, Any, Any]) -> Any:
    """Await a store operation; any failure becomes StoreError (503, fail closed)."""
    try:
        return await operation
    except Exception as error:
        raise store_failed(error) from error


def guard_release(operation: Callable[[str, str], bool], key: str, token: str) -> bool:
    """Release a claim after a failure; if the store fails too, the lease still expires."""
    try:
        return operation(key, token)
    except Exception as error:  # the lease still expires; the retry runs then
        logger.error("service_webhooks: could not release a claim: %s", describe(error))
        return False


async def aguard_release(operation: Coroutine[Any, Any, bool]) -> bool:
    """Async twin of :func:`guard_release`.

    The release runs in a task of its own that the caller's cancellation does not
    stop: a caller cancelled again while it releases (an anyio cancel scope cancels
    every await inside it) still has its claim released, so the retry does not wait
    out the lease.
    """
    releasing = asyncio.ensure_future(_release(operation))
    _releasing.add(releasing)  # a reference until it is done
    releasing.add_done_callback(_releasing.discard)
    return await asyncio.shield(releasing)


_releasing: set[asyncio.Future[bool]] = set()


def release_later(operation: Callable[[str, str], bool], key: str, token: str) -> None:
    """:func:`guard_release` after the answer, on the background thread: for a claim
    whose completion the store just failed (see :mod:`._background`)."""
    in_background(guard_release, operation, key, token)


def arelease_later(operation: Coroutine[Any, Any, bool]) -> None:
    """Async twin of :func:`release_later`: a task the caller does not wait for."""
    ain_background(_release(operation))


async def _release(operation: Coroutine[Any, Any, bool]) -> bool:
    try:
        return await operation
    except Exception as error:
        logger.error("service_webhooks: could not release a claim: %s", describe(error))
        return False


_token_prefix = _random.token_hex(8)  # this process's; a counter makes each claim's unique
_token_counter = itertools.count()


def new_token() -> str:
    """A claim token unique across processes and calls, without a system call each time."""
    return f"{_token_prefix}-{next(_token_counter)}"


def _new_token_prefix_after_fork() -> None:
    """A forked child draws a prefix of its own: with its parent's, two workers would
    make the same tokens in the same order, one's claim would count as the other's
    renewal of it, and an event delivered to both at once would run twice."""
    global _token_prefix
    _token_prefix = _random.token_hex(8)


after_fork_in_child(_new_token_prefix_after_fork)


def default_idempotency_key(organization_id: str, body: bytes) -> str:
    """SHA-256 (hex) of ``o + "\\n" + raw body``: retries of one event share it.

    Spec §6.1: duplicates occur and each retry carries a new ``t`` but the same body.
    """
    # a copy of a state already fed o + "\n": no digest lookup, no encoding, one update
    prefixed = _PREFIXED.get(organization_id)
    if prefixed is None:
        prefixed = _prefixed(organization_id)
    digest = prefixed.copy()
    digest.update(body)
    key: str = digest.hexdigest()
    return key


_PREFIXED: dict[str, Any] = {}  # o -> SHA-256 fed o + "\n", never more: copied per key
_MAX_PREFIXED = 256  # organizations kept; more (umbrella accounts) start over when full


def _prefixed(organization_id: str) -> Any:
    """A SHA-256 state fed ``o + "\n"``, kept for the next key of that organization."""
    state = hashlib.sha256(organization_id.encode() + b"\n")
    if len(_PREFIXED) >= _MAX_PREFIXED:
        _PREFIXED.clear()
    _PREFIXED[organization_id] = state
    return state


OVERLAP_FROM = 131_072
"""Body size in bytes from which the default key is hashed on a worker thread (when that
thread is idle: see :class:`OverlappedKey`) while the signature's HMAC runs on the
caller's: both release the GIL over large buffers, so on two cores a 1 MiB delivery pays
for about one hash instead of two (measured: 1.75 ms -> 0.95 ms; below about 64 KiB the
thread hand-off costs more than it saves). The same thread also tells whether the body
is ASCII (the envelope's UTF-8 check): that scan holds the GIL, but the caller's HMAC
does not need it meanwhile."""

_Job = tuple["Future[tuple[str, bool]]", str, bytes]
_hasher: queue.SimpleQueue[_Job] | None = None  # the hashing thread's queue, once started
_hasher_lock = threading.Lock()
_hasher_idle = threading.Semaphore(1)  # taken while a body is queued or hashed there


class OverlappedKey:
    """:func:`default_idempotency_key` and ``body.isascii()`` under way on the hashing
    thread, for a body of at least :data:`OVERLAP_FROM` bytes; each method waits.

    Made by :meth:`start`, which hands the thread one body at a time: it is started
    before the signature is checked, so a flood of large forged bodies (401) would
    otherwise queue work, and hold each body, faster than the one thread hashes them,
    and a real delivery's key would wait behind all of them.
    """

    __slots__ = ("_future",)

    def __init__(self, future: Future[tuple[str, bool]]) -> None:
        self._future = future

    @classmethod
    def start(cls, organization_id: str, body: bytes) -> OverlappedKey | None:
        """Hash ``body`` on the hashing thread (started on first use); ``None`` when
        that thread is still busy with another body (or the interpreter is shutting
        down): the caller then hashes it itself, after the signature check."""
        global _hasher
        if not _hasher_idle.acquire(blocking=False):
            return None
        try:
            if _hasher is None:
                with _hasher_lock:
                    if _hasher is None:
                        jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
                        hashing = threading.Thread(
                            target=_hash_bodies, args=(jobs,), name="service-webhooks-key"
                        )
                        hashing.daemon = True
                        hashing.start()
                        _hasher = jobs
            future: Future[tuple[str, bool]] = Future()
            _hasher.put((future, organization_id, body))
            return cls(future)
        except RuntimeError:  # can't create new thread at interpreter shutdown
            _hasher_idle.release()
            return None

    def key(self) -> str:
        """The default idempotency key (64 hex digits)."""
        return self._future.result()[0]

    def is_ascii(self) -> bool:
        """Whether every byte of the body is ASCII."""
        return self._future.result()[1]


def _forget_hasher_after_fork() -> None:
    """A child process has none of its parent's threads: a queue inherited from the
    parent would hold the child's bodies for a thread that does not exist there, and
    their keys would never come."""
    global _hasher, _hasher_lock, _hasher_idle
    _hasher, _hasher_lock, _hasher_idle = None, threading.Lock(), threading.Semaphore(1)


after_fork_in_child(_forget_hasher_after_fork)


def _hash_bodies(jobs: queue.SimpleQueue[_Job]) -> None:
    """The hashing thread. A daemon thread, not a :class:`ThreadPoolExecutor`'s: a
    process exiting joins an executor's threads, and a worker that uWSGI forked without
    Python's fork hooks (no ``--py-call-osafterfork``) still counted its master's
    thread as running, so it never exited."""
    while True:
        future, organization_id, body = jobs.get()
        try:
            future.set_result(_key_and_ascii(organization_id, body))
        except BaseException as error:  # handed to the waiting caller
            future.set_exception(error)


def _key_and_ascii(organization_id: str, body: bytes) -> tuple[str, bool]:
    try:
        return default_idempotency_key(organization_id, body), body.isascii()
    finally:
        _hasher_idle.release()  # the next large body may be handed over


_STORE_METHODS = ("claim", "complete", "release", "aclaim", "acomplete", "arelease")


def open_store(config: IdempotencyStore | str | None) -> IdempotencyStore:
    """The store a receiver's ``store=`` argument names (see :class:`WebhookReceiver`)."""
    if config is None:
        return SQLiteStore(DEFAULT_SQLITE_PATH)
    if isinstance(config, str):
        return store_from_url(config)
    if isinstance(config, type):  # MemoryStore, not MemoryStore(): its methods are unbound
        raise ConfigurationError(
            f"store must be a store instance, not the class {config.__name__}: "
            f"pass {config.__name__}(...)"
        )
    if not all(callable(getattr(config, name, None)) for name in _STORE_METHODS):
        raise ConfigurationError(
            "store must be an IdempotencyStore (claim/complete/release and a-twins) or a "
            "URL: 'memory', 'sqlite:PATH', 'redis://…' or 'postgresql://…'"
        )
    return config
