"""``service_webhooks.stores``: the optional backends are reachable by name on first use."""

from __future__ import annotations

import importlib

import pytest

from service_webhooks import stores


def test_redis_and_postgres_stores_load_on_first_use() -> None:
    pytest.importorskip("redis")
    pytest.importorskip("psycopg")
    redis_store = stores.RedisStore
    postgres_store = stores.PostgresStore
    assert redis_store is importlib.import_module("service_webhooks.stores._redis").RedisStore
    assert (
        postgres_store is importlib.import_module("service_webhooks.stores._postgres").PostgresStore
    )
    assert {"RedisStore", "PostgresStore"} <= set(stores.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'CassandraStore'"):
        stores.CassandraStore  # noqa: B018
    assert not hasattr(stores, "NoSuchStore")
