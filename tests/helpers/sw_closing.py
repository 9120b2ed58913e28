"""A store that records its ``close()`` and ``aclose()`` calls (and may fail the
first), for the tests of closing a receiver: ``tests/test_receiver_close.py`` and the
ASGI lifespan's, ``tests/frameworks/asgi/test_asgi_lifespan.py``; and
:func:`is_closed`, for the tests that a SQLite connection was closed."""

from __future__ import annotations

import sqlite3

from service_webhooks import MemoryStore

__all__ = ["ClosingStore", "is_closed"]


def is_closed(connection: sqlite3.Connection) -> bool:
    """Whether ``connection`` was closed (a statement on it is refused)."""
    try:
        connection.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


class ClosingStore(MemoryStore):
    """A MemoryStore that records its close calls in :attr:`calls`; with ``failure``,
    ``close()`` raises it after recording."""

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.failure = failure

    def close(self) -> None:
        self.calls.append("close")
        if self.failure is not None:
            raise self.failure

    async def aclose(self) -> None:
        self.calls.append("aclose")
