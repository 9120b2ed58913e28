"""The idempotency store backends every contract test runs against.

To plug in a backend, add a factory to ``BACKENDS``: it receives the pytest
``request`` and returns a fresh, empty store (skipping or failing through the
``unavailable`` fixture when its server is absent) and registers its own cleanup.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from service_webhooks.stores import IdempotencyStore, MemoryStore, SQLiteStore


def _memory(request: pytest.FixtureRequest) -> IdempotencyStore:
    return MemoryStore()


def _sqlite(request: pytest.FixtureRequest) -> IdempotencyStore:
    path: Path = request.getfixturevalue("tmp_path") / "idempotency.sqlite3"
    store = SQLiteStore(path)
    request.addfinalizer(store.close)
    return store


REDIS_URL = os.environ.get("SERVICE_WEBHOOKS_TEST_REDIS", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get(
    "SERVICE_WEBHOOKS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


@pytest.fixture
async def async_cleanup() -> AsyncIterator[list[Callable[[], Awaitable[None]]]]:
    """Coroutines to await in the test's own event loop once the test is over.

    An asyncio connection belongs to the loop that opened it, so a shared-server
    store must close its asyncio pool there, before pytest-asyncio closes the loop.
    """
    closers: list[Callable[[], Awaitable[None]]] = []
    yield closers
    for close in reversed(closers):
        await close()


def _redis(request: pytest.FixtureRequest) -> IdempotencyStore:
    import redis

    from service_webhooks.stores._redis import RedisStore

    probe = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        probe.ping()
    except redis.RedisError as error:
        probe.close()
        request.getfixturevalue("unavailable")(f"Redis at {REDIS_URL}", type(error).__name__)
    prefix = f"service_webhooks_test:{uuid.uuid4().hex}:"
    store = RedisStore.from_url(REDIS_URL, prefix=prefix)
    request.getfixturevalue("async_cleanup").append(store.aclose)

    def clean() -> None:
        keys = list(probe.scan_iter(match=prefix + "*", count=1000))
        if keys:
            probe.delete(*keys)
        probe.close()
        store.close()

    request.addfinalizer(clean)
    return store


def _postgres(request: pytest.FixtureRequest) -> IdempotencyStore:
    import psycopg

    from service_webhooks.stores._postgres import PostgresStore

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except psycopg.Error as error:
        request.getfixturevalue("unavailable")(
            f"PostgreSQL at {POSTGRES_URL}", type(error).__name__
        )
    table = f"service_webhooks_test_{uuid.uuid4().hex[:16]}"
    store = PostgresStore(POSTGRES_URL, table=table, max_size=8)
    store.create_schema()
    request.getfixturevalue("async_cleanup").append(store.aclose)

    def clean() -> None:
        store.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")

    request.addfinalizer(clean)
    return store


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "memory": _memory,
    "postgres": _postgres,
    "redis": _redis,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest) -> IdempotencyStore:
    factory = BACKENDS[request.param]
    result: IdempotencyStore = factory(request)
    return result
