"""The inbox backends every contract test runs against (PostgreSQL live, a table per test)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service_webhooks.inbox import Inbox, MemoryInbox, SQLiteInbox

POSTGRES_URL = os.environ.get(
    "SERVICE_WEBHOOKS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


def _memory(request: pytest.FixtureRequest, **options: Any) -> Inbox:
    return MemoryInbox(**options)


def _sqlite(request: pytest.FixtureRequest, **options: Any) -> Inbox:
    path: Path = request.getfixturevalue("tmp_path") / f"inbox-{uuid.uuid4().hex}.sqlite3"
    inbox = SQLiteInbox(path, **options)
    request.addfinalizer(inbox.close)
    return inbox


def _postgres(request: pytest.FixtureRequest, **options: Any) -> Inbox:
    import psycopg

    from service_webhooks.inbox import PostgresInbox

    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=2).close()
    except psycopg.Error as error:
        request.getfixturevalue("unavailable")(
            f"PostgreSQL at {POSTGRES_URL}", type(error).__name__
        )
    table = f"service_webhooks_inbox_test_{uuid.uuid4().hex[:16]}"
    inbox = PostgresInbox(POSTGRES_URL, table=table, max_size=4, **options)
    inbox.create_schema()

    def clean() -> None:
        inbox.drop_schema()
        inbox.close()

    request.addfinalizer(clean)
    return inbox


BACKENDS: dict[str, Callable[..., Inbox]] = {
    "memory": _memory,
    "postgres": _postgres,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def make_inbox(request: pytest.FixtureRequest) -> Callable[..., Inbox]:
    """``make_inbox(**options)``: a fresh, empty inbox of the parametrized backend."""
    factory = BACKENDS[request.param]
    return lambda **options: factory(request, **options)


@pytest.fixture
def inbox(make_inbox: Callable[..., Inbox]) -> Inbox:
    return make_inbox()
