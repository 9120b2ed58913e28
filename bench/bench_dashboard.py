"""Dashboard pages on PostgreSQL: 1,000 vs 100,000 deliveries, side by side.

For each size, a fresh table (the inbox's own schema and indexes) is filled in one
``INSERT … SELECT generate_series`` and analyzed, then these pages are requested in
process (Starlette's TestClient, no network): the list, the list 15 days back (the
"Older" link's cursor after ``n / 2`` deliveries), two filtered lists, a detail and the
overview. The two sizes are interleaved (which one goes first alternates every round);
the median time per page is reported with the 100k/1k ratio (target: <= 2x).

Like for like: both tables hold the same distribution (every rule below is a fraction of
the table, so only the density changes), chosen so that every list page shows a full
page of 50 rows at both sizes, and the bench stops if a page shows a different number of
rows at the two sizes. Delivery ``i`` of ``n`` (``i = 1`` the newest):

* received ``i / n * 30`` days ago: deliveries spread evenly over 30 days;
* organization ``o-0`` when ``i % 3 == 0`` (a third of the traffic), else one of
  ``o-1``..``o-19``;
* ``500 handler_failed`` when ``i % 14 == 0`` (7 %, every organization), and for every
  ``o-0`` delivery of the last 7 days (its handler has been failing for a week);
  otherwise ``200 processed``;
* a ``handler_time`` of 0-96 ms, three event names, a small JSON body.

So "5xx, o-0, last 7 days" matches about 77 deliveries at 1,000 and 7,800 at 100,000:
a full page (and an "Older" link) at both sizes. With one failure in 14 and 20
organizations spread evenly (this bench's first version), that filter matched 1 or 2
rows at 1,000 and filled the page at 100,000, which compared rendering 50 rows with
rendering 2 rather than the query's cost.

The overview counts the last 24 hours: about 33 deliveries at 1,000, 3,300 at 100,000;
it is the one page whose work grows with the table (the rows of a day are counted).

``--explain`` prints, for every page and a few more filters (rare values and pairs
without an index of their own), each query's plan at both sizes (EXPLAIN ANALYZE
BUFFERS, the values the page used): the indexes read, the buffers touched, and whether
any sequential scan of the inbox table is left.

    .venv/bin/python bench/bench_dashboard.py [--rounds 40] [--explain]
"""

from __future__ import annotations

import argparse
import html
import os
import platform
import re
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
from bench_http import cpu_model
from starlette.testclient import TestClient

from service_webhooks.dashboard import dashboard
from service_webhooks.inbox import PostgresInbox
from service_webhooks.inbox.backend import to_micros

URL = os.environ.get("SERVICE_WEBHOOKS_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
AUTH = ("bench", "bench")
SIZES = (1_000, 100_000)

FILL = """
INSERT INTO {table} (id, received_at, organization_id, event_name, version, idempotency_key,
    body, content_type, user_agent, status, reason, detail, seen, handler_time, replays, size)
SELECT md5(i::text || %(salt)s),
       now() - (i::double precision / %(n)s) * interval '30 days',
       CASE WHEN big THEN 'o-0' ELSE 'o-' || (1 + i %% 19) END,
       (ARRAY['note.created','note.updated','note.deleted'])[1 + i %% 3],
       1,
       md5('k' || i::text),
       convert_to('{{"eventName":"note.created","version":1,"data":{{"id":"n-' || i
           || '","text":"hello"}}}}', 'UTF8'),
       'application/json', 'bench',
       CASE WHEN failed THEN 500 ELSE 200 END,
       CASE WHEN failed THEN 'handler_failed' ELSE 'processed' END,
       '', 1, (i %% 97) / 1000.0, '[]', 80
FROM (
    SELECT i, i %% 3 = 0 AS big,
           (i %% 3 = 0 AND i * 30 <= %(n)s * 7) OR i %% 14 = 0 AS failed
    FROM generate_series(1, %(n)s) AS i
) AS seeded
"""


MORE_FILTERS = (
    "/?outcome=4xx",  # no 4xx at all
    "/?outcome=unprocessable",  # a reason never answered
    "/?org=o-7",  # one organization of many
    "/?event=note.deleted&range=24h",
    "/?q=abc",  # an ID prefix
    "/?outcome=5xx&org=o-7",  # an organization that rarely fails
    "/?outcome=handler_failed&org=o-7",  # a pair without an index of its own
    "/?outcome=2xx&org=o-0&range=7d",  # nothing: o-0 failed all week
)

_ROW = re.compile(r'href="/d/[0-9a-f]{32}"')
_OLDER = re.compile(r'id="older" rel="next" href="([^"]+)"')


class Sized:
    """One filled inbox table and a dashboard client over it."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.table = f"bench_dashboard_{n}_{uuid.uuid4().hex[:8]}"
        self.inbox = PostgresInbox(URL, table=self.table, max_size=4)
        self.inbox.create_schema()
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(FILL.format(table=self.table).encode(), {"n": n, "salt": self.table})
            conn.execute(f"VACUUM ANALYZE {self.table}".encode())
        self.some_id = self.inbox.search(limit=1).items[0].id
        # the "Older" link after n/2 deliveries (received 15 days ago)
        with psycopg.connect(URL) as conn:
            row = conn.execute(
                f"SELECT received_at, id FROM {self.table}"  # noqa: S608
                " ORDER BY received_at DESC, id DESC OFFSET %s LIMIT 1".encode(),
                [n // 2 - 1],
            ).fetchone()
        assert row is not None
        self.middle = f"{to_micros(row[0])}-{row[1]}"
        self.client = TestClient(dashboard(self.inbox, basic_auth=AUTH))
        self.client.__enter__()  # one event loop (and one asyncio pool) per client

    def get(self, path: str) -> str:
        response = self.client.get(path, auth=AUTH)
        assert response.status_code == 200, (path, response.status_code)
        return response.text

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.inbox.drop_schema()
        self.inbox.close()


PAGES: dict[str, Callable[[Sized], str]] = {
    "list (newest 50)": lambda one: "/",
    "list, 15 days back (cursor)": lambda one: f"/?cursor={one.middle}",
    "filtered: handler_failed": lambda one: "/?outcome=handler_failed",
    "filtered: 5xx, o-0, last 7 days": lambda one: "/?outcome=5xx&org=o-0&range=7d",
    "detail": lambda one: f"/d/{one.some_id}",
    "overview": lambda one: "/overview",
}


def rows_shown(page: str) -> int:
    """Deliveries linked from a page: the list's rows, the overview's slowest handlers."""
    return len(_ROW.findall(page))


def machine() -> str:
    with psycopg.connect(URL) as conn:
        server = conn.execute("SHOW server_version").fetchone()
    return (
        f"{cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()}; "
        f"PostgreSQL {server[0] if server else '?'}"
    )


def measure(sized: dict[int, Sized], rounds: int) -> None:
    shown: dict[tuple[str, int], int] = {}
    for name, path in PAGES.items():  # warm up, and check the pages are like for like
        for n, one in sized.items():
            shown[(name, n)] = rows_shown(one.get(path(one)))
        rows_small, rows_large = (shown[(name, n)] for n in SIZES)
        if rows_small != rows_large:
            raise SystemExit(
                f"{name}: {rows_small} rows at {SIZES[0]:,}, {rows_large} at {SIZES[1]:,}"
            )
    timings: dict[tuple[str, int], list[float]] = {(p, n): [] for p in PAGES for n in SIZES}
    for round_ in range(rounds):
        order = SIZES if round_ % 2 == 0 else SIZES[::-1]
        for name, path in PAGES.items():
            for n in order:
                one = sized[n]
                url = path(one)
                started = time.perf_counter()
                one.client.get(url, auth=AUTH)
                timings[(name, n)].append(time.perf_counter() - started)
    print(f"Machine: {machine()}; {rounds} rounds; load average {os.getloadavg()[0]:.2f}\n")
    print(f"| page | rows shown | {SIZES[0]:,} deliveries | {SIZES[1]:,} deliveries | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name in PAGES:
        small = statistics.median(timings[(name, SIZES[0])]) * 1000
        large = statistics.median(timings[(name, SIZES[1])]) * 1000
        ratio = large / small
        verdict = "met" if ratio <= 2 else "**not met**"
        rows = shown[(name, SIZES[0])] or "-"
        print(f"| {name} | {rows} | {small:.2f} ms | {large:.2f} ms | {ratio:.2f}x {verdict} |")
    spread = {
        n: [
            statistics.quantiles(timings[(name, n)], n=10)[8]
            / statistics.median(timings[(name, n)])
            for name in PAGES
        ]
        for n in SIZES
    }
    print(
        "\n90th percentile / median per page: "
        + "; ".join(f"{n:,}: " + ", ".join(f"{x:.2f}" for x in spread[n]) for n in SIZES)
    )


def _capture(inbox: PostgresInbox) -> list[tuple[str, Sequence[Any]]]:
    """Record every statement ``inbox`` runs (sync pool and asyncio pool alike)."""
    seen: list[tuple[str, Sequence[Any]]] = []
    run, arun = inbox._run, inbox._arun

    def traced_run(statement: str, params: Sequence[Any]) -> tuple[int, list[tuple[Any, ...]]]:
        seen.append((statement, list(params)))
        return run(statement, params)

    def traced_arun(
        pool: Any, statement: str, params: Sequence[Any]
    ) -> Awaitable[tuple[int, list[tuple[Any, ...]]]]:
        seen.append((statement, list(params)))
        return arun(pool, statement, params)

    inbox._run = traced_run  # type: ignore[method-assign]
    inbox._arun = traced_arun  # type: ignore[method-assign,assignment]
    return seen


def _summary(plan: str, table: str) -> str:
    indexes = sorted(
        set(re.findall(rf"(?:Index|Index Only) Scan(?: Backward)? using {table}_(\w+)", plan))
    )
    indexes += sorted(set(re.findall(rf"Bitmap Index Scan on {table}_(\w+)", plan)))
    buffers = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", plan)
    touched = sum(int(x) for x in buffers.groups() if x) if buffers else 0
    execution = re.search(r"Execution Time: ([\d.]+) ms", plan)
    scan = "SEQ SCAN " if re.search(rf"Seq Scan on {table}\b", plan) else ""
    return (
        f"{scan}{'+'.join(indexes) or 'no index'}, {touched} buffers, "
        f"{execution[1] if execution else '?'} ms"
    )


def _fixed(path: str) -> Callable[[Sized], str]:
    return lambda one: path


def explain(sized: dict[int, Sized]) -> None:
    paths = list(PAGES.items())
    paths += [(path, _fixed(path)) for path in MORE_FILTERS]
    captured = {n: _capture(one.inbox) for n, one in sized.items()}
    seq_scans = 0
    with psycopg.connect(URL, autocommit=True, prepare_threshold=None) as conn:
        for name, path in paths:
            print(f"\n{name}")
            follow: dict[int, str | None] = {}
            for step in (0, 1):
                lines: dict[int, list[str]] = {}
                for n, one in sized.items():
                    url = path(one) if step == 0 else follow.get(n)
                    if url is None:
                        continue
                    captured[n].clear()
                    page = one.get(url)
                    older = _OLDER.search(page)
                    follow[n] = html.unescape(older[1]) if older else None
                    lines[n] = []
                    for statement, params in captured[n]:
                        plan = "\n".join(
                            row[0]
                            for row in conn.execute(
                                ("EXPLAIN (ANALYZE, BUFFERS) " + statement).encode(), params
                            )
                        )
                        seq_scans += "Seq Scan on " + one.table in plan
                        lines[n].append(_summary(plan, one.table))
                    lines[n].insert(0, f"{rows_shown(page)} rows, {len(captured[n])} queries")
                for n, summary in lines.items():
                    label = f"{n:>7,}" + (" next page" if step else "")
                    print(f"  {label}: " + "; ".join(summary))
                if not any(follow.values()):
                    break
    print(f"\nsequential scans of the inbox table: {seq_scans}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--explain", action="store_true", help="print the query plans")
    args = parser.parse_args()
    sized: dict[int, Sized] = {}
    try:
        for n in SIZES:
            sized[n] = Sized(n)
        if args.explain:
            explain(sized)
        else:
            measure(sized, args.rounds)
    finally:
        for one in sized.values():
            one.close()


if __name__ == "__main__":
    main()
