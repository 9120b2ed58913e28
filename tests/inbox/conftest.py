"""The inbox backends every contract test runs against (PostgreSQL live, a table per test)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sw_services import POSTGRES_URL

from service_webhooks.inbox import Inbox, MemoryInbox, SQLiteInbox


@pytest.fixture
async def async_cleanup() -> AsyncIterator[list[Callable[[], Awaitable[None]]]]:
    """Coroutines awaited in the test's own event loop once the test is over (an asyncio
    pool belongs to the loop that opened it)."""
    closers: list[Callable[[], Awaitable[None]]] = []
    yield closers
    for close in reversed(closers):
        await close()


def _memory(request: pytest.FixtureRequest, **options: Any) -> Inbox:
    return MemoryInbox(**options)


def _sqlite(request: pytest.FixtureRequest, **options: Any) -> Inbox:
    path: Path = request.getfixturevalue("tmp_path") / f"inbox-{uuid.uuid4().hex}.sqlite3"
    inbox = SQLiteInbox(path, **options)
    request.addfinalizer(inbox.close)
    return inbox


def _postgres(request: pytest.FixtureRequest, **options: Any) -> Inbox:

    from service_webhooks.inbox import PostgresInbox

    request.getfixturevalue("postgres_url")
    table = f"service_webhooks_inbox_test_{uuid.uuid4().hex[:16]}"
    inbox = PostgresInbox(POSTGRES_URL, table=table, max_size=4, **options)
    inbox.create_schema()
    options_cleanup: list[Callable[[], Awaitable[None]]] = request.getfixturevalue("async_cleanup")
    options_cleanup.append(inbox.aclose)

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
def make_inbox(
    request: pytest.FixtureRequest, async_cleanup: list[Callable[[], Awaitable[None]]]
) -> Callable[..., Inbox]:
    """``make_inbox(**options)``: a fresh, empty inbox of the parametrized backend."""
    factory = BACKENDS[request.param]
    return lambda **options: factory(request, **options)


@pytest.fixture
def inbox(make_inbox: Callable[..., Inbox]) -> Inbox:
    return make_inbox()
