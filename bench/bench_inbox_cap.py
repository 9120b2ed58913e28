# ruff: noqa: S608  (table names here are generated, never user input)
"""The inbox's size cap (``max_bytes``) on a large inbox: what a prune and a delivery pay.

Run from the repository root (PostgreSQL at ``$SERVICE_WEBHOOKS_BENCH_POSTGRES``,
default ``postgresql://postgres@127.0.0.1:5432/test``; skipped when unreachable)::

    .venv/bin/python bench/bench_inbox_cap.py                       # 100k and 500k records
    .venv/bin/python bench/bench_inbox_cap.py --records 100000 --only sqlite

For each backend and size, a fresh inbox (a SQLite file, a PostgreSQL table) is filled
with that many 1 KB records received over the last minutes, and ``max_bytes`` is their
total: the inbox is at its cap, as one that has run for a while. Then, each round:

* **delivery**: 1,000 ``record()`` calls through an inbox with ``prune_every=1000``,
  the 1,000th of which runs the automatic prune step (retention, then the cap: about
  1,000 records over it). Printed: the median of the 999 others and the 1,000th.
* **prune()**: 1,000 more records through an inbox that never prunes by itself, then
  ``prune()`` timed (it deletes the 1,000 oldest again).

The result is the median over the rounds, in milliseconds (wall time, one thread; the
database on the same machine). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_http import cpu_model

from service_webhooks.inbox import ReceivedDelivery, SQLiteInbox
from service_webhooks.inbox._base import new_record_id, to_micros

POSTGRES_URL = os.environ.get(
    "SERVICE_WEBHOOKS_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
BODY = b'{"eventName":"note.created","version":1,"data":{"text":"' + b"x" * 946 + b'"}}'
STEP = 1000  # prune_every


def delivery(now: datetime.datetime) -> ReceivedDelivery:
    return ReceivedDelivery(
        id=new_record_id(to_micros(now)),
        received_at=now,
        organization_id="o-1",
        event_name="note.created",
        version=1,
        idempotency_key=uuid.uuid4().hex,
        body=BODY,
        content_type="application/json",
        user_agent="Service-Webhooks/1.0",
        status=200,
        reason="processed",
        handler_time=0.001,
    )


def fill_rows(count: int) -> Iterator[tuple[Any, ...]]:
    """``count`` records received one millisecond apart, the last one a second ago."""
    start = to_micros(datetime.datetime.now(datetime.UTC)) - (count + 1000) * 1000
    for index in range(count):
        micros = start + index * 1000
        yield (
            new_record_id(micros),
            micros,
            uuid.uuid4().hex,
        )


@contextmanager
def sqlite_inboxes(count: int) -> Iterator[Callable[..., Any]]:
    with tempfile.TemporaryDirectory(prefix="bench_inbox_cap_") as folder:
        path = Path(folder) / "inbox.sqlite3"
        filler = SQLiteInbox(path, prune_every=0)
        connection = filler._connection()
        connection.execute("BEGIN")
        connection.executemany(
            f"INSERT INTO {filler.table} (id, received_at, organization_id, event_name,"
            " version, idempotency_key, body, content_type, user_agent, status, reason,"
            " handler_time, size) VALUES (?, ?, 'o-1', 'note.created', 1, ?, ?,"
            " 'application/json', 'Service-Webhooks/1.0', 200, 'processed', 0.001, ?)",
            ((i, m, k, BODY, len(BODY)) for i, m, k in fill_rows(count)),
        )
        connection.execute("COMMIT")
        made: list[SQLiteInbox] = [filler]

        def make(**options: Any) -> SQLiteInbox:
            inbox = SQLiteInbox(path, **options)
            made.append(inbox)
            return inbox

        try:
            yield make
        finally:
            for inbox in made:
                inbox.close()


@contextmanager
def postgres_inboxes(count: int) -> Iterator[Callable[..., Any]]:
    import psycopg

    from service_webhooks.inbox import PostgresInbox

    table = f"bench_inbox_cap_{uuid.uuid4().hex[:12]}"
    made: list[PostgresInbox] = []

    def make(**options: Any) -> PostgresInbox:
        inbox = PostgresInbox(POSTGRES_URL, table=table, **options)
        made.append(inbox)
        return inbox

    # the schema as an inbox with a cap makes it (the first one made)
    make(max_bytes=count * len(BODY)).create_schema()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        rows = list(fill_rows(count))
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (id, received_at, organization_id, event_name, version,"
                " idempotency_key, body, content_type, user_agent, status, reason,"
                " handler_time, size) SELECT i, to_timestamp(m / 1e6), 'o-1', 'note.created',"
                " 1, k, %s, 'application/json', 'Service-Webhooks/1.0', 200, 'processed',"
                " 0.001, %s FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS r(i, m, k)",
                (
                    BODY,
                    len(BODY),
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                ),
            )
        connection.execute(f"VACUUM ANALYZE {table}".encode())
    try:
        yield make
    finally:
        made[0].drop_schema()
        for inbox in made:
            inbox.close()


def run(make: Callable[..., Any], count: int, rounds: int) -> dict[str, float]:
    cap = count * len(BODY)
    stepping = make(max_bytes=cap, prune_every=STEP)
    plain = make(max_bytes=cap, prune_every=0)
    plain.prune()  # anything set up once (the schema, a size total) happens here
    others: list[float] = []
    stepped: list[float] = []
    pruned: list[float] = []
    for _ in range(rounds):
        for index in range(STEP):
            record = delivery(datetime.datetime.now(datetime.UTC))
            started = time.perf_counter()
            stepping.record(record)
            elapsed = time.perf_counter() - started
            (stepped if index == STEP - 1 else others).append(elapsed)
        for _ in range(STEP):
            plain.record(delivery(datetime.datetime.now(datetime.UTC)))
        started = time.perf_counter()
        deleted = plain.prune()
        pruned.append(time.perf_counter() - started)
        if not STEP // 2 < deleted <= 2 * STEP:
            print(f"  (prune() deleted {deleted} records)", file=sys.stderr)
    return {
        "record": statistics.median(others) * 1000,
        "stepped": statistics.median(stepped) * 1000,
        "prune": statistics.median(pruned) * 1000,
    }


BACKENDS = {"sqlite": sqlite_inboxes, "postgres": postgres_inboxes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--records", type=int, nargs="+", default=[100_000, 500_000], help="inbox sizes"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per size (5)")
    parser.add_argument("--only", choices=sorted(BACKENDS), help="one backend only")
    args = parser.parse_args(argv)
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()},"
        f" SQLite {sqlite3.sqlite_version}"
    )
    print(f"{'backend':>8} | {'records':>7} | record ms | 1000th record (step) ms | prune() ms")
    for name, inboxes in BACKENDS.items():
        if args.only and name != args.only:
            continue
        for count in args.records:
            try:
                with inboxes(count) as make:
                    result = run(make, count, args.rounds)
            except Exception as error:  # an unreachable server: say so, go on
                if name != "postgres":
                    raise
                print(f"{name:>8} | skipped: {type(error).__name__}: {error}")
                break
            print(
                f"{name:>8} | {count:>7} | {result['record']:9.2f} |"
                f" {result['stepped']:23.2f} | {result['prune']:10.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
