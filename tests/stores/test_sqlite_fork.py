"""A SQLite store or inbox used before a fork (gunicorn ``--preload`` with
``create_schema()`` at import, Celery's prefork pool, ``multiprocessing``) works in the
child on connections of its own, and with locks of its own.

SQLite must never use a connection in a process other than the one that opened it, and
keeps one record per process of the locks it holds on a file: a child whose copy of the
parent's connection stayed open took no lock of its own, so the parent, closing its
last connection, deleted the WAL under it and the child's next writes were lost."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import SQLiteStore
from service_webhooks.inbox import SQLiteInbox

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(
    work: Callable[[], Any],
    first: Callable[[], object] = lambda: None,
    between: Callable[[], object] = lambda: None,
) -> Any:
    """``work()``'s result in a forked child (which dies after 10 s rather than hang):
    the child runs ``first()``, then the parent ``between()``, then the child ``work()``."""
    report_read, report_write = os.pipe()
    go_read, go_write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        signal.alarm(10)
        try:
            os.close(report_read)
            os.close(go_write)
            first()
            os.write(report_write, b"ready\n")
            os.read(go_read, 1)
            os.write(report_write, json.dumps(work()).encode())
        finally:
            os._exit(0)
    os.close(report_write)
    os.close(go_read)
    with os.fdopen(report_read) as pipe:
        ready = pipe.readline()
        if ready:
            between()
            os.write(go_write, b"x")
        os.close(go_write)
        report = pipe.read()
    os.waitpid(child, 0)
    assert ready, "the child failed before the fork's hooks were tried"
    assert report, "the child did not report: it hung or failed"
    return json.loads(report)


@contextmanager
def _held_by_another_thread(hold: Callable[[Callable[[], None]], object]) -> Iterator[None]:
    """Meanwhile another thread runs ``hold(pause)``, which calls ``pause()`` where it
    is to stay (a lock held, a statement at work) until the block ends."""
    paused, resume = threading.Event(), threading.Event()

    def pause() -> None:
        paused.set()
        resume.wait()

    thread = threading.Thread(target=hold, args=(pause,))
    thread.start()
    paused.wait()
    try:
        yield
    finally:
        resume.set()
        thread.join()


def _keys(path: Path) -> list[str]:
    # closing(): a connection's own ``with`` commits but does not close it (Python 3.13
    # reports one collected open with a ResourceWarning, an error under this suite)
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT key FROM service_webhooks_idempotency").fetchall()
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return sorted(key for (key,) in rows)


def test_the_childs_writes_outlive_the_parents_connections(tmp_path: Path) -> None:
    """The child's claims made after the parent closed its store are in the file: they
    went to a WAL the parent had deleted (measured: 5 of 10 lost)."""
    path = tmp_path / "store.sqlite3"
    store = SQLiteStore(path)
    store.create_schema()  # as at import, before the fork
    store.claim("parent", "t", 60)

    def first() -> None:  # pragma: no cover - in the child
        for n in range(5):
            store.claim(f"child-{n}", "t", 60)

    def work() -> str:  # pragma: no cover - in the child, once the parent closed its store
        for n in range(5, 10):
            store.claim(f"child-{n}", "t", 60)
        return "claimed"

    assert _in_child(work, first=first, between=store.close) == "claimed"
    assert _keys(path) == [*(f"child-{n}" for n in range(10)), "parent"]


def test_a_checkpoint_at_work_at_the_fork_holds_up_nothing_in_the_child(
    tmp_path: Path,
) -> None:
    """The checkpoint lock another thread held at the fork stays held for ever in the
    child's copy: ``close()`` waited for it for ever, and no checkpoint ran again."""
    store = SQLiteStore(tmp_path / "store.sqlite3")
    store.claim("parent", "t", 60)

    def checkpointing(pause: Callable[[], None]) -> None:
        with store._checkpointing:  # as _checkpoint() does while at work
            pause()

    def work() -> str:  # pragma: no cover - in the child
        store.claim("child", "t", 60)
        store.close()
        return "closed"

    try:
        with _held_by_another_thread(checkpointing):
            assert _in_child(work) == "closed"
    finally:
        store.close()


def test_a_connection_at_work_at_the_fork_is_never_closed_in_the_child(
    tmp_path: Path,
) -> None:
    """Another thread's connection, in the middle of a call at the fork, is left open in
    the child (closing it there would roll back the parent's write in the WAL index both
    share: Python closed it as it dropped that thread), and the child claims on its own."""
    path = tmp_path / "store.sqlite3"
    store = SQLiteStore(path)
    store.create_schema()

    def slow_call(pause: Callable[[], None]) -> None:
        def slow(connection: sqlite3.Connection) -> None:
            connection.execute("SELECT 1").fetchall()
            pause()

        store._sync(slow)

    def work() -> list[Any]:  # pragma: no cover - in the child
        store.claim("child", "t", 60)
        try:
            left = "open" if at_work.total_changes >= 0 else ""
        except sqlite3.ProgrammingError:
            left = "closed"
        return [left, len(store._connections)]

    try:
        with _held_by_another_thread(slow_call):
            [at_work] = [c for c in store._connections if c is not store._local.connection]
            assert _in_child(work) == ["open", 1]
    finally:
        store.close()
    assert _keys(path) == ["child"]


def test_an_inbox_statement_at_work_at_the_fork_holds_up_nothing_in_the_child(
    tmp_path: Path,
) -> None:
    """The inbox counted another thread's statement as at work for ever in the child:
    its ``close()`` waited for it for ever."""
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    inbox.search()

    def statement(pause: Callable[[], None]) -> None:
        with inbox._statement():
            pause()

    def work() -> list[Any]:  # pragma: no cover - in the child
        found = len(inbox.search().items)
        inbox.close()
        return [found, "closed"]

    try:
        with _held_by_another_thread(statement):
            assert _in_child(work) == [0, "closed"]
    finally:
        inbox.close()
