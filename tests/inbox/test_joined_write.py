# ruff: noqa: S608  (table names here are generated per test, never user input)
"""A processed delivery's record is written in its completion's transaction when the inbox
and the idempotency store share a database (SQLite file; PostgreSQL connection string).

Both rows or neither: a record that cannot be written rolls the completion back (the key
stays in flight, the answer is 503), and the separate ``record`` call is not made.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sw_services import POSTGRES_URL

from service_webhooks import Event, MemoryStore, SQLiteStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox, SQLiteInbox

SECRET = "whsec-joined"
ORG = "o-JOINED"


def _body(note_id: str) -> bytes:
    data = {"id": note_id, "author": "a", "text": "t"}
    return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()


def _receiver(store: Any, inbox: Any, runs: list[str]) -> WebhookReceiver:
    receiver = WebhookReceiver(SECRET, store=store, inbox=inbox)

    @receiver.on("note.created")
    def handler(event: Event[Any]) -> None:
        runs.append(event.data.id)

    return receiver


async def _deliver(receiver: WebhookReceiver, body: bytes, run_async: bool) -> Any:
    signature = sign(body, SECRET, ORG)
    if run_async:
        return await receiver.aprocess(body, signature)
    return receiver.process(body, signature)


async def _eventually(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    """Whether ``condition()`` holds within ``seconds``, the event loop running meanwhile
    (a claim is released after the answer when the store failed the completion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.01)
    return False


def _no_separate_record(inbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("the processed delivery was recorded apart from its completion")

    monkeypatch.setattr(inbox, "record", refuse)
    monkeypatch.setattr(inbox, "arecord", refuse)


# -- SQLite: store and inbox in one file ------------------------------------------------


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to ``path``, committed at the end of the block and then closed."""
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        yield connection


def _refuse_records(inbox: SQLiteInbox, path: Path, when: str = "") -> None:
    """A trigger makes the database refuse the inbox's inserts (those matching ``when``)."""
    inbox.search()  # creates the table
    with _opened(path) as connection:
        connection.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON service_webhooks_inbox {when} "
            "BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )


@pytest.fixture
def sqlite_pair(tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteInbox, Path]]:
    path = tmp_path / "joined.sqlite3"
    store, inbox = SQLiteStore(path), SQLiteInbox(path)
    yield store, inbox, path
    store.close()
    inbox.close()


def test_which_pairs_share_a_database(tmp_path: Path) -> None:
    one, other = tmp_path / "one.sqlite3", tmp_path / "other.sqlite3"
    assert SQLiteInbox(one).shares_database(SQLiteStore(one))
    assert SQLiteInbox(one).shares_database(SQLiteStore(tmp_path / "." / "one.sqlite3"))
    assert not SQLiteInbox(one).shares_database(SQLiteStore(other))
    assert not SQLiteInbox(one).shares_database(MemoryStore())
    assert _receiver(SQLiteStore(one), None, [])._recorder.joined  # type: ignore[union-attr]
    assert not _receiver(MemoryStore(), MemoryInbox(), [])._recorder.joined  # type: ignore[union-attr]


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_sqlite_processed_delivery_is_recorded_with_its_completion(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path],
    monkeypatch: pytest.MonkeyPatch,
    run_async: bool,
) -> None:
    store, inbox, path = sqlite_pair
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)
    _no_separate_record(inbox, monkeypatch)
    body = _body("n-1")
    outcome = await _deliver(receiver, body, run_async)
    assert (outcome.status, outcome.reason) == (200, "processed")
    [record] = inbox.search().items
    assert (record.reason, record.body, record.seen) == ("processed", body, 1)
    with _opened(path) as connection:
        states = connection.execute("SELECT state FROM service_webhooks_idempotency").fetchall()
    assert states == [("done",)]
    assert runs == ["n-1"]


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_sqlite_record_that_fails_rolls_the_completion_back_and_releases(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path], run_async: bool
) -> None:
    store, inbox, path = sqlite_pair
    _refuse_records(inbox, path)
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)
    outcome = await _deliver(receiver, _body("n-2"), run_async)
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert runs == ["n-2"]  # the handler ran; the service sends the delivery again
    with _opened(path) as connection:
        assert connection.execute("SELECT count(*) FROM service_webhooks_inbox").fetchone() == (0,)

    def states() -> list[Any]:
        with _opened(path) as connection:
            return connection.execute("SELECT state FROM service_webhooks_idempotency").fetchall()

    # not done: the completion was rolled back; the claim released (after the answer),
    # so a retry runs at once instead of getting 503 in_flight until the lease runs out
    assert await _eventually(lambda: states() == [])


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_sqlite_other_answers_are_recorded_through_the_store(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path],
    monkeypatch: pytest.MonkeyPatch,
    run_async: bool,
) -> None:
    """A duplicate, an unhandled event and a handler failure complete no key: their
    records go through the store's own connection (under asyncio: its group commit),
    never through the inbox's own connection or a worker thread."""
    store, inbox, _ = sqlite_pair
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)

    receiver.router.declare("order.refunded")  # not in the spec's catalogue: no warning

    @receiver.on("order.refunded")
    def fails(event: Event[Any]) -> None:
        raise RuntimeError("handler bug")

    _no_separate_record(inbox, monkeypatch)
    note = _body("n-4")
    refund = json.dumps({"eventName": "order.refunded", "version": 1, "data": {}}).encode()
    unknown = json.dumps({"eventName": "order.created", "version": 1, "data": {}}).encode()
    reasons = [(await _deliver(receiver, body, run_async)).reason for body in (note, note)]
    reasons += [(await _deliver(receiver, body, run_async)).reason for body in (unknown, refund)]
    assert reasons == ["processed", "duplicate", "unhandled", "handler_failed"]
    records = {record.reason: record for record in inbox.search().items}
    assert set(records) == set(reasons)
    assert (records["duplicate"].body, records["duplicate"].seen) == (note, 2)
    assert records["unhandled"].body == unknown
    assert runs == ["n-4"]


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_sqlite_other_answer_that_cannot_be_recorded_is_a_503(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path], run_async: bool
) -> None:
    store, inbox, path = sqlite_pair
    _refuse_records(inbox, path, "WHEN NEW.reason = 'duplicate'")
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)
    body = _body("n-5")
    first = await _deliver(receiver, body, run_async)
    again = await _deliver(receiver, body, run_async)
    assert (first.status, again.status, again.reason) == (200, 503, "store_unavailable")
    assert [record.reason for record in inbox.search().items] == ["processed"]
    assert runs == ["n-5"]  # the handler did not run again; the retry is recorded later


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_sqlite_locked_by_another_process_is_answered_after_one_timeout_not_two(
    tmp_path: Path, run_async: bool
) -> None:
    """The store waits its timeout for the lock and fails (503): the record of that
    answer goes through the same locked file, so it is tried once instead of waiting a
    second timeout (with the default 5 s, the answer took 10 s: the service's whole
    response wait). Once the lock is gone the retried delivery is processed and kept."""
    path = tmp_path / "locked.sqlite3"
    store, inbox = SQLiteStore(path, timeout=1.0), SQLiteInbox(path)
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)
    inbox.search()  # both tables exist before the lock
    store.claim("warm-up", "t", 1)
    body = _body("n-locked")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        outcome = await _deliver(receiver, body, run_async)
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert 1.0 <= waited < 1.9, f"answered after {waited:.2f} s; the store's timeout is 1 s"
    assert runs == []
    again = await _deliver(receiver, body, run_async)
    assert (again.status, again.reason) == (200, "processed")
    assert [record.reason for record in inbox.search().items] == ["processed"]
    assert runs == ["n-locked"]
    store.close()
    inbox.close()


def test_sqlite_complete_with_returns_false_for_another_claim(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path],
) -> None:
    store, _, path = sqlite_pair
    store.claim("k", "mine", 60)
    statement = "CREATE TABLE IF NOT EXISTS marks (x)"
    assert store.complete_with("k", "mine", 60, statement, []) is True
    store.claim("k2", "theirs", 60)
    insert = "INSERT INTO marks (x) VALUES (?)"
    assert store.complete_with("k2", "mine", 60, insert, [1]) is False
    with _opened(path) as connection:
        assert connection.execute("SELECT count(*) FROM marks").fetchone() == (1,)


def test_a_replay_adds_to_its_delivery_not_a_new_record(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path],
) -> None:
    store, inbox, _ = sqlite_pair
    receiver = WebhookReceiver(SECRET, store=store, inbox=inbox)
    body = _body("n-3")
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "unhandled"
    runs: list[str] = []
    receiver.on("note.created")(lambda event: runs.append(event.data.id))
    [record] = inbox.search().items
    assert receiver.replay(record.id).reason == "processed"
    [again] = inbox.search().items
    assert again.id == record.id
    assert [replay.reason for replay in again.replays] == ["processed"]
    assert runs == ["n-3"]


# -- PostgreSQL: store and inbox on one connection string -------------------------------


@pytest.fixture
def postgres_pair(postgres_url: str) -> Iterator[tuple[Any, Any, str]]:
    psycopg = pytest.importorskip("psycopg")
    from service_webhooks.inbox import PostgresInbox
    from service_webhooks.stores import PostgresStore

    suffix = uuid.uuid4().hex[:12]
    store = PostgresStore(POSTGRES_URL, table=f"sw_joined_store_{suffix}", max_size=2)
    inbox = PostgresInbox(POSTGRES_URL, table=f"sw_joined_inbox_{suffix}", max_size=2)
    inbox.create_schema()
    yield store, inbox, suffix
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS sw_joined_store_{suffix}")
        connection.execute(f"DROP FUNCTION IF EXISTS sw_refuse_{suffix}() CASCADE")
    inbox.drop_schema()
    inbox.close()
    store.close()


def test_postgres_pairs_on_one_connection_string_share_a_database(
    postgres_pair: tuple[Any, Any, str],
) -> None:
    from service_webhooks.inbox import PostgresInbox
    from service_webhooks.stores import PostgresStore

    store, inbox, _ = postgres_pair
    assert inbox.shares_database(store)
    elsewhere = PostgresStore(POSTGRES_URL + "?application_name=elsewhere", table=store.table)
    assert not inbox.shares_database(elsewhere)
    assert not PostgresInbox(POSTGRES_URL, table="x").shares_database(MemoryStore())


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_postgres_processed_delivery_is_recorded_with_its_completion(
    postgres_pair: tuple[Any, Any, str], monkeypatch: pytest.MonkeyPatch, run_async: bool
) -> None:
    import psycopg

    store, inbox, suffix = postgres_pair
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)
    _no_separate_record(inbox, monkeypatch)
    body = _body("n-4")
    try:
        outcome = await _deliver(receiver, body, run_async)
    finally:
        await store.aclose()
        await inbox.aclose()
    assert (outcome.status, outcome.reason) == (200, "processed")
    [record] = inbox.search().items
    assert (record.reason, record.body, record.seen) == ("processed", body, 1)
    with psycopg.connect(POSTGRES_URL) as connection:
        states = connection.execute(f"SELECT state FROM sw_joined_store_{suffix}").fetchall()
    assert states == [("done",)]


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_postgres_record_that_fails_rolls_the_completion_back_and_releases(
    postgres_pair: tuple[Any, Any, str], run_async: bool
) -> None:
    import psycopg

    store, inbox, suffix = postgres_pair
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(
            f"CREATE FUNCTION sw_refuse_{suffix}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'disk says no'; END $$"
        )
        connection.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {inbox.table} "
            f"FOR EACH ROW EXECUTE FUNCTION sw_refuse_{suffix}()"
        )
    runs: list[str] = []
    receiver = _receiver(store, inbox, runs)

    def states() -> list[Any]:
        with psycopg.connect(POSTGRES_URL) as connection:
            return connection.execute(f"SELECT state FROM sw_joined_store_{suffix}").fetchall()

    try:
        outcome = await _deliver(receiver, _body("n-5"), run_async)
        # rolled back, then the claim released (after the answer): a retry runs at once
        assert await _eventually(lambda: states() == [])
    finally:
        await store.aclose()
        await inbox.aclose()
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert runs == ["n-5"]
    with psycopg.connect(POSTGRES_URL) as connection:
        count = connection.execute(f"SELECT count(*) FROM {inbox.table}").fetchone()
    assert count == (0,)


def test_postgres_complete_with_creates_a_missing_store_table(
    postgres_pair: tuple[Any, Any, str],
) -> None:
    import psycopg

    store, _, suffix = postgres_pair
    marks = f"sw_joined_marks_{suffix}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f"CREATE TABLE {marks} (x int)")
    try:
        insert = f"INSERT INTO {marks} (x) VALUES (%s)"
        assert store.complete_with("k", "mine", 60, insert, [7]) is True
        store.claim("k2", "theirs", 60)
        assert store.complete_with("k2", "mine", 60, insert, [8]) is False
        with psycopg.connect(POSTGRES_URL) as connection:
            rows = connection.execute(f"SELECT state FROM sw_joined_store_{suffix} ORDER BY key")
            assert rows.fetchall() == [("done",), ("in_flight",)]
            marked = connection.execute(f"SELECT x FROM {marks} ORDER BY x").fetchall()
        assert marked == [(7,), (8,)]  # one statement: the second ran though not completed
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {marks}")


# -- the joined record holds what a separately written one holds ------------------------


def _fields(record: Any) -> tuple[Any, ...]:
    return (
        record.organization_id,
        record.event_name,
        record.version,
        record.idempotency_key,
        record.body,
        record.content_type,
        record.user_agent,
        record.status,
        record.reason,
        record.detail,
        record.seen,
        record.error_type,
        record.error_message,
        record.traceback,
        record.replays,
        record.received_at.tzinfo is not None,
        record.handler_time is not None and record.handler_time >= 0,
    )


async def _processed_twice(receiver: WebhookReceiver, inbox: Any, run_async: bool) -> Any:
    """A body delivered and processed, then its key done again (duplicate): the records of
    both, oldest first."""
    body = _body("n-fields")
    signature = sign(body, SECRET, ORG)
    for _ in range(2):
        if run_async:
            await receiver.aprocess(
                body, signature, content_type="application/json", user_agent="UA/1"
            )
        else:
            receiver.process(body, signature, content_type="application/json", user_agent="UA/1")
    return list(reversed(inbox.search().items))


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_joined_records_hold_every_field_a_separate_record_holds(
    sqlite_pair: tuple[SQLiteStore, SQLiteInbox, Path],
    postgres_pair: tuple[Any, Any, str],
    run_async: bool,
) -> None:
    reference_inbox = MemoryInbox()
    reference = await _processed_twice(
        _receiver(MemoryStore(), reference_inbox, []), reference_inbox, run_async
    )
    assert [r.reason for r in reference] == ["processed", "duplicate"]
    sqlite_store, sqlite_inbox, path = sqlite_pair
    pg_store, pg_inbox, suffix = postgres_pair
    try:
        for store, inbox in ((sqlite_store, sqlite_inbox), (pg_store, pg_inbox)):
            assert _receiver(store, inbox, [])._recorder.joined  # type: ignore[union-attr]
            records = await _processed_twice(_receiver(store, inbox, []), inbox, run_async)
            assert [_fields(r) for r in records] == [_fields(r) for r in reference], inbox
            first = records[0]
            assert abs((first.received_at - reference[0].received_at).total_seconds()) < 60
            assert first.id[12] == "7"  # a UUIDv7
    finally:
        await pg_store.aclose()
        await pg_inbox.aclose()
    # the size each backend counts against max_bytes: the body (no traceback)
    with _opened(path) as connection:
        sizes = connection.execute("SELECT size FROM service_webhooks_inbox").fetchall()
    assert sizes == [(len(reference[0].body),)] * 2
    import psycopg

    with psycopg.connect(POSTGRES_URL) as connection:
        sizes = connection.execute(f"SELECT size FROM sw_joined_inbox_{suffix}").fetchall()
    assert sizes == [(len(reference[0].body),)] * 2
