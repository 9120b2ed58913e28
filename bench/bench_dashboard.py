"""Dashboard pages on PostgreSQL: 1,000 vs 100,000 deliveries, side by side.

For each size, a fresh table (the inbox's own schema and indexes) is filled in one
``INSERT … SELECT generate_series`` (deliveries spread over 30 days, ~7 % failed), then
the list, a filtered list (failed, one organization), a detail and the overview pages
are requested in process (Starlette's TestClient, no network), interleaved, and the
median time per page is reported with the 100k/1k ratio (target: <= 2x).

    .venv/bin/python bench/bench_dashboard.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg
from starlette.testclient import TestClient

from service_webhooks.dashboard import dashboard
from service_webhooks.inbox import PostgresInbox

URL = "postgresql://postgres@127.0.0.1:5432/test"
AUTH = ("bench", "bench")

FILL = """
INSERT INTO {table} (id, received_at, organization_id, event_name, version, idempotency_key,
    body, content_type, user_agent, status, reason, detail, seen, handler_time, replays, size)
SELECT md5(i::text || %(salt)s),
       now() - (i::double precision / %(n)s) * interval '30 days',
       'o-' || (i %% 20),
       (ARRAY['note.created','note.updated','note.deleted'])[1 + i %% 3],
       1,
       md5('k' || i::text),
       convert_to('{{"eventName":"note.created","version":1,"data":{{"id":"n-' || i
           || '","text":"hello"}}}}', 'UTF8'),
       'application/json', 'bench',
       CASE WHEN i %% 14 = 0 THEN 500 ELSE 200 END,
       CASE WHEN i %% 14 = 0 THEN 'handler_failed' ELSE 'processed' END,
       '', 1, (i %% 97) / 1000.0, '[]', 80
FROM generate_series(1, %(n)s) AS i
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    sizes = (1_000, 100_000)
    clients: dict[int, tuple[TestClient, str]] = {}
    inboxes = []
    for n in sizes:
        table = f"bench_dashboard_{n}_{uuid.uuid4().hex[:8]}"
        inbox = PostgresInbox(URL, table=table, max_size=4)
        inbox.create_schema()
        inboxes.append(inbox)
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(FILL.format(table=table), {"n": n, "salt": table})  # type: ignore[arg-type]
            conn.execute(f"ANALYZE {table}")
        some_id = inbox.search(limit=1).items[0].id
        client = TestClient(dashboard(inbox, basic_auth=AUTH))
        client.__enter__()  # one event loop (and one asyncio pool) per client
        clients[n] = (client, some_id)
    pages = {
        "list": lambda d: "/",
        "filtered: handler_failed": lambda d: "/?outcome=handler_failed",
        "filtered: 5xx, one org, 7 d": lambda d: "/?outcome=5xx&org=o-0&range=7d",
        "detail": lambda d: f"/d/{d}",
        "overview": lambda d: "/overview",
    }
    timings: dict[tuple[str, int], list[float]] = {(p, n): [] for p in pages for n in sizes}
    try:
        for path in pages.values():  # warm up
            for n in sizes:
                client, some_id = clients[n]
                assert client.get(path(some_id), auth=AUTH).status_code == 200
        for _ in range(args.rounds):
            for name, path in pages.items():
                for n in sizes:
                    client, some_id = clients[n]
                    started = time.perf_counter()
                    client.get(path(some_id), auth=AUTH)
                    timings[(name, n)].append(time.perf_counter() - started)
        print(f"| page | {sizes[0]:,} deliveries | {sizes[1]:,} deliveries | ratio |")
        print("|---|---:|---:|---:|")
        for name in pages:
            small = statistics.median(timings[(name, sizes[0])]) * 1000
            large = statistics.median(timings[(name, sizes[1])]) * 1000
            print(f"| {name} | {small:.2f} ms | {large:.2f} ms | {large / small:.2f}x |")
    finally:
        for client, _ in clients.values():
            client.__exit__(None, None, None)
        for inbox in inboxes:
            inbox.drop_schema()
            inbox.close()


if __name__ == "__main__":
    main()
