"""The inbox's cost: requests/s of the ASGI adapter with and without it, SQLite and PostgreSQL.

Run from the repository root (needs ``wrk`` and, for PostgreSQL, a server at
``$SERVICE_WEBHOOKS_BENCH_POSTGRES``, default ``postgresql://postgres@127.0.0.1:5432/test``)::

    .venv/bin/python bench/bench_inbox.py                # 5 rounds of 10 s
    .venv/bin/python bench/bench_inbox.py --quick        # 1 round of 3 s
    .venv/bin/python bench/bench_inbox.py --only sqlite  # skip PostgreSQL

Contenders, each ``WebhookApp(receiver)`` as the whole ASGI app under uvicorn (1
worker) in its own subprocess, with an async handler reading ``event.data.id``:

* ``sqlite-off`` / ``sqlite-on``: a ``SQLiteStore`` in a fresh file; without an inbox
  (``inbox=False``) / with the default SQLite inbox in the same file.
* ``postgres-off`` / ``postgres-on``: a ``PostgresStore`` on a fresh table; without an
  inbox / with a ``PostgresInbox`` on a fresh table of the same database.

The bodies, the Lua script, the warm-up (every answer 200 ``processed``) and the wrk run
are those of ``bench_http.py``. Rounds are interleaved, the order rotating each round;
the result is the median req/s per contender and the median per-round ratio on/off.
Nothing is asserted: the targets (the inbox costs at most 25 % of req/s on SQLite, 15 %
on PostgreSQL) are printed as met or not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import bench_http
from bench_http import LUA, SECRET, T, cpu_seconds, machine, run_wrk, write_bodies

POSTGRES_URL = os.environ.get(
    "SERVICE_WEBHOOKS_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
CONTENDERS = ("sqlite-off", "sqlite-on", "postgres-off", "postgres-on")
TARGETS = {"sqlite": 0.75, "postgres": 0.85}  # on/off req/s at least


def build_app(kind: str, place: str) -> Any:
    from service_webhooks import SQLiteStore, WebhookReceiver
    from service_webhooks.adapters.asgi import WebhookApp

    backend, _, inbox = kind.partition("-")
    if backend == "sqlite":
        store: Any = SQLiteStore(place)
        receiver = WebhookReceiver(
            SECRET, store=store, clock=lambda: T, inbox=None if inbox == "on" else False
        )
    else:
        from service_webhooks.inbox import PostgresInbox
        from service_webhooks.stores import PostgresStore

        store = PostgresStore(POSTGRES_URL, table=f"{place}_store", max_size=10)
        store.create_schema()
        box: Any = False
        if inbox == "on":
            box = PostgresInbox(POSTGRES_URL, table=f"{place}_inbox")
            box.create_schema()
        receiver = WebhookReceiver(SECRET, store=store, clock=lambda: T, inbox=box)

    @receiver.on("note.created")
    async def note_created(event: Any) -> None:
        _ = event.data.id

    return WebhookApp(receiver)


def serve(kind: str, port: int, place: str) -> None:
    import uvicorn

    uvicorn.run(
        build_app(kind, place),
        host="127.0.0.1",
        port=port,
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


def start_server(kind: str, place: str) -> tuple[subprocess.Popen[bytes], int]:
    port = bench_http.free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port), "--place", place],
        cwd=Path(__file__).resolve().parent.parent,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{kind}: server exited with {process.returncode}")
        try:
            import socket

            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"{kind}: server did not start")


def drop_tables(place: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        for suffix in ("store", "inbox"):
            connection.execute(f"DROP TABLE IF EXISTS {place}_{suffix}".encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (10)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (32)")
    parser.add_argument("--bodies", type=int, default=100_000, help="distinct bodies (100000)")
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="one backend only")
    parser.add_argument("--quick", action="store_true", help="1 round of 3 s")
    parser.add_argument("--serve", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--place", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.place)
        return 0
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install -y wrk)")
    if args.quick:
        args.rounds, args.duration = 1, 3
    contenders = [k for k in CONTENDERS if args.only is None or k.startswith(args.only)]

    print(f"machine: {machine()}")
    print(
        f"wrk: {args.threads} threads, {args.connections} connections, {args.duration} s per "
        f"run; {args.rounds} interleaved rounds; {bench_http.BODY_SIZE} B bodies"
    )
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in contenders}
    with tempfile.TemporaryDirectory(prefix="bench_inbox_") as temporary:
        directory = Path(temporary)
        (directory / "bodies.lua").write_text(LUA, encoding="utf-8")
        write_bodies(directory, args.threads, args.bodies // args.threads)
        for round_index in range(args.rounds):
            shift = round_index % len(contenders)
            for kind in contenders[shift:] + contenders[:shift]:
                if kind.startswith("sqlite"):
                    place = str(directory / f"{kind}-{round_index}.sqlite3")
                else:
                    place = f"bench_inbox_{uuid.uuid4().hex[:12]}"
                process, port = start_server(kind, place)
                try:
                    bench_http.warm_up("adapter", port, round_index)
                    cpu_before = cpu_seconds(process.pid)
                    outcome = run_wrk(
                        port, directory, args.threads, args.connections, args.duration
                    )
                    outcome["cpu_us"] = (
                        (cpu_seconds(process.pid) - cpu_before) / outcome["requests"] * 1e6
                    )
                finally:
                    bench_http.stop_server(process)
                    if kind.startswith("postgres"):
                        drop_tables(place)
                results[kind].append(outcome)
                print(
                    f"  round {round_index + 1} {kind:>12}: {outcome['rps']:7.0f} req/s, "
                    f"p50 {outcome['p50_us'] / 1000:6.2f} ms, p99 {outcome['p99_us'] / 1000:6.2f}"
                    f" ms, non-200 {outcome['non200']}, server CPU {outcome['cpu_us']:.0f} µs/req",
                    file=sys.stderr,
                )

    def median(kind: str, field: str) -> float:
        return statistics.median(r[field] for r in results[kind])

    print()
    print(f"{'server':>12} | {'req/s':>7} | {'p50 ms':>6} | {'p99 ms':>6} | {'CPU µs/req':>10}")
    for kind in contenders:
        print(
            f"{kind:>12} | {median(kind, 'rps'):7.0f} | {median(kind, 'p50_us') / 1000:6.2f} | "
            f"{median(kind, 'p99_us') / 1000:6.2f} | {median(kind, 'cpu_us'):10.0f}"
        )
    bad = sum(r["non200"] + r["socket_errors"] for rs in results.values() for r in rs)
    print(f"non-200 answers or socket errors: {bad}")
    for backend in ("sqlite", "postgres"):
        if f"{backend}-on" not in results:
            continue
        ratios = [
            on["rps"] / off["rps"]
            for on, off in zip(results[f"{backend}-on"], results[f"{backend}-off"], strict=True)
        ]
        ratio = statistics.median(ratios)
        verdict = "met" if ratio >= TARGETS[backend] else "NOT met"
        print(
            f"{backend}: inbox on/off req/s {ratio:.2f} ({min(ratios):.2f}..{max(ratios):.2f});"
            f" target >= {TARGETS[backend]:.2f}: {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
