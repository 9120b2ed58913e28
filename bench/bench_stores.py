"""Idempotency store throughput: claims per second and p99 claim latency per backend.

Each worker thread claims distinct fresh keys (the receiver's common path: a NEW
claim, then ``complete``), timing every ``claim`` call; ``complete`` runs too, but
only claims are counted. Backends whose server is unreachable are reported as
skipped. Run::

    .venv/bin/python bench/bench_stores.py [--seconds 3] [--workers 1 8]
        [--redis redis://127.0.0.1:6379/0] [--postgres postgresql://postgres@127.0.0.1/test]

Results and the machine they ran on belong in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from service_webhooks.stores import IdempotencyStore, MemoryStore, SQLiteStore

RETENTION = 72 * 3600.0
LEASE = 120.0


@contextmanager
def memory(_: argparse.Namespace) -> Iterator[IdempotencyStore]:
    yield MemoryStore()


@contextmanager
def sqlite(_: argparse.Namespace) -> Iterator[IdempotencyStore]:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "bench.sqlite3", prune_every=0)
        yield store
        store.close()


@contextmanager
def redis_store(args: argparse.Namespace) -> Iterator[IdempotencyStore]:
    import redis

    from service_webhooks.stores._redis import RedisStore

    prefix = f"service_webhooks_bench:{uuid.uuid4().hex}:"
    client = redis.Redis.from_url(args.redis, max_connections=64)
    client.ping()
    store = RedisStore(client, prefix=prefix)
    try:
        yield store
    finally:
        keys = list(client.scan_iter(match=prefix + "*", count=5000))
        for start in range(0, len(keys), 5000):
            client.delete(*keys[start : start + 5000])
        client.close()


@contextmanager
def postgres(args: argparse.Namespace) -> Iterator[IdempotencyStore]:
    import psycopg

    from service_webhooks.stores._postgres import PostgresStore

    table = f"service_webhooks_bench_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(args.postgres, table=table, max_size=8, prune_every=0)
    store.create_schema()
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(args.postgres, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")


BACKENDS: dict[str, Callable[[argparse.Namespace], AbstractContextManager[IdempotencyStore]]] = {
    "memory": memory,
    "sqlite": sqlite,
    "redis": redis_store,
    "postgres": postgres,
}


def run(store: IdempotencyStore, workers: int, seconds: float) -> tuple[float, float, int]:
    """(claims per second, p99 latency in ms, claims) over ``seconds`` of ``workers``."""
    latencies: list[list[float]] = [[] for _ in range(workers)]
    stop = threading.Event()
    barrier = threading.Barrier(workers + 1)

    def work(n: int) -> None:
        mine, run_id = latencies[n], uuid.uuid4().hex
        barrier.wait()
        i = 0
        while not stop.is_set():
            key, i = f"{run_id}-{i}", i + 1
            started = time.perf_counter()
            store.claim(key, "token", LEASE)
            mine.append(time.perf_counter() - started)
            store.complete(key, "token", RETENTION)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    merged = sorted(x for per_thread in latencies for x in per_thread)
    p99 = statistics.quantiles(merged, n=100)[98] if len(merged) > 100 else merged[-1]
    return len(merged) / elapsed, p99 * 1000, len(merged)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument(
        "--redis", default=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = parser.parse_args()
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{args.seconds:g} s per row; claim + complete per key, claims timed"
    )
    print(f"| {'backend':<9}| {'threads':>7} | {'claims/s':>9} | {'p99 ms':>7} | {'claims':>7} |")
    print(f"|{'-' * 10}|{'-' * 9}|{'-' * 11}|{'-' * 9}|{'-' * 9}|")
    for name in args.backends:
        try:
            with BACKENDS[name](args) as store:
                for workers in args.workers:
                    rate, p99, claims = run(store, workers, args.seconds)
                    print(
                        f"| {name:<9}| {workers:>7} | {rate:>9,.0f} | {p99:>7.2f} | {claims:>7} |"
                    )
        except Exception as error:  # a server that is not there
            print(f"| {name:<9}| skipped: {type(error).__name__}: {str(error)[:60]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
