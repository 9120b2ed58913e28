"""PostgresStore specifics beyond the shared contract: schema, prune, pools, failures."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sw_forking import beside_a_child
from sw_services import POSTGRES_URL

from service_webhooks import WebhookReceiver
from service_webhooks._exceptions import ConfigurationError
from service_webhooks.stores import ClaimState

pytest.importorskip("psycopg")
import psycopg
from psycopg_pool import ConnectionPool

from service_webhooks.stores._postgres import (
    DEFAULT_TABLE,
    PRUNE_BATCH,
    SCHEMA_SQL,
    PostgresStore,
)

Admin = psycopg.Connection[tuple[object, ...]]
URL = POSTGRES_URL
pytestmark = pytest.mark.services


def test_schema_sql_is_the_default_tables_ddl(admin: Admin, schema: str) -> None:
    assert f"CREATE TABLE IF NOT EXISTS {DEFAULT_TABLE}" in SCHEMA_SQL
    admin.execute(f"SET search_path TO {schema}")
    admin.execute(SCHEMA_SQL)  # runs as a migration would
    admin.execute(SCHEMA_SQL)  # and is idempotent
    row = admin.execute(f"SELECT count(*) FROM {schema}.{DEFAULT_TABLE}").fetchone()  # noqa: S608
    assert row == (0,)


def test_schema_sql_gives_the_ddl_for_any_table(admin: Admin, schema: str) -> None:
    ddl = PostgresStore.schema_sql(f"{schema}.keys")
    assert f'CREATE TABLE IF NOT EXISTS "{schema}"."keys"' in ddl
    admin.execute(ddl)  # runs as a migration would
    admin.execute(ddl)  # and is idempotent
    store = PostgresStore(URL, table=f"{schema}.keys", prune_every=0)
    assert store.claim("a", "t", 60) is ClaimState.NEW  # the table it expects
    store.close()
    with pytest.raises(ConfigurationError, match=r"table must be 'name' or 'schema\.name'"):
        PostgresStore.schema_sql("a;b")


def test_schema_qualified_table_prune_and_server_clock(admin: Admin, schema: str) -> None:
    store = PostgresStore(URL, table=f"{schema}.keys", prune_every=0)
    store.create_schema()
    store.create_schema()
    assert store.claim("a", "t", 0.1) is ClaimState.NEW
    assert store.claim("b", "t", 60) is ClaimState.NEW
    assert store.complete("b", "t", 3600) is True
    time.sleep(0.25)
    assert store.prune() == 1  # only the expired claim "a"
    rows = admin.execute(
        f"SELECT key, state, expires_at - now() > interval '59 minutes' FROM {schema}.keys"  # noqa: S608
    ).fetchall()
    assert rows == [("b", "done", True)]
    store.close()


def _sessions(store: PostgresStore, tag: str, rounds: int) -> tuple[list[str], set[int]]:
    """``rounds`` claims and completions of fresh keys; the errors met, and the server
    sessions (backend PIDs) the store's own connections had."""
    errors: list[str] = []
    sessions: set[int] = set()
    for i in range(rounds):
        key = f"{tag}-{i}"
        try:
            assert store.claim(key, "t", 60) is ClaimState.NEW
            assert store.complete(key, "t", 3600) is True
            with store._connection() as connection:
                row = connection.execute("SELECT pg_backend_pid()").fetchone()
                assert row is not None
                sessions.add(row[0])
        except Exception as error:  # reported to the parent, not raised in the child
            errors.append(f"{type(error).__name__}: {error}")
    return errors, sessions


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_pool(admin: Admin, schema: str) -> None:
    """A store used before a fork (gunicorn ``--preload`` after ``create_schema()``,
    Celery's prefork pool) works in the child on sessions of its own: the inherited
    pool's sockets are the parent's (their replies mixed up: "prepared statement
    already exists", "no result") and its threads are gone (PoolTimeout for ever)."""
    store = PostgresStore(URL, table=f"{schema}.keys", min_size=2, timeout=2)
    store.create_schema()
    _, before = _sessions(store, "before", 1)
    parent = os.getpid()
    (errors, parent_sessions), (child_errors, child_sessions) = beside_a_child(
        lambda: _sessions(store, "child" if os.getpid() != parent else "parent", 100)
    )
    assert child_errors == []
    assert errors == []
    assert not child_sessions & (before | parent_sessions)
    assert store.claim("after", "t", 60) is ClaimState.NEW  # the parent's pool still works
    store.close()


def test_prune_every_n_claims(admin: Admin, schema: str) -> None:
    store = PostgresStore(URL, table=f"{schema}.keys", prune_every=3)
    store.create_schema()
    store.claim("old", "t", 0.05)
    time.sleep(0.15)
    store.claim("x", "t", 60)
    store.claim("y", "t", 60)  # third claim: prunes "old"
    keys = {row[0] for row in admin.execute(f"SELECT key FROM {schema}.keys")}  # noqa: S608
    assert keys == {"x", "y"}
    store.close()


def _expired_rows(admin: Admin, table: str, count: int) -> None:
    admin.execute(
        f"INSERT INTO {table} SELECT 'old' || g, 'done', 't', now() - interval '1 hour' - g * "  # noqa: S608
        f"interval '1 ms' FROM generate_series(1, {count}) g"
    )


def _count(admin: Admin, query: str) -> object:
    row = admin.execute(query).fetchone()
    assert row is not None
    return row[0]


def test_a_prune_step_deletes_a_bounded_batch_oldest_first(admin: Admin, schema: str) -> None:
    table = f"{schema}.keys"
    store = PostgresStore(URL, table=table)
    store.create_schema()
    _expired_rows(admin, table, PRUNE_BATCH + 300)
    assert store.prune_step() == PRUNE_BATCH
    left = _count(admin, f"SELECT min(key::text) FROM {table}")  # noqa: S608
    assert _count(admin, f"SELECT count(*) FROM {table}") == 300  # noqa: S608
    assert left is not None
    assert int(str(left)[3:]) <= 300  # the newest expired stay
    assert store.prune() == 300
    store.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_prune_step_that_fails_does_not_fail_the_claim(
    admin: Admin, schema: str, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    # An expired row locked by another transaction: a full DELETE waits on it until the
    # statement timeout cancels it; the claim that came before it is written all the same.
    table = f"{schema}.keys"
    store = PostgresStore(URL, table=table, prune_every=1, statement_timeout=0.3)
    store.create_schema()
    _expired_rows(admin, table, 10)
    with psycopg.connect(URL) as holder:
        holder.execute(f"SELECT key FROM {table} WHERE key = 'old1' FOR UPDATE")  # noqa: S608
        with caplog.at_level(logging.WARNING, logger="service_webhooks"):
            claimed = (
                await store.aclaim("fresh", "tok", 60)
                if use_async
                else store.claim("fresh", "tok", 60)
            )
            assert claimed is ClaimState.NEW
        assert _count(admin, f"SELECT count(*) FROM {table}") == 2  # noqa: S608
        store._prune_step_sql = store._prune_sql  # the full DELETE: waits, then cancelled
        with caplog.at_level(logging.WARNING, logger="service_webhooks"):
            claimed = (
                await store.aclaim("next", "tok", 60)
                if use_async
                else store.claim("next", "tok", 60)
            )
        assert claimed is ClaimState.NEW
        assert "prune step of PostgresStore(" in caplog.text
        assert "QueryCanceled" in caplog.text
        assert store.claim("next", "other", 60) is ClaimState.IN_FLIGHT
    await store.aclose()
    store.close()


async def test_async_prune_and_close(admin: Admin, schema: str) -> None:
    store = PostgresStore(URL, table=f"{schema}.keys")
    store.create_schema()
    assert await store.aclaim("k", "t", 0.05) is ClaimState.NEW
    time.sleep(0.1)
    assert await store.aprune() == 1
    await store.aclose()
    store.close()


def test_a_pool_you_own_even_without_autocommit(admin: Admin, schema: str) -> None:
    with ConnectionPool(URL, min_size=1, max_size=2, open=True) as pool:
        store = PostgresStore(pool=pool, table=f"{schema}.keys")
        store.create_schema()
        assert store.claim("k", "t", 60) is ClaimState.NEW
        assert store.complete("k", "t", 3600) is True
        # committed: another connection sees it
        assert admin.execute(f"SELECT state FROM {schema}.keys").fetchone() == ("done",)  # noqa: S608
        store.close()  # leaves your pool open
        assert not pool.closed


async def test_a_sync_pool_only_runs_the_async_twins_in_a_thread(admin: Admin, schema: str) -> None:
    with ConnectionPool(URL, min_size=1, max_size=2, open=True) as pool:
        store = PostgresStore(pool=pool, table=f"{schema}.keys")
        store.create_schema()
        assert await store.aclaim("k", "t", 60) is ClaimState.NEW
        assert await store.arelease("k", "t") is True


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({}, "conninfo"),
        ({"conninfo": URL, "table": "a;b"}, "table"),
        ({"conninfo": URL, "table": "a.b.c"}, "table"),
        ({"conninfo": URL, "min_size": 3, "max_size": 2}, "min_size"),
        ({"conninfo": URL, "timeout": 0}, "timeout"),
    ],
)
def test_bad_configuration(args: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        PostgresStore(**args)  # type: ignore[arg-type]


def test_a_custom_key_holding_a_nul_is_processed_not_a_store_outage(
    schema: str, secret: str, signed: Callable[..., tuple[bytes, str]]
) -> None:
    """PostgreSQL text refuses NUL: an ``idempotency_key`` taken from the event's data
    (``"a\\u0000b"`` in its JSON) answered 503 ``store_unavailable`` on every attempt."""
    store = PostgresStore(URL, table=f"{schema}.keys")
    receiver = WebhookReceiver(
        secrets=secret, store=store, inbox=False, idempotency_key=lambda event: event.data.id
    )
    ran: list[object] = []
    receiver.on("note.created")(ran.append)
    data = {"id": "a\x00b", "author": "a", "text": ""}
    body = json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()
    try:
        assert receiver.process(*signed(body)).reason == "processed"
        assert receiver.process(*signed(body)).reason == "duplicate"
    finally:
        store.close()
    assert len(ran) == 1


def test_unreachable_server_fails_closed_quickly(
    free_port: int,
    signed: Callable[..., tuple[bytes, str]],
    secret: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = PostgresStore(f"postgresql://u:hunter2@127.0.0.1:{free_port}/db", timeout=1.0)
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
    ours = [r.getMessage() for r in caplog.records if r.name == "service_webhooks"]
    assert len(ours) == 1
    assert "hunter2" not in ours[0]
    store.close()


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "service_webhooks.stores._postgres")
    with pytest.raises(ImportError, match=r"service-webhooks\[postgres\]"):
        importlib.import_module("service_webhooks.stores._postgres")


def test_statement_timeout_joins_the_options_of_the_url(admin: Admin) -> None:
    store = PostgresStore(
        URL + "?options=-c%20synchronous_commit%3Doff", statement_timeout=2.5, min_size=1
    )
    with store._sync_pool().connection() as connection:
        settings = [
            connection.execute(f"SHOW {name}").fetchone()
            for name in ("synchronous_commit", "statement_timeout")
        ]
    assert settings == [("off",), ("2500ms",)]
    store.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_pooled_connection_the_server_ended_while_idle_is_not_used(
    admin: Admin, schema: str, use_async: bool
) -> None:
    """``idle_session_timeout`` (set here for the store's own sessions only) ends its
    pooled connections between deliveries, as a restart or a failover would: each call
    after a pause takes a live connection instead of failing on the dead one (before,
    every delivery to a quiet endpoint failed: 503, and so did the service's retry)."""
    if admin.info.server_version < 140000:
        pytest.skip("idle_session_timeout needs PostgreSQL 14")
    url = URL + "?options=-c%20idle_session_timeout%3D200"
    store = PostgresStore(url, table=f"{schema}.keys", min_size=1, max_size=2)
    store.create_schema()
    try:
        for round_ in range(3):
            if use_async:
                assert await store.aclaim(f"k{round_}", "t", 60) is ClaimState.NEW
                assert await store.acomplete(f"k{round_}", "t", 3600) is True
            else:
                assert store.claim(f"k{round_}", "t", 60) is ClaimState.NEW
                assert store.complete(f"k{round_}", "t", 3600) is True
            await asyncio.sleep(0.6)  # the server ends every idle session of the store
    finally:
        store.close()
        await store.aclose()
    row = admin.execute(f"SELECT count(*) FROM {schema}.keys WHERE state = 'done'").fetchone()  # noqa: S608
    assert row == (3,)


@pytest.mark.parametrize("prepared", ["true", "false"])
def test_prepared_statements_can_be_turned_off_for_a_pooler(
    admin: Admin, schema: str, prepared: str
) -> None:
    """``?prepared_statements=false``: psycopg prepares no statement (a PgBouncer in
    transaction mode would hand a prepared one to a server connection without it)."""
    from service_webhooks.stores._url import store_from_url

    url = f"{URL}?table={schema}.keys&prepared_statements={prepared}"
    store: Any = store_from_url(url)
    store._sizes = (1, 1)  # one connection: every statement below runs on it
    try:
        for index in range(8):  # psycopg prepares a statement on its 5th run by default
            assert store.claim(f"k{index}", "t", 60) is ClaimState.NEW
        with store._sync_pool().connection() as connection:
            row = connection.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    finally:
        store.close()
    assert (row[0] > 0) is (prepared == "true")


def test_prepared_statements_takes_a_boolean() -> None:
    from service_webhooks.stores._url import store_from_url

    with pytest.raises(ConfigurationError, match="prepared_statements must be true or false"):
        store_from_url(f"{URL}?prepared_statements=maybe", create_schema=False)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_socket_that_always_looks_ended_is_used_after_the_pool_s_worth(
    admin: Admin, schema: str, use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle check sets aside at most ``max_size`` connections per checkout, then uses
    the next as it is: a socket that always looked readable (data no query asked for)
    would otherwise have failed every call at the deadline."""
    from service_webhooks.stores import _pg_deadline

    checked: list[object] = []

    def always_ended(connection: object) -> bool:
        checked.append(connection)
        return True

    store = PostgresStore(URL, table=f"{schema}.keys", min_size=1, max_size=2, timeout=2)
    store.create_schema()
    monkeypatch.setattr(_pg_deadline, "_ended_by_server", always_ended)
    try:
        if use_async:  # without the bound: a StoreError at the 2 s deadline
            assert await store.aclaim("k", "t", 60) is ClaimState.NEW
        else:
            assert store.claim("k", "t", 60) is ClaimState.NEW
    finally:
        store.close()
        await store.aclose()
    assert len(checked) == 2  # the pool's max_size, then the third was used as it is


def test_a_store_given_by_url_creates_its_table_on_first_use(admin: Admin, schema: str) -> None:
    from service_webhooks.stores._url import store_from_url

    store: Any = store_from_url(f"{URL}?table={schema}.keys")  # no create_schema()
    assert store.claim("k", "t", 60) is ClaimState.NEW
    assert store.claim("k", "other", 60) is ClaimState.IN_FLIGHT
    assert admin.execute(f"SELECT key FROM {schema}.keys").fetchall() == [("k",)]  # noqa: S608
    store.close()


async def test_the_async_twins_create_the_table_on_first_use(admin: Admin, schema: str) -> None:
    store = PostgresStore(URL, table=f"{schema}.keys")
    assert await store.aclaim("k", "t", 60) is ClaimState.NEW
    assert await store.acomplete("k", "t", 3600) is True
    assert admin.execute(f"SELECT state FROM {schema}.keys").fetchall() == [("done",)]  # noqa: S608
    await store.aclose()


def test_first_uses_racing_from_many_stores_create_the_table_once(
    admin: Admin, schema: str
) -> None:
    stores = [PostgresStore(URL, table=f"{schema}.keys", max_size=1) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    results: list[object] = []

    def first_claim(store: PostgresStore) -> None:
        barrier.wait()
        try:
            results.append(store.claim("same", f"t{id(store)}", 60))
        except Exception as error:  # reported below
            results.append(error)

    threads = [threading.Thread(target=first_claim, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, results)) == sorted(
        [str(ClaimState.NEW)] + [str(ClaimState.IN_FLIGHT)] * (len(stores) - 1)
    )
    for store in stores:
        store.close()


def test_a_table_that_cannot_be_created_names_the_fix(admin: Admin) -> None:
    missing = f"sw_missing_{uuid.uuid4().hex[:12]}"  # a schema that does not exist
    store = PostgresStore("postgresql://postgres:hunter2@127.0.0.1:5432/test", table=f"{missing}.k")
    with pytest.raises(ConfigurationError) as caught:
        store.claim("k", "t", 60)
    message = str(caught.value)
    assert f"{missing}.k" in message
    assert "create_schema()" in message
    assert "InvalidSchemaName" in message
    assert "hunter2" not in message
    store.close()


def test_ping_connects_once_and_says_why_it_cannot(admin: Admin) -> None:
    PostgresStore(URL).ping()  # the live server: no error, no pool left open
    with pytest.raises(psycopg.OperationalError, match=r"(?i)refused|could not connect"):
        PostgresStore("postgresql://app:PW-never@127.0.0.1:1/x").ping()
    PostgresStore(pool=ConnectionPool(URL, open=False)).ping()  # your pool: not touched


async def test_more_async_calls_than_connections_queue_and_all_complete(
    admin: Admin, schema: str
) -> None:
    store = PostgresStore(URL, table=f"{schema}.keys", min_size=1, max_size=2)
    store.create_schema()
    try:
        states = await asyncio.gather(*(store.aclaim(f"k{i}", "t", 60) for i in range(40)))
        assert states == [ClaimState.NEW] * 40
        done = await asyncio.gather(*(store.acomplete(f"k{i}", "t", 3600) for i in range(40)))
        assert done == [True] * 40
    finally:
        await store.aclose()
    row = admin.execute(f"SELECT count(*) FROM {schema}.keys WHERE state = 'done'").fetchone()  # noqa: S608
    assert row == (40,)


async def test_a_full_pool_fails_the_waiting_calls_within_the_timeout(
    admin: Admin, schema: str
) -> None:
    from psycopg_pool import PoolTimeout

    store = PostgresStore(URL, table=f"{schema}.keys", max_size=1, timeout=0.5)
    store.create_schema()
    try:
        with admin.transaction():  # holds the table: the first call keeps the only connection
            admin.execute(f"LOCK TABLE {schema}.keys IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            outcomes = await asyncio.gather(
                *(store.aclaim(f"k{i}", "t", 60) for i in range(4)), return_exceptions=True
            )
            assert time.monotonic() - started < 2
        # one call held the connection until its deadline; the others waited for it
        assert isinstance(outcomes[0], TimeoutError), outcomes
        for waited in outcomes[1:]:
            assert isinstance(waited, PoolTimeout), outcomes
            assert "no connection of the pool was free within 0.5 s" in str(waited)
        # nothing leaked: the single connection serves the next calls
        assert await store.aclaim("after", "t", 60) is ClaimState.NEW
        assert await store.acomplete("after", "t", 3600) is True
    finally:
        await store.aclose()


def _getconn_raising_first(monkeypatch: pytest.MonkeyPatch, errors: list[Exception]) -> None:
    """Every asyncio pool's ``getconn`` raises each of ``errors`` in turn, then works."""
    from psycopg_pool import AsyncConnectionPool

    real = AsyncConnectionPool.getconn

    async def getconn(self: Any, timeout: float | None = None) -> Any:
        if errors:
            raise errors.pop()
        return await real(self, timeout)

    monkeypatch.setattr(AsyncConnectionPool, "getconn", getconn)


async def test_a_checkout_whose_turn_came_at_the_deadline_says_the_same(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call whose turn at the pool came just as its time ran out (the connection ahead
    of it discarded at its own deadline) fails as the other waiters do, and leaves its
    place in the queue to the next call."""
    from psycopg_pool import PoolTimeout

    store = PostgresStore(URL, table=f"{schema}.keys", max_size=1, timeout=0.5)
    store.create_schema()
    _getconn_raising_first(monkeypatch, [PoolTimeout("couldn't get a connection after 0.00 sec")])
    try:
        with pytest.raises(PoolTimeout, match=r"no connection of the pool was free within 0\.5 s"):
            await store.aclaim("k", "t", 60)
        assert await store.aclaim("k", "t", 60) is ClaimState.NEW
    finally:
        await store.aclose()


async def test_a_failed_checkout_gives_its_place_in_the_queue_back(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    store = PostgresStore(URL, table=f"{schema}.keys", max_size=1, timeout=2)
    store.create_schema()
    _getconn_raising_first(monkeypatch, [OSError("the pool broke")] * 3)
    try:
        for _ in range(3):
            with pytest.raises(OSError, match="the pool broke"):
                await store.aclaim("k", "t", 60)
        assert await store.aclaim("k", "t", 60) is ClaimState.NEW  # with max_size=1: no leak
    finally:
        await store.aclose()


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_complete_with_answers_like_complete_and_runs_the_statement_in_it(
    admin: Admin, schema: str, run_async: bool
) -> None:
    store = PostgresStore(URL, table=f"{schema}.keys", max_size=2)
    store.create_schema()
    admin.execute(f"CREATE TABLE {schema}.side (n integer)")
    insert = f"INSERT INTO {schema}.side (n) VALUES (%s)"  # noqa: S608

    async def complete_with(key: str, token: str, n: int) -> bool:
        if run_async:
            return await store.acomplete_with(key, token, 3600, insert, [n])
        return store.complete_with(key, token, 3600, insert, [n])

    try:
        assert store.claim("mine", "t-1", 60) is ClaimState.NEW
        assert store.claim("theirs", "t-2", 60) is ClaimState.NEW
        assert await complete_with("mine", "t-1", 1) is True
        assert await complete_with("theirs", "not-the-owner", 2) is False
    finally:
        await store.aclose()
        store.close()
    states = admin.execute(f"SELECT key, state FROM {schema}.keys ORDER BY key").fetchall()  # noqa: S608
    assert states == [("mine", "done"), ("theirs", "in_flight")]
    # one statement: the side row is written with the completion (and, as with the
    # completion's own WHERE, whatever the owner; the receiver calls it as the owner)
    assert admin.execute(f"SELECT n FROM {schema}.side ORDER BY n").fetchall() == [(1,), (2,)]  # noqa: S608
