"""One receiver, many event loops: the asyncio connections a store or inbox opened for a
loop are closed in that loop as it shuts down (``asyncio.run``, pytest-asyncio's loop
per test, each ``TestClient`` block), so a module-level receiver driven from loop after
loop leaves no connections behind and keeps working."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import threading
import time
import uuid

import pytest
from sw_services import POSTGRES_URL, REDIS_URL

from service_webhooks import WebhookReceiver, sign

pytest.importorskip("redis")
pytest.importorskip("psycopg")
import psycopg
import redis

from service_webhooks.stores._per_loop import PerLoop

SECRET = "whsec-loops"
ORG = "o-1"
pytestmark = pytest.mark.services


def _deliver_in_new_loops(receiver: WebhookReceiver, loops: int) -> None:
    @receiver.on("note.created")
    async def noted(event: object) -> None:
        await asyncio.sleep(0)

    for round_ in range(loops):

        async def deliver(round_: int = round_) -> int:
            body = (
                b'{"eventName":"note.created","version":1,"o":"%s","data":'
                b'{"id":"n-%d","author":"a","text":"hi"}}' % (ORG.encode(), round_)
            )
            return (await receiver.aprocess(body, sign(body, SECRET, ORG))).status

        assert asyncio.run(deliver()) == 200  # each loop: a client or pool of its own
        gc.collect()


def test_a_redis_stores_clients_close_with_their_loops(redis_client: redis.Redis) -> None:
    name = f"sw-test-{uuid.uuid4().hex[:8]}"
    prefix = f"service_webhooks_test:{uuid.uuid4().hex}:"
    receiver = WebhookReceiver(
        SECRET, store=f"{REDIS_URL}?prefix={prefix}&client_name={name}", inbox=False
    )
    try:
        _deliver_in_new_loops(receiver, 3)
        left = [c for c in redis_client.client_list() if c.get("name") == name]
        assert left == []  # each loop's connection was closed as its loop ended
    finally:
        receiver.close()
        keys = list(redis_client.scan_iter(match=prefix + "*"))
        if keys:
            redis_client.delete(*keys)


Admin = psycopg.Connection[tuple[object, ...]]


def _connections_named(admin: Admin, name: str) -> int:
    """Connections open on the server whose ``application_name`` is ``name``."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
    ).fetchone()
    assert row is not None
    count = row[0]
    assert isinstance(count, int)
    return count


def test_a_postgres_stores_and_inboxs_pools_close_with_their_loops(
    admin: Admin, schema: str
) -> None:
    name = f"sw-test-{uuid.uuid4().hex[:8]}"
    receiver = WebhookReceiver(
        SECRET,
        store=f"{POSTGRES_URL}?application_name={name}&table={schema}.keys",
        inbox=True,
    )
    try:
        _deliver_in_new_loops(receiver, 3)
        # before: two asyncio connections per finished loop stayed open (store and
        # inbox), until the process exited. Closed ones may stay listed for a moment
        # (their server process still exiting, longer on a loaded machine): wait
        deadline = time.monotonic() + 10
        while (left := _connections_named(admin, name)) > 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        receiver.close()  # the sync pools (schema creation)
        assert left <= 2
    finally:
        receiver.close()


def test_a_value_is_closed_in_its_loop_at_shutdown_and_reopened_in_the_next() -> None:
    closed: list[tuple[str, asyncio.AbstractEventLoop]] = []

    async def close(value: str) -> None:
        await asyncio.sleep(0)  # it may await: the loop still runs
        closed.append((value, asyncio.get_running_loop()))

    values: PerLoop[str] = PerLoop(close, "a value")
    loops: list[asyncio.AbstractEventLoop] = []

    async def use(value: str) -> None:
        loops.append(asyncio.get_running_loop())
        assert values.get() is None
        values.add(value)
        assert values.get() == value

    asyncio.run(use("first"))
    asyncio.run(use("second"))
    assert closed == [("first", loops[0]), ("second", loops[1])]

    async def use_and_pop() -> str | None:
        values.add("third")
        return await values.pop()

    assert asyncio.run(use_and_pop()) == "third"  # taken out: the caller closes it
    assert len(closed) == 2

    # a loop closed without shutting down: dropped at the next loop's first use
    loop = asyncio.new_event_loop()
    loop.run_until_complete(use("fourth"))
    loop.close()
    asyncio.run(use("fifth"))
    assert [value for value, _ in closed] == ["first", "second", "fifth"]
    assert values.forget() == []


def test_a_loops_pool_has_its_connection_before_the_first_statement(
    admin: Admin, schema: str
) -> None:
    """The first statement of a loop found the pool still connecting, so the pool grew a
    second connection in the background; a loop ending meanwhile cancelled that connect,
    which psycopg_pool took for a failure and retried, and ``asyncio.run`` waited for
    its task forever (1 run in 3 of 40 one-delivery loops hung). The pool is now ready
    first: one statement at a time uses one connection, and nothing is left connecting."""
    from service_webhooks.stores import PostgresStore

    name = f"sw-test-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(f"{POSTGRES_URL}?application_name={name}", table=f"{schema}.keys")

    async def connections_after_statements() -> int:
        for index in range(3):
            await store.aclaim(f"k-{index}", "t", 10)
        await asyncio.sleep(0.3)  # time for a background connect to show
        return _connections_named(admin, name)

    try:
        assert asyncio.run(connections_after_statements()) == 1
    finally:
        store.close()


def test_a_pool_that_cannot_connect_is_opened_again_by_the_next_call() -> None:
    """psycopg_pool closes a pool whose first connection did not come in time: the next
    call in the loop opens another (and times out again), not "the pool is closed"."""
    from psycopg_pool import PoolTimeout

    from service_webhooks.stores import PostgresStore

    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test", timeout=0.3)

    async def twice() -> list[str]:
        errors = []
        for _ in range(2):
            with pytest.raises(PoolTimeout) as raised:
                await store.aclaim("k", "t", 10)
            errors.append(str(raised.value))
        return errors

    try:
        assert len(asyncio.run(twice())) == 2
    finally:
        store.close()


def test_a_cancelled_first_call_leaves_the_next_waiting_for_the_first_connection() -> None:
    """The first call in a loop, cancelled while the pool made its first connection (its
    client went away, a timeout around ``ahandle``), left the pool marked opened: the
    calls after it were handed a pool still connecting, the state whose background
    connects could hang ``asyncio.run``. They now wait for the opening, which the
    cancelled call left running."""
    from psycopg_pool import PoolTimeout

    from service_webhooks.stores import PostgresStore

    silent = socket.socket()  # accepts connections (the kernel does) but never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/test", timeout=0.5)

    async def after_a_cancelled_first_call() -> None:
        first = asyncio.create_task(store.aclaim("k", "t", 10))
        await asyncio.sleep(0.1)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        try:
            await store._async_pool()
            waited = False  # before: the pool at once, still connecting
        except PoolTimeout:  # the opening's wait, which the cancel left running
            waited = True
        finally:  # a loop ending while its pool connects to a silent server never ends
            await store.aclose()
        assert waited

    try:
        asyncio.run(after_a_cancelled_first_call())
    finally:
        store.close()
        silent.close()


def test_a_loop_another_thread_adds_during_the_sweep_of_closed_loops() -> None:
    """Threads running loops of their own (asgiref, a sync view's ``asyncio.run``) share
    one store: a thread's first use sweeps the entries of closed loops while another
    thread adds its own, which raised "dictionary changed size during iteration"."""

    async def close(value: str) -> None:
        pass

    values: PerLoop[str] = PerLoop(close, "a value")
    others: list[asyncio.AbstractEventLoop] = []
    swept: list[bool] = []

    async def use(value: str) -> None:
        values.add(value)

    def other_thread() -> None:
        loop = asyncio.new_event_loop()
        loop.run_until_complete(use("other"))  # still open: its entry stays
        others.append(loop)

    class Swept:
        """A loop of this sweep, during whose check another thread adds its own."""

        def is_closed(self) -> bool:
            if not swept:  # once: the other thread's own sweep checks this one too
                swept.append(True)
                other = threading.Thread(target=other_thread)
                other.start()
                other.join()
            return False

    values._open[Swept()] = ("swept", None)  # type: ignore[index, assignment]
    asyncio.run(use("this"))  # before: RuntimeError
    assert len(others) == 1
    others[0].close()
