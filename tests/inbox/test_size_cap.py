# ruff: noqa: S608  (table names here are generated per test, never user input)
"""The ``max_bytes`` cap: the oldest records go first, until the newest ones total at most
``max_bytes`` (bodies and tracebacks; ties in ``received_at`` by ID), on every backend,
through ``prune()`` and the automatic step on a delivery's path (one batch at most).

The SQL backends read the total from the table's size total, which triggers keep in the
transaction of every write, whoever makes it: several processes on one SQLite file or
one PostgreSQL table, a store's joined write, a purge, a truncate. A table made before
the size total existed gets it with its records' sum; a PostgreSQL table without it
still holds the cap, by summing every record.
"""

from __future__ import annotations

import datetime
import json
import logging
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sw_inbox_contract import delivery

from service_webhooks import SQLiteStore, WebhookReceiver, sign
from service_webhooks.inbox import Inbox, InboxQuery, ReceivedDelivery, Replay, SQLiteInbox
from service_webhooks.inbox import _sql as sql_inbox
from service_webhooks.inbox._base import to_micros
from service_webhooks.inbox._sql import size_total_table

from .conftest import BACKENDS, POSTGRES_URL

UTC = datetime.UTC
WRITER = Path(__file__).with_name("size_cap_writer.py")
SECRET = "whsec-size-cap"


def newest_within(records: Iterable[tuple[str, int, int]], cap: int) -> set[str]:
    """IDs of the newest ``(id, received_at µs, size)`` records that total at most ``cap``."""
    kept: set[str] = set()
    total = 0
    for record_id, _, size in sorted(records, key=lambda r: (r[1], r[0]), reverse=True):
        total += size
        if total > cap:
            break
        kept.add(record_id)
    return kept


def described(records: Iterable[ReceivedDelivery]) -> list[tuple[str, int, int]]:
    return [(r.id, to_micros(r.received_at), r.size) for r in records]


def ids(inbox: Inbox) -> set[str]:
    """Every record's ID, page after page."""
    found: set[str] = set()
    cursor = None
    while True:
        page = inbox.search(limit=1000, cursor=cursor)
        found.update(record.id for record in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return found


def totals(inbox: Any) -> tuple[int, int]:
    """``(the size total, the sum of every record's size)`` of a SQL inbox."""
    table = inbox.table
    [(counted, summed)] = inbox._query(
        f"SELECT (SELECT SUM(bytes) FROM {size_total_table(table)}),"
        f" (SELECT COALESCE(SUM(size), 0) FROM {table})",
        [],
    )
    return int(counted), int(summed)


def varied(now: datetime.datetime, count: int, seed: int = 7) -> list[ReceivedDelivery]:
    """``count`` records of varied sizes received in the last minutes, a few of them at
    the same microsecond (their IDs order them), some with tracebacks."""
    chance = random.Random(seed)
    records = []
    for index in range(count):
        tick = index - 1 if index % 4 == 1 else index  # 4k + 1 received with 4k
        at = now - datetime.timedelta(seconds=count - tick)
        record = delivery(at=at, body=b"x" * chance.randrange(1, 120))
        if chance.random() < 0.3:
            record = msgspec.structs.replace(record, traceback="t" * chance.randrange(1, 80))
        records.append(record)
    return records


@pytest.fixture(params=["postgres", "sqlite"])
def make_sql_inbox(request: pytest.FixtureRequest, async_cleanup: list[Any]) -> Callable[..., Any]:
    """``make_sql_inbox(**options)``: a fresh SQLite or PostgreSQL inbox (the table made
    as ``create_schema()`` makes it for these options)."""
    factory = BACKENDS[request.param]
    return lambda **options: factory(request, **options)


@pytest.fixture
def make_postgres_inbox(
    request: pytest.FixtureRequest, async_cleanup: list[Any]
) -> Callable[..., Any]:
    return lambda **options: BACKENDS["postgres"](request, **options)


# -- the cap, on every backend ---------------------------------------------------------


def test_prune_keeps_exactly_the_newest_records_within_the_cap(
    make_inbox: Callable[..., Inbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)  # several batches for one prune()
    records = varied(datetime.datetime.now(UTC), 30)
    newest = sorted(described(records), key=lambda r: (r[1], r[0]), reverse=True)
    # the 13 newest fill the cap exactly: the 13th was received with the 14th, ranked
    # after it by ID
    assert newest[12][1] == newest[13][1]
    exact = sum(size for _, _, size in newest[:13])
    for cap in (exact, exact - 1, exact + 1):
        inbox = make_inbox(max_bytes=cap)
        for record in random.Random(cap).sample(records, len(records)):  # any order
            inbox.record(record)
        kept = newest_within(described(records), cap)
        assert inbox.prune() == len(records) - len(kept)
        assert ids(inbox) == kept
        assert len(kept) == (13 if cap >= exact else 12)
        assert inbox.prune() == 0


def test_the_oldest_record_larger_than_the_cap_alone_goes_too(
    make_inbox: Callable[..., Inbox],
) -> None:
    now = datetime.datetime.now(UTC)
    large = delivery(at=now - datetime.timedelta(seconds=2), body=b"x" * 500)
    small = delivery(at=now - datetime.timedelta(seconds=1), body=b"x" * 10)
    inbox = make_inbox(max_bytes=100)
    inbox.record(large)
    inbox.record(small)
    assert inbox.prune() == 1
    assert ids(inbox) == {small.id}


# -- the automatic step: one batch at most ---------------------------------------------


def test_each_automatic_step_deletes_one_batch_oldest_first(
    make_sql_inbox: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)
    now = datetime.datetime.now(UTC)
    records = [
        delivery(at=now - datetime.timedelta(seconds=100 - i), body=b"x" * 10) for i in range(10)
    ]
    inbox = make_sql_inbox(max_bytes=25, prune_every=0)  # room for the newest 2
    for record in records:
        inbox.record(record)
    inbox._prune_step()
    assert ids(inbox) == {r.id for r in records[3:]}
    inbox._prune_step()
    assert ids(inbox) == {r.id for r in records[6:]}
    inbox._prune_step()
    assert ids(inbox) == {r.id for r in records[8:]}
    inbox._prune_step()
    assert ids(inbox) == {r.id for r in records[8:]}


def test_recording_runs_the_step_every_prune_every_records(
    make_sql_inbox: Callable[..., Any],
) -> None:
    now = datetime.datetime.now(UTC)
    records = [
        delivery(at=now - datetime.timedelta(seconds=100 - i), body=b"x" * 10) for i in range(10)
    ]
    inbox = make_sql_inbox(max_bytes=30, prune_every=5)
    for record in records[:4]:
        inbox.record(record)
    assert len(ids(inbox)) == 4  # over the cap, no step yet
    inbox.record(records[4])
    assert ids(inbox) == {r.id for r in records[2:5]}
    for record in records[5:]:
        inbox.record(record)
    assert ids(inbox) == {r.id for r in records[7:]}


async def test_a_postgres_async_record_runs_the_bounded_step_and_is_never_failed_by_it(
    make_postgres_inbox: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``arecord`` on its own asyncio pool prunes like ``record``: one batch, and a prune
    that fails is logged, not raised (the record is written, the answer stands)."""
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)
    now = datetime.datetime.now(UTC)
    inbox = make_postgres_inbox(max_bytes=25, prune_every=1)
    records = [
        delivery(at=now - datetime.timedelta(seconds=100 - i), body=b"x" * 10) for i in range(8)
    ]
    inbox._prune_every = 0
    for record in records[:-1]:
        inbox.record(record)
    inbox._prune_every = 1
    assert await inbox.arecord(records[-1]) == 1
    assert ids(inbox) == {r.id for r in records[3:]}  # one batch of 3, not all 6 over

    def locked(execute: object) -> int:
        raise TimeoutError("the table is locked")

    monkeypatch.setattr(inbox, "_prune_batch", locked)
    late = delivery(at=now, body=b"x" * 10)
    with caplog.at_level(logging.WARNING, "service_webhooks"):
        assert await inbox.arecord(late) == 1
    assert "inbox prune step failed: TimeoutError" in caplog.text
    assert late.id in ids(inbox)


# -- the size total follows every write ------------------------------------------------


def _store_beside(inbox: Any, request: pytest.FixtureRequest) -> Any:
    """An idempotency store in the inbox's database (its processed records are joined
    to their completions)."""
    if isinstance(inbox, SQLiteInbox):
        store: Any = SQLiteStore(inbox.path)
    else:
        from service_webhooks.stores import PostgresStore

        store = PostgresStore(POSTGRES_URL, table=f"{inbox.table}_store", max_size=2)
        store.create_schema()

        def drop() -> None:
            import psycopg

            with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
                connection.execute(f"DROP TABLE IF EXISTS {store.table}".encode())

        request.addfinalizer(drop)
    request.addfinalizer(store.close)
    assert inbox.shares_database(store)
    return store


async def test_the_size_total_follows_every_write(
    make_sql_inbox: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    now = datetime.datetime.now(UTC)
    inbox = make_sql_inbox(max_bytes=10**9, prune_every=0)
    inbox.prune()  # SQLite makes its size total the first time it prunes
    assert totals(inbox) == (0, 0)
    records = varied(now, 12)
    for record in records[:6]:
        inbox.record(record)
    for record in records[6:]:
        await inbox.arecord(record)
    assert totals(inbox)[0] == sum(r.size for r in records)

    receiver = WebhookReceiver(SECRET, store=_store_beside(inbox, request), inbox=inbox)
    receiver.on("note.created")(lambda event: None)
    assert receiver._recorder.joined  # type: ignore[union-attr]
    answers = []
    for number, name in enumerate(["note.created"] * 4 + ["note.deleted"] * 2):
        data = {"id": f"n-{number}", "author": "a", "text": "t"}
        body = json.dumps({"eventName": name, "version": 1, "data": data}).encode()
        signature = sign(body, SECRET, "o-1")
        if number % 2:
            answers.append((await receiver.aprocess(body, signature)).reason)
        else:
            answers.append(receiver.process(body, signature).reason)
    # processed: recorded in the completion's transaction; unhandled: apart from it
    assert answers == ["processed"] * 4 + ["unhandled"] * 2
    counted, summed = totals(inbox)
    assert counted == summed
    assert summed > sum(r.size for r in records)

    assert inbox.add_replay(records[0].id, Replay(at=now, status=200, reason="processed"))
    assert totals(inbox)[0] == summed
    grow = inbox._sql(f"UPDATE {inbox.table} SET size = size + 5 WHERE id = ?")
    inbox._execute(grow, [records[1].id])
    counted, summed = totals(inbox)
    assert counted == summed
    assert inbox.purge(InboxQuery(id_prefix=records[2].id)) == 1
    assert inbox.purge(InboxQuery(reasons=("unhandled",))) == 2
    assert totals(inbox)[0] == totals(inbox)[1]
    inbox.max_bytes = 200
    inbox.prune()
    counted, summed = totals(inbox)
    assert counted == summed <= 200
    if not isinstance(inbox, SQLiteInbox):
        inbox._execute(f"TRUNCATE {inbox.table}", [])
        assert totals(inbox) == (0, 0)
    inbox.record(delivery(at=now))
    inbox.purge()
    assert totals(inbox) == (0, 0)


# -- tables made before the size total -------------------------------------------------


def test_a_sqlite_file_gets_its_size_total_from_the_records_already_there(
    tmp_path: Path,
) -> None:
    path = tmp_path / "older.sqlite3"
    records = varied(datetime.datetime.now(UTC), 20)
    older = SQLiteInbox(path)  # no cap: no size total
    for record in records:
        older.record(record)
    older.prune()
    made = older._query("SELECT count(*) FROM sqlite_master WHERE name LIKE '%size_total%'", [])
    assert made == [(0,)]
    capped = SQLiteInbox(path, max_bytes=600)
    kept = newest_within(described(records), 600)
    assert capped.prune() == len(records) - len(kept)
    assert ids(capped) == kept
    assert (
        totals(capped)[0]
        == totals(capped)[1]
        == sum(size for record_id, _, size in described(records) if record_id in kept)
    )
    older.record(delivery(at=datetime.datetime.now(UTC)))  # any writer keeps it
    assert totals(capped)[0] == totals(capped)[1]
    older.close()
    capped.close()


def test_a_postgres_table_gets_its_size_total_from_create_schema_on_a_capped_inbox(
    make_postgres_inbox: Callable[..., Any],
) -> None:
    from service_webhooks.inbox import PostgresInbox

    records = varied(datetime.datetime.now(UTC), 20)
    older = make_postgres_inbox()  # no cap: create_schema() made no size total
    for record in records:
        older.record(record)
    assert older._query("SELECT to_regclass(%s)", [size_total_table(older.table)]) == [(None,)]
    capped = PostgresInbox(POSTGRES_URL, table=older.table, max_bytes=600, max_size=2)
    try:
        capped.create_schema()
        capped.create_schema()  # again: nothing counted twice
        assert totals(capped)[0] == totals(capped)[1] == sum(r.size for r in records)
        kept = newest_within(described(records), 600)
        assert capped.prune() == len(records) - len(kept)
        assert ids(capped) == kept
    finally:
        capped.close()


def test_a_postgres_table_without_its_size_total_still_holds_the_cap(
    make_postgres_inbox: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(sql_inbox, "PRUNE_BATCH", 3)
    records = varied(datetime.datetime.now(UTC), 20)
    inbox = make_postgres_inbox(prune_every=0)  # the table as schema_sql() makes it
    inbox.max_bytes = 600
    for record in records:
        inbox.record(record)
    kept = newest_within(described(records), 600)
    with caplog.at_level(logging.WARNING, "service_webhooks"):
        inbox._prune_step()  # all at once, as before the size total
        assert ids(inbox) == kept
        inbox.prune()
    assert ids(inbox) == kept
    warnings = [r.getMessage() for r in caplog.records if "size total" in r.getMessage()]
    assert len(warnings) == 1
    assert "create_schema()" in warnings[0]
    assert "schema_sql(table, size_total=True)" in warnings[0]


def test_postgres_schema_sql_with_the_size_total_runs_alone_twice(
    make_postgres_inbox: Callable[..., Any],
) -> None:
    """The DDL for migrations, run outside any transaction (each statement its own), as
    ``psql -f`` runs it: the size total starts from the records there, once."""
    import psycopg

    from service_webhooks.inbox import PostgresInbox

    inbox = make_postgres_inbox()
    records = varied(datetime.datetime.now(UTC), 5)
    for record in records:
        inbox.record(record)
    ddl = PostgresInbox.schema_sql(inbox.table, size_total=True)
    assert PostgresInbox.schema_sql(inbox.table).count("DO $") == 0
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(ddl.encode())
        connection.execute(ddl.encode())
        with connection.transaction():  # and inside a migration's transaction
            connection.execute(ddl.encode())
    assert totals(inbox)[0] == totals(inbox)[1] == sum(r.size for r in records)


def test_a_postgres_role_that_may_only_write_the_inbox_keeps_the_size_total(
    make_postgres_inbox: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A role granted only the inbox table writes records while the owner makes the
    size total: the triggers run as the owner and keep it through that role's writes.
    Without ``SELECT`` on it the role's cap sums every record (warned); with it, the
    cap reads it."""
    import psycopg

    from service_webhooks.inbox import PostgresInbox

    owner = make_postgres_inbox()  # no cap: no size total yet
    role = f"sw_cap_writer_{uuid.uuid4().hex[:8]}"
    url = psycopg.conninfo.make_conninfo(POSTGRES_URL, user=role)
    records = varied(datetime.datetime.now(UTC), 20)
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN".encode())
        try:
            grant = f"GRANT SELECT, INSERT, UPDATE, DELETE ON {owner.table} TO {role}"
            admin.execute(grant.encode())
            writer = PostgresInbox(url, table=owner.table, max_bytes=600, max_size=1)
            try:
                for record in records[:10]:
                    writer.record(record)
                PostgresInbox(POSTGRES_URL, table=owner.table, max_bytes=1).create_schema()
                for record in records[10:]:
                    writer.record(record)
                assert totals(owner)[0] == totals(owner)[1] == sum(r.size for r in records)
                with caplog.at_level(logging.WARNING, "service_webhooks"):
                    writer.prune()
                assert ids(owner) == newest_within(described(records), 600)
                assert "has no size total" in caplog.text  # it may not read it
                assert totals(owner)[0] == totals(owner)[1]
            finally:
                writer.close()
            admin.execute(f"GRANT SELECT ON {size_total_table(owner.table)} TO {role}".encode())
            caplog.clear()
            reader = PostgresInbox(url, table=owner.table, max_bytes=300, max_size=1)
            try:
                with caplog.at_level(logging.WARNING, "service_webhooks"):
                    reader.prune()
                assert reader._size_total_found
                assert "size total" not in caplog.text
                assert ids(owner) == newest_within(described(records), 300)
            finally:
                reader.close()
        finally:
            admin.execute(f"DROP OWNED BY {role}".encode())
            admin.execute(f"DROP ROLE {role}".encode())


# -- several writers at once -----------------------------------------------------------


def _start_writers(
    backend: str, where: str, table: str, cap: int, processes: int, count: int
) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(WRITER),
                backend,
                where,
                table,
                str(cap),
                "7",
                str(count),
                str(seed),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(processes)
    ]


def _written(writers: list[subprocess.Popen[str]]) -> list[tuple[str, int, int]]:
    rows: list[tuple[str, int, int]] = []
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        rows.extend(tuple(json.loads(line)) for line in out.splitlines())
    return rows


def test_several_processes_on_one_sqlite_file_keep_the_cap_and_the_total(
    tmp_path: Path,
) -> None:
    """Four processes record and prune at once (every 7 records each) into a file that
    has records but no size total yet: one of them makes it, every one keeps it; the
    records left are exactly the newest of all those written within the cap."""
    path = tmp_path / "shared.sqlite3"
    before = varied(datetime.datetime.now(UTC) - datetime.timedelta(minutes=10), 30)
    older = SQLiteInbox(path)
    for record in before:
        older.record(record)
    older.close()
    cap = 8000
    writers = _start_writers("sqlite", str(path), "service_webhooks_inbox", cap, 4, 300)
    written = [*described(before), *_written(writers)]
    inbox = SQLiteInbox(path, max_bytes=cap)
    try:
        counted, summed = totals(inbox)
        assert counted == summed
        inbox.prune()
        assert ids(inbox) == newest_within(written, cap)
        assert totals(inbox)[0] == totals(inbox)[1]
    finally:
        inbox.close()


def test_several_processes_on_one_postgres_table_keep_the_cap_and_the_total(
    make_postgres_inbox: Callable[..., Any],
) -> None:
    """Four processes record and prune at once into a table made without a size total
    (their cap sums every record); the size total is made while they write (they wait
    for its lock, then read it). It matches the records exactly, and the records left
    are exactly the newest of all those written within the cap."""
    from service_webhooks.inbox import PostgresInbox

    plain = make_postgres_inbox()
    before = varied(datetime.datetime.now(UTC) - datetime.timedelta(minutes=10), 30)
    for record in before:
        plain.record(record)
    cap = 8000
    writers = _start_writers("postgres", POSTGRES_URL, plain.table, cap, 4, 300)
    capped = PostgresInbox(POSTGRES_URL, table=plain.table, max_bytes=cap, max_size=2)
    try:
        deadline = time.monotonic() + 60
        recent = datetime.datetime.now(UTC) - datetime.timedelta(minutes=5)
        while not plain.counts(since=recent) and time.monotonic() < deadline:
            time.sleep(0.01)  # until they write (the test holds whenever it is made)
        capped.create_schema()
        written = [*described(before), *_written(writers)]
        counted, summed = totals(capped)
        assert counted == summed
        capped.prune()
        assert ids(capped) == newest_within(written, cap)
        assert totals(capped)[0] == totals(capped)[1]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
        capped.close()
