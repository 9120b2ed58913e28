"""Where the tests find the shared servers.

``POSTGRES_URL`` is the PostgreSQL database of the tests: ``$SERVICE_WEBHOOKS_TEST_POSTGRES``,
else the local server's ``test`` database (trust auth). A test that needs it takes the
``postgres_url`` fixture of ``tests/conftest.py``, which asks the server once per session
and skips the test (fails it under ``SERVICE_WEBHOOKS_REQUIRE_SERVICES=1``) when it does
not answer. ``REDIS_URL`` is the tests' Redis (``$SERVICE_WEBHOOKS_TEST_REDIS``, else the
local server's database 0); :func:`answering_redis` connects to it the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import redis

__all__ = ["POSTGRES_URL", "REDIS_URL", "answering_redis"]

REDIS_URL = os.environ.get("SERVICE_WEBHOOKS_TEST_REDIS", "redis://127.0.0.1:6379/0")

POSTGRES_URL = os.environ.get(
    "SERVICE_WEBHOOKS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


def answering_redis(
    unavailable: Callable[[str, str], NoReturn], url: str = REDIS_URL, **options: Any
) -> redis.Redis:
    """A client of Redis at ``url`` that answered a PING (``options``: more of
    ``redis.Redis.from_url``'s); else ``unavailable(what, why)``, the fixture of
    ``tests/conftest.py``, skips the test (or fails it)."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, **options)
    try:
        client.ping()
    except redis.RedisError as error:
        client.close()
        unavailable(f"Redis at {url}", type(error).__name__)
    return client
