"""A ``PostgresInbox`` used before a fork (gunicorn ``--preload``, Celery's prefork pool)
works in the child on sessions of its own, as the PostgreSQL store does: the inherited
pool's sockets are the parent's (replies mixed up between the processes) and its worker
threads are gone (``PoolTimeout`` for ever)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sw_forking import beside_a_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@pytest.fixture
def inbox(postgres_url: str) -> Iterator[Any]:
    from service_webhooks.inbox import PostgresInbox

    made = PostgresInbox(
        postgres_url, table=f"sw_fork_inbox_{uuid.uuid4().hex[:12]}", max_size=2, timeout=2
    )
    made.create_schema()
    yield made
    made.drop_schema()
    made.close()


def _sessions(inbox: Any, rounds: int) -> tuple[list[str], set[int]]:
    """``rounds`` reads through the inbox's own pool: the errors met and the server
    sessions (backend PIDs) they ran on."""
    errors: list[str] = []
    sessions: set[int] = set()
    for _ in range(rounds):
        try:
            inbox.search()
            [[pid]] = inbox._query("SELECT pg_backend_pid()", [])
            sessions.add(pid)
        except Exception as error:  # reported to the parent, not raised in the child
            errors.append(f"{type(error).__name__}: {error}")
    return errors, sessions


def test_a_forked_child_opens_its_own_pool(inbox: Any) -> None:
    _, before = _sessions(inbox, 1)
    (errors, parent_sessions), (child_errors, child_sessions) = beside_a_child(
        lambda: _sessions(inbox, 50)
    )
    assert child_errors == []
    assert errors == []
    assert not child_sessions & (before | parent_sessions)
    assert list(inbox.search().items) == []  # the parent's pool still works


def test_a_prune_count_lock_held_at_the_fork_holds_up_nothing_in_the_child(inbox: Any) -> None:
    """The lock around the count of records since the last prune was the parent's copy:
    held by another thread at the fork, it was never released in the child, whose
    ``record()`` then hung for ever."""
    import signal

    inbox._count_lock.acquire()  # as another thread recording at the fork
    try:
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports by its exit status
            code = 1
            signal.alarm(10)
            try:
                inbox._prune_due()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
    finally:
        inbox._count_lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
