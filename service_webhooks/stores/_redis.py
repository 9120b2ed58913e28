"""Redis idempotency store: one store shared by every receiver process and machine.

Each key is one Redis string ``{prefix}{key}`` holding ``"i:" + token`` while a
claim is in flight and ``"d:" + token`` once done; Redis expires it on the
*server's* clock (``PX``), so receivers need no synchronised clocks and nothing has
to be pruned. Every operation is one short Lua script, so it is atomic:

* ``claim``: if the key exists and is not this token's in-flight claim, return its
  state; else ``SET … PX lease`` (a new claim, or the renewal of the caller's own).
* ``complete``: refuse if a live record belongs to another token; else
  ``SET "d:" + token PX retention``.
* ``release``: ``DEL`` only if the value is this token's in-flight claim.

Sync methods use a :class:`redis.Redis` client; the ``a``-prefixed twins use a
:class:`redis.asyncio.Redis` client. Built from a URL, the store opens one asyncio
client per event loop (an asyncio connection belongs to the loop that opened it),
closed in that loop when it shuts down (see :mod:`._per_loop`), or earlier by
:meth:`RedisStore.aclose` there.

Errors: whatever redis-py raises (:class:`redis.exceptions.ConnectionError`,
:class:`redis.exceptions.TimeoutError`, …) propagates; the receiver turns it into
:class:`~service_webhooks._exceptions.StoreError` (503, fail closed). Clients built
from a URL fail a call within ``timeout`` seconds (5 by default: the connect and read
timeouts, and no retry after a timeout; a refused or reset connection is retried
twice at once), so a dead or frozen server is answered inside the service's 10 s
deadline (spec §3.3). Their connection pool is unbounded, so no call waits for a
connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .._exceptions import ConfigurationError
from ._base import ClaimState, check_timeout
from ._per_loop import PerLoop
from ._url import redact_message, redact_url

try:
    import redis
    import redis.asyncio
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.retry import Retry
except ImportError as error:  # pragma: no cover - depends on the environment
    from .._extras import missing_extra

    raise missing_extra("redis", "redis", what="RedisStore", cause=error) from error

__all__ = ["DEFAULT_PREFIX", "RedisStore"]

logger = logging.getLogger("service_webhooks")

DEFAULT_PREFIX = "service_webhooks:idempotency:"
"""Prepended to every idempotency key to form the Redis key."""

# KEYS[1]: the Redis key; ARGV[1]: token; ARGV[2]: lease or retention in milliseconds.
_CLAIM = """
local value = redis.call('GET', KEYS[1])
if value and value ~= 'i:' .. ARGV[1] then return string.sub(value, 1, 1) end
redis.call('SET', KEYS[1], 'i:' .. ARGV[1], 'PX', ARGV[2])
return 'n'
"""
_COMPLETE = """
local value = redis.call('GET', KEYS[1])
if value and string.sub(value, 3) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'd:' .. ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == 'i:' .. ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""
_STATES = {"n": ClaimState.NEW, "i": ClaimState.IN_FLIGHT, "d": ClaimState.DONE}


def _default_options(retry_class: type[Retry] | type[AsyncRetry], timeout: float) -> dict[str, Any]:
    # A timeout is not retried (the call would outlive ``timeout``); a refused or reset
    # connection (a restarted server, a failover) is, quickly.
    backoff = ExponentialWithJitterBackoff(base=0.01, cap=0.1)
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry_class(backoff, 2, supported_errors=(redis.exceptions.ConnectionError,)),
    }


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _state(reply: bytes | str) -> ClaimState:
    flag = reply.decode() if isinstance(reply, bytes) else reply
    return _STATES[flag]


class _AsyncScripts:
    """One asyncio client with its three scripts (EVALSHA, loaded on first use)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self.claim = client.register_script(_CLAIM)
        self.complete = client.register_script(_COMPLETE)
        self.release = client.register_script(_RELEASE)


async def _aclose(scripts: _AsyncScripts) -> None:
    await scripts.client.aclose()


class RedisStore:
    """Idempotency store in Redis (thread-safe, shared across processes and machines).

    Args:
        connection: Where Redis is: a URL (``redis://host:6379/0``, ``rediss://…``,
            ``unix://…``), a :class:`redis.Redis` client, a :class:`redis.ConnectionPool`,
            a :class:`redis.asyncio.Redis` client or a
            :class:`redis.asyncio.ConnectionPool`. With a sync client or pool only, the
            async twins run the sync calls in a worker thread; with an asyncio client
            or pool only, the sync methods raise :class:`ConfigurationError`.
        aconnection: An asyncio client or pool for the async twins, next to a sync
            ``connection``.
        prefix: Prepended to every key (a namespace per application or environment).
        timeout: Seconds within which a call on a client built from a URL fails
            (connect and read timeouts); also ``?timeout=`` in a store URL. Clients
            you pass in keep their own settings.
        **options: Passed to the clients built from a URL (e.g. ``password``, or
            ``socket_timeout`` to override ``timeout`` for reads).

    Raises:
        ConfigurationError: ``connection`` is none of the above, ``prefix`` is empty,
            ``timeout`` is not a finite number of seconds > 0, or a URL redis-py
            refuses as malformed (no scheme, a port that is not a number, a bad
            parameter), with its reason, passwords masked. Nothing is connected
            here: a server that is down fails at the first call, or at :meth:`ping`.
    """

    def __init__(
        self,
        connection: str
        | redis.Redis
        | redis.ConnectionPool
        | redis.asyncio.Redis
        | redis.asyncio.ConnectionPool,
        *,
        aconnection: redis.asyncio.Redis | redis.asyncio.ConnectionPool | None = None,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = 5.0,
        **options: Any,
    ) -> None:
        if not prefix:
            raise ConfigurationError("RedisStore needs a non-empty key prefix")
        check_timeout("RedisStore timeout", timeout)
        self.prefix = prefix
        self._timeout = timeout
        self._url: str | None = None
        self._options = options
        client: redis.Redis | None = None
        if isinstance(connection, str):
            self._url = connection
            defaults = _default_options(Retry, timeout)
            try:
                client = redis.Redis.from_url(connection, **{**defaults, **options})
            except ValueError as error:  # redis-py's (or urllib's) refusal of its form
                reason = redact_message(str(error), connection)
                raise ConfigurationError(f"invalid Redis URL: {reason}") from None
        elif isinstance(connection, redis.Redis):
            client = connection
        elif isinstance(connection, redis.ConnectionPool):
            client = redis.Redis(connection_pool=connection)
        elif isinstance(connection, redis.asyncio.Redis | redis.asyncio.ConnectionPool):
            aconnection = connection
        else:
            raise ConfigurationError(
                "RedisStore needs a Redis URL, a redis client or a connection pool"
            )
        if isinstance(aconnection, redis.asyncio.ConnectionPool):
            aconnection = redis.asyncio.Redis(connection_pool=aconnection)
        self._client = client
        self._ascripts = None if aconnection is None else _AsyncScripts(aconnection)
        self._per_loop: PerLoop[_AsyncScripts] = PerLoop(_aclose, "a Redis client")
        if client is not None:
            self._claim = client.register_script(_CLAIM)
            self._complete = client.register_script(_COMPLETE)
            self._release = client.register_script(_RELEASE)

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = DEFAULT_PREFIX, timeout: float = 5.0, **options: Any
    ) -> RedisStore:
        """A store on the Redis server at ``url``; see the class for ``options``."""
        return cls(url, prefix=prefix, timeout=timeout, **options)

    def __repr__(self) -> str:
        where = "client" if self._url is None else repr(redact_url(self._url))
        return f"RedisStore({where}, prefix={self.prefix!r})"

    # -- sync -------------------------------------------------------------------------

    def _sync(self) -> redis.Redis:
        if self._client is None:
            raise ConfigurationError(
                "this RedisStore has only an asyncio client: use aprocess(), or pass a "
                "URL or a sync client too"
            )
        return self._client

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        client = self._sync()
        return _state(self._claim([self.prefix + key], [token, _milliseconds(lease)], client))

    def complete(self, key: str, token: str, retention: float) -> bool:
        client = self._sync()
        args: list[str | int] = [token, _milliseconds(retention)]
        return bool(self._complete([self.prefix + key], args, client))

    def release(self, key: str, token: str) -> bool:
        client = self._sync()
        return bool(self._release([self.prefix + key], [token], client))

    def ping(self) -> None:
        """Ask the server for ``PONG`` once: a wrong URL or a server that is down fails
        here, at once, instead of as a 503 on the first delivery. A no-op for a store
        with only an asyncio client.

        Then reads the server's ``INFO`` (skipped when an ACL refuses it): a replica,
        where every claim would fail, is refused; a server that evicts keys when its
        memory is full (a ``maxmemory`` with a policy other than ``noeviction``) is
        logged as a warning, since an evicted record runs its event's handlers again.

        Raises:
            redis.RedisError: The server cannot be reached or refused (its message
                never holds the password).
            redis.exceptions.ReadOnlyError: The server is a replica.
        """
        if self._client is None:
            return
        self._client.ping()
        try:
            replication = self._client.info("replication")
            memory = self._client.info("memory")
        except redis.exceptions.ResponseError:  # INFO refused (an ACL): nothing to check
            return
        if replication.get("role") == "slave":
            primary = f"{replication.get('master_host')}:{replication.get('master_port')}"
            raise redis.exceptions.ReadOnlyError(
                f"{self!r} is a replica of {primary}: every claim would fail "
                "(READONLY); give the primary's URL"
            )
        policy = memory.get("maxmemory_policy", "noeviction")
        if memory.get("maxmemory") and policy != "noeviction":
            logger.warning(
                "service_webhooks: %r may evict keys (maxmemory-policy %s): an evicted "
                "record runs its event's handlers again on a duplicate delivery; give "
                "the idempotency keys a Redis with maxmemory-policy noeviction",
                self,
                policy,
            )

    def close(self) -> None:
        """Close the sync client this store opened (a client you passed in stays open)."""
        if self._url is not None and self._client is not None:
            self._client.close()

    # -- async ------------------------------------------------------------------------

    def _async(self) -> _AsyncScripts | None:
        if self._ascripts is not None:
            return self._ascripts
        if self._url is None:
            return None  # a sync client only: run it in a worker thread
        scripts = self._per_loop.get()
        if scripts is None:
            options = {**_default_options(AsyncRetry, self._timeout), **self._options}
            scripts = _AsyncScripts(redis.asyncio.Redis.from_url(self._url, **options))
            self._per_loop.add(scripts)
        return scripts

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        scripts = self._async()
        if scripts is None:
            return await asyncio.to_thread(self.claim, key, token, lease)
        reply = await scripts.claim([self.prefix + key], [token, _milliseconds(lease)])
        return _state(reply)

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        scripts = self._async()
        if scripts is None:
            return await asyncio.to_thread(self.complete, key, token, retention)
        return bool(await scripts.complete([self.prefix + key], [token, _milliseconds(retention)]))

    async def arelease(self, key: str, token: str) -> bool:
        scripts = self._async()
        if scripts is None:
            return await asyncio.to_thread(self.release, key, token)
        return bool(await scripts.release([self.prefix + key], [token]))

    async def aclose(self) -> None:
        """Close the asyncio client this store opened for the running event loop (the
        loop's shutdown closes it otherwise); the next call there opens another."""
        scripts = await self._per_loop.pop()
        if scripts is not None:
            await _aclose(scripts)
