"""Benchmark of the delivery emulator.

1. Sustained deliveries per second from the emulator into a local receiver: the
   library's own ``WebhookReceiver`` with a ``MemoryStore``, behind ``WebhookApp``,
   under uvicorn (one worker) on 127.0.0.1 in a separate process
   (``tests/helpers/sw_receiver_server.py``). Real sockets, signing and verification on
   every request, throttle off so the pipe is measured, not the limit.
2. Rate limiting, virtual clock: 5,000 events offered at once to one subscription;
   deliveries counted per minute (limit 1000/min) and over every sliding minute.
3. Rate limiting, real time (short): limit 200 per 2 s window on the system clock,
   1,000 events offered at once into an in-memory transport; deliveries counted per
   window.

Run: ``.venv/bin/python bench/bench_delivery.py [--events 5000] [--concurrency 4]``.
Results and the machine go in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service_webhooks.delivery import (
    Emulator,
    Endpoint,
    OutboundEvent,
    RateLimiter,
    Sender,
    StaticResolver,
    SystemClock,
    VirtualClock,
)

SECRET = "whsec-bench-0123456789abcdef0123456789abcdef"
SERVER = Path(__file__).resolve().parent.parent / "tests" / "helpers" / "sw_receiver_server.py"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def notes(count: int) -> list[OutboundEvent]:
    return [
        OutboundEvent("note.created", {"id": f"n-{n}", "author": "b@example.com", "text": "bench"})
        for n in range(count)
    ]


async def throughput(events: int, concurrency: int) -> tuple[float, float, float]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), str(port), SECRET, "0"])
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("receiver did not start") from None
                time.sleep(0.05)
        async with Sender(allow_private_destinations=True, max_connections=concurrency) as sender:
            emulator = Emulator(
                sender, clock=VirtualClock(), concurrency=concurrency, throttle=False
            )
            emulator.add_endpoint(
                Endpoint(f"http://127.0.0.1:{port}/webhooks", SECRET, {"note.created"})
            )
            emulator.publish(notes(events))
            started = time.perf_counter()
            summary = await emulator.run()
            elapsed = time.perf_counter() - started
        assert summary.delivered == events, summary
        return events / elapsed, summary.p50_latency, summary.p99_latency
    finally:
        process.terminate()
        process.wait(timeout=10)


def in_memory_sender() -> Sender:
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    return Sender(transport=transport, resolver=StaticResolver(default=["93.184.215.14"]))


async def rate_virtual(events: int = 5000) -> tuple[list[int], int]:
    async with in_memory_sender() as sender:
        emulator = Emulator(sender, clock=VirtualClock(), concurrency=64)
        emulator.add_endpoint(Endpoint("https://hooks.example.com/", SECRET, {"note.created"}))
        emulator.publish(notes(events))
        await emulator.run()
    times = sorted(e.attempted_at for e in emulator.audit)
    per_minute = [sum(m * 60 <= t < (m + 1) * 60 for t in times) for m in range(events // 1000)]
    worst, start = 0, 0
    for end, t in enumerate(times):
        while times[start] + 60 <= t:
            start += 1
        worst = max(worst, end - start + 1)
    return per_minute, worst


async def rate_real(limit: int = 200, window: float = 2.0, events: int = 1000) -> list[int]:
    clock = SystemClock()
    async with in_memory_sender() as sender:
        emulator = Emulator(
            sender, clock=clock, rate_limiter=RateLimiter(limit, window), concurrency=64
        )
        emulator.add_endpoint(Endpoint("https://hooks.example.com/", SECRET, {"note.created"}))
        origin = clock.now()
        emulator.publish(notes(events))
        await emulator.run()
    times = [e.attempted_at - origin for e in emulator.audit]
    return [sum(k * window <= t < (k + 1) * window for t in times) for k in range(events // limit)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    rate, p50, p99 = asyncio.run(throughput(args.events, args.concurrency))
    print(
        f"throughput: {args.events} events, concurrency {args.concurrency}: "
        f"{rate:.0f} deliveries/s (attempt p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms)"
    )
    per_minute, worst = asyncio.run(rate_virtual())
    error = max(abs(n - 1000) for n in per_minute) / 1000
    print(
        f"rate limit (virtual clock, 1000/min): per minute {per_minute}, "
        f"busiest sliding minute {worst}, largest deviation {error:.2%}"
    )
    per_window = asyncio.run(rate_real())
    error = max(abs(n - 200) for n in per_window) / 200
    print(
        f"rate limit (real time, 200 per 2 s): per window {per_window}, "
        f"largest deviation {error:.2%}"
    )


if __name__ == "__main__":
    main()
