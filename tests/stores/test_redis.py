"""RedisStore specifics beyond the shared contract: connection forms, TTLs, prefix, failures."""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from service_webhooks import WebhookReceiver, sign
from service_webhooks._exceptions import ConfigurationError
from service_webhooks.stores import ClaimState

pytest.importorskip("redis")
import redis
import redis.asyncio
from sw_services import REDIS_URL

from service_webhooks.stores._redis import RedisStore

URL = REDIS_URL  # the fixtures' server and database ($SERVICE_WEBHOOKS_TEST_REDIS)
pytestmark = pytest.mark.services


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:
    return redis_client


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    prefix = f"service_webhooks_test:{uuid.uuid4().hex}:"
    yield prefix
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)


def test_keys_carry_the_prefix_and_expire_on_the_server(client: redis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    assert store.claim("k", "tok", 30) is ClaimState.NEW
    assert client.get(prefix + "k") == b"i:tok"
    assert 29_000 < client.pttl(prefix + "k") <= 30_000
    assert store.complete("k", "tok", 72 * 3600) is True
    assert client.get(prefix + "k") == b"d:tok"
    assert client.pttl(prefix + "k") > 71 * 3600 * 1000


def test_two_prefixes_do_not_see_each_other(client: redis.Redis, prefix: str) -> None:
    first, second = (
        RedisStore(client, prefix=prefix + "a:"),
        RedisStore(client, prefix=prefix + "b:"),
    )
    assert first.claim("k", "t", 30) is ClaimState.NEW
    assert second.claim("k", "t", 30) is ClaimState.NEW


def test_a_connection_pool_and_decoded_responses(client: redis.Redis, prefix: str) -> None:
    pool = redis.ConnectionPool.from_url(URL, decode_responses=True)
    store = RedisStore(pool, prefix=prefix)
    assert store.claim("k", "t", 30) is ClaimState.NEW
    assert store.claim("k", "u", 30) is ClaimState.IN_FLIGHT
    assert store.complete("k", "t", 60) is True
    assert store.claim("k", "u", 30) is ClaimState.DONE
    pool.disconnect()


async def test_sync_client_only_runs_the_async_twins_in_a_thread(
    client: redis.Redis, prefix: str
) -> None:
    store = RedisStore(client, prefix=prefix)
    assert await store.aclaim("k", "t", 30) is ClaimState.NEW
    assert await store.arelease("k", "t") is True


async def test_asyncio_client_or_pool(client: redis.Redis, prefix: str) -> None:
    aclient = redis.asyncio.Redis.from_url(URL)
    store = RedisStore(aclient, prefix=prefix)
    assert await store.aclaim("k", "t", 30) is ClaimState.NEW
    with pytest.raises(ConfigurationError, match="asyncio client"):
        store.claim("k", "t", 30)
    apool = redis.asyncio.ConnectionPool.from_url(URL)
    pooled = RedisStore(client, aconnection=apool, prefix=prefix)
    assert await pooled.aclaim("k", "u", 30) is ClaimState.IN_FLIGHT
    assert pooled.claim("k", "u", 30) is ClaimState.IN_FLIGHT
    await aclient.aclose()
    await apool.disconnect()


async def test_an_asyncio_client_only_store_renews_a_slow_handlers_claim(
    client: redis.Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With only an asyncio client (no blocking calls), the claim of a handler that
    outlives its lease is renewed on the event loop: a retry meanwhile gets 503
    ``in_flight`` and the handler runs once (the blocking renewal failed with
    ConfigurationError every time, so the retry ran the handler a second time)."""
    aclient = redis.asyncio.Redis.from_url(URL)
    receiver = WebhookReceiver("s" * 32, store=RedisStore(aclient, prefix=prefix), lease=0.9)
    runs: list[str] = []

    @receiver.on("note.created")
    async def slow(event: Any) -> None:
        runs.append(event.data.id)
        await asyncio.sleep(2.5)

    body = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a","text":""}}'
    first = asyncio.create_task(receiver.aprocess(body, sign(body, "s" * 32, "o-1")))
    await asyncio.sleep(1.6)  # past the first lease and a renewal
    retry = await receiver.aprocess(body, sign(body, "s" * 32, "o-1"))
    answer = await first
    await aclient.aclose()
    assert (retry.status, retry.reason) == (503, "in_flight")
    assert (answer.status, answer.reason) == (200, "processed")
    assert runs == ["n-1"]
    assert "renew" not in caplog.text


def test_rejects_what_is_not_a_connection() -> None:
    with pytest.raises(ConfigurationError):
        RedisStore(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisStore(URL, prefix="")


def test_unreachable_server_fails_closed_quickly(
    free_port: int,
    signed: Callable[..., tuple[bytes, str]],
    secret: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RedisStore.from_url(f"redis://:hunter2@127.0.0.1:{free_port}/0")
    receiver = WebhookReceiver(secrets=secret, store=store)
    ran: list[object] = []
    receiver.on("note.created")(ran.append)
    body, header = signed()
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        outcome = receiver.process(body, header)
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert time.monotonic() - started < 5  # inside the service's 10 s deadline
    assert ran == []
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "hunter2" not in errors[0]
    assert secret not in errors[0]
    store.close()


def test_missing_redis_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.delitem(sys.modules, "service_webhooks.stores._redis")
    with pytest.raises(ImportError, match=r"service-webhooks\[redis\]"):
        importlib.import_module("service_webhooks.stores._redis")


def test_ping_asks_the_server_once_and_says_why_it_cannot(client: redis.Redis) -> None:
    RedisStore.from_url(URL).ping()
    with pytest.raises(redis.ConnectionError, match=r"(?i)refused"):
        RedisStore.from_url("redis://:PW-never@127.0.0.1:1/0").ping()


def test_ping_warns_of_a_server_that_evicts_the_records(
    frozen_redis: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """With a ``maxmemory`` and any policy but ``noeviction`` (``volatile-*`` included:
    every record has a TTL), Redis deletes records when full, and a duplicate of an
    evicted event runs its handlers again: ``ping()`` says so. An ACL that refuses
    ``INFO`` leaves nothing to check."""
    admin = redis.Redis.from_url(frozen_redis.url)
    store = RedisStore.from_url(frozen_redis.url)
    try:
        for maxmemory, policy, warned in [
            ("0", "allkeys-lru", False),  # no limit: nothing is ever evicted
            ("64mb", "noeviction", False),  # full: writes fail (503), nothing is lost
            ("64mb", "allkeys-lru", True),
            ("64mb", "volatile-lru", True),
        ]:
            admin.config_set("maxmemory", maxmemory)
            admin.config_set("maxmemory-policy", policy)
            caplog.clear()
            with caplog.at_level(logging.WARNING, "service_webhooks"):
                store.ping()
            assert (f"maxmemory-policy {policy}" in caplog.text) is warned, (maxmemory, policy)
        admin.acl_setuser(
            "no_info", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
        )
        caplog.clear()
        port = frozen_redis.url.rsplit(":", 1)[1].split("/")[0]
        limited = RedisStore.from_url(f"redis://no_info:pw@127.0.0.1:{port}/0")
        with caplog.at_level(logging.WARNING, "service_webhooks"):
            limited.ping()
        assert caplog.text == ""
        limited.close()
    finally:
        store.close()
        admin.close()


def test_ping_refuses_a_replica(frozen_redis: Any) -> None:
    """A replica's URL given by mistake passed ``ping()`` and then answered every new
    delivery 503 (``READONLY``): it is refused at once, naming its primary."""
    admin = redis.Redis.from_url(frozen_redis.url)
    admin.replicaof("127.0.0.1", "1")  # a primary that is not there: still a replica
    store = RedisStore.from_url(frozen_redis.url)
    try:
        with pytest.raises(redis.exceptions.ReadOnlyError, match=r"replica of 127\.0\.0\.1:1\b"):
            store.ping()
    finally:
        admin.replicaof("NO", "ONE")
        store.close()
        admin.close()
