"""SQLiteStore specifics beyond the shared contract."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from service_webhooks.stores import MIN_RETENTION, ClaimState, SQLiteStore


def test_sqlite_store_create_schema_creates_file_and_table(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.create_schema()
    store.close()
    with closing(sqlite3.connect(tmp_path / "keys.sqlite3")) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        assert [row[0] for row in tables] == ["service_webhooks_idempotency"]


def _locked_new_file(path: Path, seconds: float) -> threading.Timer:
    """A new file still in rollback-journal mode whose write lock another connection
    holds for ``seconds``: switching it to WAL is refused at once meanwhile."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x)")
    holder.execute("BEGIN IMMEDIATE")

    def release() -> None:
        holder.execute("COMMIT")
        holder.close()

    timer = threading.Timer(seconds, release)
    timer.start()
    return timer


def test_connections_opened_while_the_write_lock_is_held_wait_for_wal(tmp_path: Path) -> None:
    """Threads of a server starting on a new file: the switch to WAL waits for the
    lock within the store's timeout instead of failing with "database is locked"."""
    path = tmp_path / "keys.sqlite3"
    timer = _locked_new_file(path, 0.2)
    store = SQLiteStore(path, timeout=5)
    assert store.claim("k", "t", 60) is ClaimState.NEW
    timer.join()
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store.close()


def test_the_switch_to_wal_gives_up_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    timer = _locked_new_file(path, 0.5)
    store = SQLiteStore(path, timeout=0.05)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store.claim("k", "t", 60)
    timer.join()
    assert store.claim("k", "t", 60) is ClaimState.NEW  # nothing half-open was kept
    store.close()


def test_a_new_file_keeps_keys_in_one_b_tree(tmp_path: Path) -> None:
    """No rowid: the table is its key's B-tree (one page per write, not two)."""
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.create_schema()
    store.close()
    with closing(sqlite3.connect(tmp_path / "keys.sqlite3")) as connection:
        (sql,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'service_webhooks_idempotency'"
        ).fetchone()
        indexes = connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        assert sql.rstrip().endswith("WITHOUT ROWID")
        assert indexes.fetchall() == []


def test_a_file_with_the_earlier_rowid_table_still_works(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute(
            "CREATE TABLE service_webhooks_idempotency (key TEXT PRIMARY KEY, "
            "state TEXT NOT NULL, token TEXT NOT NULL, expires_at REAL NOT NULL)"
        )
        connection.commit()
    store = SQLiteStore(path)
    try:
        assert store.claim("k", "t1", 60) is ClaimState.NEW
        assert store.claim("k", "t2", 60) is ClaimState.IN_FLIGHT
        assert store.complete("k", "t1", 3600)
        assert store.claim("k", "t3", 60) is ClaimState.DONE
        assert not store.release("k", "t1")
    finally:
        store.close()


def test_prune_steps_sweep_the_table_a_slice_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step looks at the next PRUNE_SLICE keys only; steps wrap around, so every
    expired row goes within one sweep, and live rows stay."""
    import service_webhooks.stores._sqlite as module

    monkeypatch.setattr(module, "PRUNE_SLICE", 4)
    now = [1000.0]
    store = SQLiteStore(tmp_path / "keys.sqlite3", prune_every=0, clock=lambda: now[0])
    for index in range(10):  # k0..k9: the even ones expire at 1010, the odd ones live on
        store.claim(f"k{index}", "t", 10 if index % 2 == 0 else 10_000)
    now[0] = 1020.0
    assert [store.prune_step() for _ in range(4)] == [2, 2, 1, 0]  # k0-k3, k4-k7, k8-k9, end
    with closing(sqlite3.connect(store.path)) as connection:
        left = connection.execute("SELECT key FROM service_webhooks_idempotency ORDER BY key")
        assert [row[0] for row in left] == ["k1", "k3", "k5", "k7", "k9"]
    store.claim("k0", "t", 1)  # expires at 1021
    now[0] = 1030.0
    assert store.prune_step() == 1  # wrapped around: from the first key again
    assert store.prune() == 0
    store.close()


def test_claims_run_a_prune_step_every_prune_every_claims(tmp_path: Path) -> None:
    steps: list[int] = []

    class Counting(SQLiteStore):
        def prune_step(self) -> int:
            steps.append(1)
            return super().prune_step()

    store = Counting(tmp_path / "keys.sqlite3", prune_every=3)
    for index in range(7):
        store.claim(f"k{index}", "t", 60)
    assert len(steps) == 2
    store.close()


# -- under asyncio: on the event loop, never waiting there ---------------------------------


async def test_async_twins_run_on_the_event_loop_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3", prune_every=0)

    async def no_thread(*args: Any) -> Any:
        raise AssertionError("an uncontended SQLite call went to a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    try:
        assert await store.aclaim("k", "t", 60) is ClaimState.NEW
        assert await store.aclaim("k", "other", 60) is ClaimState.IN_FLIGHT
        assert await store.acomplete("k", "t", MIN_RETENTION) is True
        assert await store.aclaim("k", "other", 60) is ClaimState.DONE
        assert await store.aclaim("k2", "t", 60) is ClaimState.NEW
        assert await store.arelease("k2", "t") is True
        assert await store.acomplete_with("k3", "t", 60, "SELECT 1", []) is True
    finally:
        store.close()
    assert store.claim("k", "again", 60) is ClaimState.DONE  # what the loop wrote is on disk


async def test_a_held_write_lock_makes_the_call_wait_and_the_loop_keeps_running(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path)
    store.create_schema()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(ticker())
    try:
        claiming = asyncio.create_task(store.aclaim("k", "t", 60))
        await asyncio.sleep(0.3)
        assert not claiming.done()  # waiting for the lock, on the loop
        seen = ticks
        assert seen >= 10  # the loop was never blocked meanwhile
        holder.execute("COMMIT")
        assert await asyncio.wait_for(claiming, 5) is ClaimState.NEW
    finally:
        ticking.cancel()
        holder.close()
        store.close()


async def test_a_call_refused_while_the_store_checkpoints_waits_for_that_checkpoint(
    tmp_path: Path,
) -> None:
    """The store's own checkpoint holding the lock ends when its thread is done: a
    refused call waits for exactly that, then queues again, with no backoff guesses."""
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path)
    store.create_schema()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # as the checkpoint's full step holds it
    checkpoint: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    store._checkpoints.add(checkpoint)
    attempts = 0
    queue = store._in_group

    def counted(work: Any, args: tuple[Any, ...]) -> Any:
        nonlocal attempts
        attempts += 1
        return queue(work, args)

    store._in_group = counted  # type: ignore[method-assign]
    try:
        claiming = asyncio.create_task(store.aclaim("k", "t", 60))
        await asyncio.sleep(0.2)  # the backoff would have tried about ten times by now
        assert not claiming.done()
        assert attempts == 1
        holder.execute("COMMIT")
        checkpoint.set_result(None)
        assert await asyncio.wait_for(claiming, 1) is ClaimState.NEW
        assert attempts == 2
    finally:
        holder.close()
        store.close()


async def test_a_write_lock_held_past_the_timeout_fails_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path, timeout=0.3)
    store.create_schema()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    async def no_thread(*args: Any) -> Any:
        raise AssertionError("a locked call went to a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    started = asyncio.get_running_loop().time()
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await store.aclaim("k", "t", 60)
        assert asyncio.get_running_loop().time() - started >= 0.3  # it waited its timeout
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert await store.aclaim("k", "t", 60) is ClaimState.NEW  # nothing half-written
    store.close()


async def test_a_failed_joined_write_on_the_loop_leaves_no_transaction_open(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    await store.aclaim("k", "t", 60)
    with pytest.raises(sqlite3.OperationalError):
        await store.acomplete_with("k", "t", 60, "INSERT INTO missing VALUES (1)", [])
    assert await store.aclaim("k", "other", 60) is ClaimState.IN_FLIGHT  # not completed
    assert await store.acomplete("k", "t", 60) is True  # the connection still works
    store.close()


def _statements(connection: sqlite3.Connection) -> list[str]:
    """Every statement ``connection`` runs from now on."""
    seen: list[str] = []
    connection.set_trace_callback(seen.append)
    return seen


def _store_beside(path: Path, *tables: str) -> SQLiteStore:
    """A store on ``path`` with its table, and ``tables`` (``CREATE TABLE`` statements)
    beside it in the same file."""
    store = SQLiteStore(path)
    store.create_schema()
    with closing(sqlite3.connect(path)) as setup:
        for table in tables:
            setup.execute(table)
        setup.commit()
    return store


def _transactions(statements: list[str]) -> int:
    return sum(1 for statement in statements if statement == "BEGIN IMMEDIATE")


async def test_calls_made_in_one_turn_of_the_loop_share_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path)
    statements = _statements(store._loop_connection())
    claims = await asyncio.gather(*(store.aclaim(f"k{i}", "t", 60) for i in range(10)))
    assert claims == [ClaimState.NEW] * 10
    assert _transactions(statements) == 1
    assert statements.count("COMMIT") == 1
    with closing(sqlite3.connect(path)) as other:  # committed: another connection sees them
        (count,) = other.execute("SELECT count(*) FROM service_webhooks_idempotency").fetchone()
        assert count == 10
    store.close()


async def test_a_call_alone_in_its_turn_is_autocommitted_unless_it_writes_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(path, "CREATE TABLE side (n INTEGER)")
    statements = _statements(store._loop_connection())
    assert await store.aclaim("k", "t", 60) is ClaimState.NEW
    assert _transactions(statements) == 0  # one statement: its own transaction
    assert await store.acomplete_with("k", "t", 60, "INSERT INTO side VALUES (1)", []) is True
    assert _transactions(statements) == 1  # two writes: one transaction
    store.close()


async def test_a_failing_call_in_a_group_undoes_only_its_own_statements(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(path, "CREATE TABLE side (n INTEGER)")
    for key in ("a", "b", "c"):
        await store.aclaim(key, "t", 60)
    statements = _statements(store._loop_connection())
    results = await asyncio.gather(
        store.acomplete_with("a", "t", 60, "INSERT INTO missing VALUES (1)", []),
        store.acomplete("b", "t", 60),
        store.acomplete_with("c", "t", 60, "INSERT INTO side VALUES (?)", [7]),
        return_exceptions=True,
    )
    assert isinstance(results[0], sqlite3.OperationalError)
    assert results[1:] == [True, True]
    assert _transactions(statements) == 1
    assert await store.aclaim("a", "other", 60) is ClaimState.IN_FLIGHT  # not completed
    assert await store.aclaim("b", "other", 60) is ClaimState.DONE
    assert await store.aclaim("c", "other", 60) is ClaimState.DONE
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT n FROM side").fetchall() == [(7,)]
    store.close()


def test_write_runs_one_statement_on_the_store_connection(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(path, "CREATE TABLE side (n INTEGER)")
    assert store.write("INSERT INTO side VALUES (?)", [4]) == 1
    assert store.write("UPDATE side SET n = n + 1", []) == 1
    with pytest.raises(sqlite3.OperationalError):
        store.write("INSERT INTO missing VALUES (1)", [])
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT n FROM side").fetchall() == [(5,)]
    store.close()


async def test_awrite_joins_the_group_commit_and_a_failed_one_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(path, "CREATE TABLE side (n INTEGER)")
    statements = _statements(store._loop_connection())
    results = await asyncio.gather(
        store.aclaim("a", "t", 60),
        store.awrite("INSERT INTO side VALUES (?)", [1]),
        store.awrite("INSERT INTO missing VALUES (2)", []),
        store.awrite("INSERT INTO side VALUES (?)", [3]),
        return_exceptions=True,
    )
    assert results[0] is ClaimState.NEW
    assert (results[1], results[3]) == (1, 1)
    assert isinstance(results[2], sqlite3.OperationalError)
    assert _transactions(statements) == 1  # the claim and both writes: one commit
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT n FROM side ORDER BY n").fetchall() == [(1,), (3,)]
    store.close()


async def test_a_completion_failing_after_its_record_fails_its_whole_group(
    tmp_path: Path,
) -> None:
    """The record is written first; a completion failing after it (as only a full or
    failing disk makes it) leaves a written record that only the whole transaction
    undoes: every call of the group is told, and nothing of the group is written."""
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(
        path,
        "CREATE TABLE side (n INTEGER)",
        "CREATE TRIGGER refuse BEFORE UPDATE ON service_webhooks_idempotency"
        " WHEN NEW.key = 'a' BEGIN SELECT RAISE(ABORT, 'disk full'); END",
    )
    for key in ("a", "b"):
        await store.aclaim(key, "t", 60)
    results = await asyncio.gather(
        store.acomplete_with("a", "t", 60, "INSERT INTO side VALUES (?)", [1]),
        store.acomplete_with("b", "t", 60, "INSERT INTO side VALUES (?)", [2]),
        return_exceptions=True,
    )
    assert [type(result) for result in results] == [sqlite3.IntegrityError] * 2
    assert "disk full" in str(results[0])
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT count(*) FROM side").fetchone() == (0,)
    assert await store.aclaim("b", "other", 60) is ClaimState.IN_FLIGHT  # not completed
    assert await store.acomplete_with("b", "t", 60, "INSERT INTO side VALUES (2)", []) is True
    store.close()


async def test_a_failing_single_write_in_a_group_is_undone_by_itself(tmp_path: Path) -> None:
    """SQLite backs out a failed statement alone: no savepoint is taken."""
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(path, "CREATE TABLE side (n INTEGER NOT NULL)")

    def refused(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO side SELECT 1 UNION ALL SELECT NULL")  # 1 row, then not

    statements = _statements(store._loop_connection())
    results = await asyncio.gather(
        store.aclaim("a", "t", 60),
        store._on_loop(refused),
        store.aclaim("b", "t", 60),
        return_exceptions=True,
    )
    assert results[0] is ClaimState.NEW
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert results[2] is ClaimState.NEW
    assert not any(statement.startswith("SAVEPOINT") for statement in statements)
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT count(*) FROM side").fetchone() == (0,)
        (claimed,) = other.execute("SELECT count(*) FROM service_webhooks_idempotency").fetchone()
        assert claimed == 2
    store.close()


async def test_a_call_whose_error_ended_the_transaction_fails_its_whole_group(
    tmp_path: Path,
) -> None:
    """Some errors (a full disk, an I/O error) make SQLite roll the whole transaction
    back: every call of the group is then told, none is reported written."""
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.create_schema()

    def rolled_back(connection: sqlite3.Connection) -> None:
        connection.execute("ROLLBACK")  # what SQLite does itself on such an error
        raise sqlite3.OperationalError("disk I/O error")

    results = await asyncio.gather(
        store.aclaim("a", "t", 60),
        store._on_loop(rolled_back),
        store.aclaim("b", "t", 60),
        return_exceptions=True,
    )
    assert [type(result) for result in results] == [sqlite3.OperationalError] * 3
    assert await store.aclaim("a", "other", 60) is ClaimState.NEW  # rolled back
    assert await store.aclaim("b", "other", 60) is ClaimState.NEW  # never run
    store.close()


async def test_two_claims_of_one_key_in_one_group_one_wins(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    claims = await asyncio.gather(store.aclaim("k", "t1", 60), store.aclaim("k", "t2", 60))
    assert claims == [ClaimState.NEW, ClaimState.IN_FLIGHT]
    assert await store.acomplete("k", "t2", 60) is False  # t1 holds it
    assert await store.acomplete("k", "t1", 60) is True
    store.close()


async def test_a_call_cancelled_before_its_group_commits_writes_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.create_schema()
    task = asyncio.create_task(store.aclaim("k", "t", 60))
    await asyncio.sleep(0)  # the task queued its claim; the group commits next turn
    assert store._groups  # queued, not yet committed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.aclaim("k", "other", 60) is ClaimState.NEW
    store.close()


async def test_a_group_whose_commit_fails_fails_every_call_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """A deferred foreign key is checked at ``COMMIT``: the whole group is refused."""
    path = tmp_path / "keys.sqlite3"
    store = _store_beside(
        path,
        "CREATE TABLE parent (id INTEGER PRIMARY KEY)",
        "CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)",
    )
    await store.aclaim("a", "t", 60)
    store._loop_connection().execute("PRAGMA foreign_keys=ON")
    results = await asyncio.gather(
        store.acomplete_with("a", "t", 60, "INSERT INTO child VALUES (1)", []),
        store.aclaim("b", "t", 60),
        return_exceptions=True,
    )
    assert [type(result) for result in results] == [sqlite3.IntegrityError] * 2
    assert not store._loop_connection().in_transaction
    assert await store.aclaim("a", "other", 60) is ClaimState.IN_FLIGHT  # not completed
    assert await store.aclaim("b", "other", 60) is ClaimState.NEW  # never claimed
    store.close()


async def test_checkpoints_run_in_a_worker_thread_and_prune_steps_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service_webhooks.stores._sqlite as module

    monkeypatch.setattr(module, "CHECKPOINT_EVERY", 3)
    store = SQLiteStore(tmp_path / "keys.sqlite3", prune_every=2)
    threads: list[str] = []
    checkpoint, prune_step = store._checkpoint, store._prune_step

    def spy(function: Any, name: str) -> Any:
        def run(*args: Any) -> Any:
            threads.append(f"{name}:{threading.current_thread() is threading.main_thread()}")
            return function(*args)

        return run

    monkeypatch.setattr(store, "_checkpoint", spy(checkpoint, "checkpoint"))
    monkeypatch.setattr(store, "_prune_step", spy(prune_step, "prune"))
    for index in range(3):
        await store.aclaim(f"k{index}", "t", 60)
    store.close()
    assert sorted(set(threads)) == ["checkpoint:False", "prune:True"]


def test_close_lets_a_checkpoint_at_work_finish_first(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.claim("k", "t", 60)
    connection = store._open(0.01)  # the checkpointer's, known to close()
    started, steps = threading.Event(), []

    class Slow:
        def execute(self, statement: str) -> sqlite3.Cursor:
            started.set()
            time.sleep(0.05)
            cursor = connection.execute(statement)
            steps.append(statement)
            return cursor

    store._checkpointer = Slow()  # type: ignore[assignment]
    worker = threading.Thread(target=store._checkpoint)
    worker.start()
    started.wait()
    store.close()  # while the checkpoint is at work
    worker.join()
    assert steps == ["PRAGMA wal_checkpoint(PASSIVE)", "PRAGMA wal_checkpoint(FULL)"]
    assert "checkpoint" not in caplog.text  # no step ran on a closed connection
    with pytest.raises(sqlite3.ProgrammingError):
        connection.execute("SELECT 1")  # closed by close(), after the checkpoint


def test_close_lets_a_call_at_work_in_another_thread_finish_first(tmp_path: Path) -> None:
    # a connection closed under a statement of another thread (a renewal, a gthread
    # worker's claim) crashed the process (SIGSEGV)
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    started, order = threading.Event(), []

    def slow(connection: sqlite3.Connection) -> int:
        started.set()
        time.sleep(0.05)
        value = connection.execute("SELECT count(*) FROM service_webhooks_idempotency").fetchone()
        order.append("work")
        return int(value[0])

    results: list[int] = []
    worker = threading.Thread(target=lambda: results.append(store._sync(slow)))
    worker.start()
    started.wait()
    store.close()  # while the call is at work
    order.append("closed")
    worker.join()
    assert (order, results) == (["work", "closed"], [0])
    assert store.claim("k", "t", 60) is ClaimState.NEW  # connects again


async def test_close_from_a_thread_lets_the_loops_group_commit_finish_first(
    tmp_path: Path,
) -> None:
    # receiver.aclose() closes in a worker thread while the loop commits the releases of
    # deliveries cancelled at shutdown (uvicorn --timeout-graceful-shutdown): SIGSEGV
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    started, order = threading.Event(), []

    def slow(connection: sqlite3.Connection) -> int:
        started.set()
        time.sleep(0.05)
        connection.execute("SELECT count(*) FROM service_webhooks_idempotency").fetchone()
        order.append("work")
        return 1

    def close_when_started() -> None:
        started.wait()
        store.close()
        order.append("closed")

    closer = threading.Thread(target=close_when_started)
    closer.start()
    assert await store._in_group(slow, ()) == 1  # the loop thread is held in slow()
    await asyncio.to_thread(closer.join)
    assert order == ["work", "closed"]
    assert await store.aclaim("k", "t", 60) is ClaimState.NEW  # connects again


def _wal_restarts(path: Path) -> int:
    """The WAL header's first salt: one more each time the WAL starts over."""
    with open(f"{path}-wal", "rb") as wal:
        return int.from_bytes(wal.read(20)[16:20], "big")


class _WritesBetweenSteps:
    """A checkpoint connection stand-in: after the passive step, another connection
    commits a write (what the loop does while a worker thread checkpoints)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.steps: list[str] = []
        self.wal_after_write = -1  # the WAL's restart count once that write is in

    def execute(self, statement: str) -> sqlite3.Cursor:
        cursor = self.connection.execute(statement)
        self.steps.append(statement)
        if "PASSIVE" in statement:
            self.writer.execute(
                "INSERT INTO service_webhooks_idempotency VALUES (?, 'done', 't', 1e12)",
                (f"between-{len(self.steps)}",),
            )
            self.wal_after_write = _wal_restarts(self.path)
        return cursor

    def close(self) -> None:
        self.connection.close()
        self.writer.close()


async def test_a_checkpoint_lets_the_next_write_start_the_wal_over(tmp_path: Path) -> None:
    """Writes committed while the bulk is copied are copied too (under the write lock),
    so the WAL restarts instead of growing for as long as writes never pause."""
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path)
    for index in range(5):
        await store.aclaim(f"k{index}", "t", 60)
    checkpointer = _WritesBetweenSteps(path)
    store._checkpointer = checkpointer  # type: ignore[assignment]
    await asyncio.to_thread(store._checkpoint)
    await store.aclaim("after", "t", 60)
    assert _wal_restarts(path) == checkpointer.wal_after_write + 1
    assert [step.split("(")[1] for step in checkpointer.steps] == ["PASSIVE)", "FULL)"]
    checkpointer.close()
    store.close()


async def test_a_checkpoint_does_not_wait_out_a_reader_holding_an_old_snapshot(
    tmp_path: Path,
) -> None:
    """The full step holds the write lock while it waits for readers: it gives up
    after ``CHECKPOINT_WAIT``, not the store's ``timeout``, and writes go on."""
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path, timeout=120)
    await store.aclaim("first", "t", 60)
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM service_webhooks_idempotency").fetchall()
    await store.aclaim("second", "t", 60)  # a frame the reader's snapshot does not see
    checkpoint = threading.Thread(target=store._checkpoint)
    checkpoint.start()
    checkpoint.join(timeout=30)
    finished = not checkpoint.is_alive()
    reader.execute("COMMIT")
    checkpoint.join()
    assert finished
    assert await store.aclaim("third", "t", 60) is ClaimState.NEW
    reader.close()
    store.close()


def test_a_failed_checkpoint_is_logged_and_the_writes_stand(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Refusing:
        def execute(self, statement: str) -> None:
            raise sqlite3.OperationalError("disk I/O error")

    store = SQLiteStore(tmp_path / "keys.sqlite3")
    assert store.claim("k", "t", 60) is ClaimState.NEW
    store._checkpointer = Refusing()  # type: ignore[assignment]
    store._checkpoint()  # does not raise
    assert "checkpoint" in caplog.text
    assert "disk I/O error" in caplog.text
    assert store.claim("k", "other", 60) is ClaimState.IN_FLIGHT
    store.close()


def test_a_checkpoint_still_at_work_is_not_run_twice(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.create_schema()
    checkpointer = _WritesBetweenSteps(tmp_path / "keys.sqlite3")
    store._checkpointer = checkpointer  # type: ignore[assignment]
    with store._checkpointing:  # another thread's checkpoint
        store._checkpoint()
    assert checkpointer.steps == []
    store._checkpoint()
    assert len(checkpointer.steps) == 2
    checkpointer.close()
    store.close()


async def test_a_subclass_override_is_called_by_the_async_twin(tmp_path: Path) -> None:
    calls: list[str] = []

    class Counting(SQLiteStore):
        def claim(self, key: str, token: str, lease: float) -> ClaimState:
            calls.append(key)
            return super().claim(key, token, lease)

    store = Counting(tmp_path / "keys.sqlite3")
    assert await store.aclaim("k", "t", 60) is ClaimState.NEW
    assert await store.acomplete("k", "t", 60) is True  # not overridden: on the loop
    store.close()
    assert calls == ["k"]


async def test_an_overridden_prune_step_is_called_under_asyncio(tmp_path: Path) -> None:
    steps: list[bool] = []

    class Counting(SQLiteStore):
        def prune_step(self) -> int:
            steps.append(threading.current_thread() is threading.main_thread())
            return super().prune_step()

    store = Counting(tmp_path / "keys.sqlite3", prune_every=2)
    for index in range(4):
        await store.aclaim(f"k{index}", "t", 60)
    store.close()
    assert steps == [False, False]  # twice, each in a worker thread


def test_ping_creates_the_file_or_fails_at_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.ping()
    store.close()
    assert (tmp_path / "keys.sqlite3").exists()
    missing = SQLiteStore(tmp_path / "no-such-directory" / "keys.sqlite3")
    with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
        missing.ping()
    assert not (tmp_path / "no-such-directory").exists()


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_write_without_waiting_tries_once_and_keeps_the_timeout_for_the_next_call(
    tmp_path: Path, run_async: bool
) -> None:
    path = tmp_path / "keys.sqlite3"
    store = SQLiteStore(path, timeout=5)
    store.write("CREATE TABLE IF NOT EXISTS notes (x)", ())
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")

    def write(wait: bool) -> int:
        if run_async:
            return asyncio.run(store.awrite("INSERT INTO notes VALUES (1)", (), wait=wait))
        return store.write("INSERT INTO notes VALUES (1)", (), wait=wait)

    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        write(False)
    assert time.monotonic() - started < 2.5  # not the store's 5 s
    timer = threading.Timer(0.3, lambda: (holder.execute("COMMIT"), holder.close()))
    timer.start()
    assert write(True) == 1  # still waits for the lock, as before
    timer.join()
    with closing(sqlite3.connect(path)) as other:
        assert other.execute("SELECT count(*) FROM notes").fetchone() == (1,)
    store.close()


class _LockedWhilePruning(SQLiteStore):
    """Another process takes the write lock between a claim and its prune step."""

    def prune_step(self) -> int:
        with closing(sqlite3.connect(self.path, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            try:
                return super().prune_step()
            finally:
                other.execute("ROLLBACK")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_prune_step_that_fails_does_not_fail_the_claim(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    store = _LockedWhilePruning(tmp_path / "keys.sqlite3", prune_every=1, timeout=0.1)
    with caplog.at_level("WARNING", logger="service_webhooks"):
        if use_async:
            claimed = await store.aclaim("k", "tok", 60)
        else:
            claimed = store.claim("k", "tok", 60)
    assert claimed is ClaimState.NEW
    assert "SQLite prune step of" in caplog.text
    assert "database is locked" in caplog.text
    assert store.complete("k", "tok", MIN_RETENTION)
    assert store.claim("k", "other", 60) is ClaimState.DONE
