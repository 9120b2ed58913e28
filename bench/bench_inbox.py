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

Besides req/s, each run records the CPU time per request of the server, of wrk and,
when PostgreSQL runs on this machine (its processes readable in ``/proc``), of every
PostgreSQL process. With the three sharing the machine's CPUs, that gives the
**ceiling** printed beside the PostgreSQL ratio: the on/off ratio the inbox would reach
if it cost nothing at all in our process, only the database's own extra work for the
row (``(server_off + wrk_off + pg_off) / (server_off + wrk_off + pg_on)``, medians).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
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


def postgres_cpu_seconds() -> float | None:
    """User + system CPU of every live ``postgres`` process, and of the exited ones its
    postmaster has reaped (Linux ``/proc``); ``None`` when none is visible here."""
    total, seen = 0, False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as stat:
                head, _, rest = stat.read().rpartition(")")
        except OSError:  # exited meanwhile
            continue
        if head.endswith("(postgres"):
            fields = rest.split()
            total += sum(int(field) for field in fields[11:15])  # utime stime cutime cstime
            seen = True
    return total / os.sysconf("SC_CLK_TCK") if seen else None


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
                    wrk_before = children_cpu_seconds()  # wrk is the only child reaped here
                    on_postgres = kind.startswith("postgres")
                    postgres_before = postgres_cpu_seconds() if on_postgres else None
                    outcome = run_wrk(
                        port, directory, args.threads, args.connections, args.duration
                    )
                    postgres_after = postgres_cpu_seconds() if on_postgres else None
                    per_request = 1e6 / outcome["requests"]
                    outcome["cpu_us"] = (cpu_seconds(process.pid) - cpu_before) * per_request
                    outcome["wrk_us"] = (children_cpu_seconds() - wrk_before) * per_request
                    outcome["pg_us"] = (
                        None
                        if postgres_before is None or postgres_after is None
                        else (postgres_after - postgres_before) * per_request
                    )
                finally:
                    bench_http.stop_server(process)
                    if kind.startswith("postgres"):
                        drop_tables(place)
                results[kind].append(outcome)
                print(
                    f"  round {round_index + 1} {kind:>12}: {outcome['rps']:7.0f} req/s, "
                    f"p50 {outcome['p50_us'] / 1000:6.2f} ms, p99 {outcome['p99_us'] / 1000:6.2f}"
                    f" ms, non-200 {outcome['non200']}, CPU µs/req: server {outcome['cpu_us']:.0f},"
                    f" wrk {outcome['wrk_us']:.0f}" + postgres_note(outcome),
                    file=sys.stderr,
                )

    def median(kind: str, field: str) -> float:
        values = [r[field] for r in results[kind] if r.get(field) is not None]
        return statistics.median(values) if values else float("nan")

    print()
    print(
        f"{'server':>12} | {'req/s':>7} | {'p50 ms':>6} | {'p99 ms':>6} | CPU µs/req: "
        f"{'server':>6} | {'wrk':>5} | {'PostgreSQL':>10}"
    )
    for kind in contenders:
        print(
            f"{kind:>12} | {median(kind, 'rps'):7.0f} | {median(kind, 'p50_us') / 1000:6.2f} | "
            f"{median(kind, 'p99_us') / 1000:6.2f} |             {median(kind, 'cpu_us'):6.0f} | "
            f"{median(kind, 'wrk_us'):5.0f} | {cell(median(kind, 'pg_us')):>10}"
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
        if backend == "postgres" and not math.isnan(median("postgres-off", "pg_us")):
            off = sum(median("postgres-off", f) for f in ("cpu_us", "wrk_us", "pg_us"))
            extra = median("postgres-on", "pg_us") - median("postgres-off", "pg_us")
            print(
                f"postgres: the database's own CPU for the row: {extra:+.0f} µs/req; ceiling "
                f"(the inbox free in our process) {off / (off + extra):.2f}"
            )
    return 0


def cell(value: float) -> str:
    """``value`` rounded, or ``-`` for NaN (not measured)."""
    return "-" if math.isnan(value) else f"{value:.0f}"


def postgres_note(outcome: dict[str, Any]) -> str:
    return "" if outcome["pg_us"] is None else f", PostgreSQL {outcome['pg_us']:.0f}"


if __name__ == "__main__":
    sys.exit(main())
