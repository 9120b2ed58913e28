"""Processes starting together on a new database each create the PostgreSQL inbox's
table: every one of them starts.

Before, ``create_schema`` ran its ``CREATE … IF NOT EXISTS`` statements unserialized,
and two of them at once fail one side with a ``UniqueViolation`` on PostgreSQL's
catalogue: a receiver built with ``inbox="postgresql://…"`` then failed to start in
some of the workers (gunicorn stops every worker when one fails to boot).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

pytest.importorskip("psycopg")

ROUNDS = 4
STARTERS = 6


@pytest.mark.parametrize("max_bytes", [None, 10_000_000], ids=["plain", "size_total"])
def test_inboxes_creating_one_table_at_once_all_succeed(
    postgres_url: str, max_bytes: int | None
) -> None:
    from service_webhooks.inbox import PostgresInbox

    for _ in range(ROUNDS):  # a race: a few fresh tables make it near certain without the lock
        table = f"sw_inbox_race_{uuid.uuid4().hex[:12]}"
        inboxes = [
            PostgresInbox(postgres_url, table=table, max_size=1, max_bytes=max_bytes)
            for _ in range(STARTERS)
        ]
        barrier = threading.Barrier(STARTERS)
        failures: list[BaseException] = []

        def start(inbox: Any, barrier: threading.Barrier, failures: list[BaseException]) -> None:
            inbox.has_table()  # the pool's connection is open before the race starts
            barrier.wait()
            try:
                inbox.create_schema()
            except Exception as error:  # reported below
                failures.append(error)

        threads = [
            threading.Thread(target=start, args=(inbox, barrier, failures)) for inbox in inboxes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            assert failures == []
            assert all(inbox.has_table() for inbox in inboxes)
        finally:
            inboxes[0].drop_schema()
            for inbox in inboxes:
                inbox.close()
