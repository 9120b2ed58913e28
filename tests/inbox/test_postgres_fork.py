"""A ``PostgresInbox`` used before a fork (gunicorn ``--preload``, Celery's prefork pool)
works in the child on sessions of its own, as the PostgreSQL store does: the inherited
pool's sockets are the parent's (replies mixed up between the processes) and its worker
threads are gone (``PoolTimeout`` for ever)."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .conftest import POSTGRES_URL

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@pytest.fixture
def inbox(unavailable: Callable[[str, str], None]) -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg")
    from service_webhooks.inbox import PostgresInbox

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except psycopg.Error as error:
        unavailable(f"PostgreSQL at {POSTGRES_URL}", type(error).__name__)
    made = PostgresInbox(
        POSTGRES_URL, table=f"sw_fork_inbox_{uuid.uuid4().hex[:12]}", max_size=2, timeout=2
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
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        signal.alarm(30)  # a reply read by the other process never comes: die, not hang
        try:
            errors, sessions = _sessions(inbox, 50)
            os.write(write, json.dumps([errors[:3], sorted(sessions)]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    errors, parent_sessions = _sessions(inbox, 50)  # beside the child
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(child, 0)
    assert status == 0
    assert report, "the child did not report"
    child_errors, child_sessions = json.loads(report)
    assert child_errors == []
    assert errors == []
    assert not set(child_sessions) & (before | parent_sessions)
    assert list(inbox.search().items) == []  # the parent's pool still works
