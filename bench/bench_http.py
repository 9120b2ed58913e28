"""HTTP: requests/s and latency of the ASGI adapter vs Starlette endpoints, under wrk.

Run from the repository root (needs ``wrk``: ``apt-get install -y wrk``)::

    .venv/bin/python bench/bench_http.py                 # 3 rounds of 10 s
    .venv/bin/python bench/bench_http.py --rounds 5 --duration 15
    .venv/bin/python bench/bench_http.py --quick         # 1 round of 3 s, a smoke run

Contenders, each served by uvicorn (1 worker, its default HTTP and loop
implementations) in its own subprocess on a free 127.0.0.1 port:

* ``adapter``: ``WebhookApp(receiver)`` at ``/webhooks`` in a Starlette app, with a
  ``MemoryStore`` (every delivery is claimed and completed) and an async handler that
  reads ``event.data.id``. The answer must be 200 ``processed``.
* ``adapter-raw``: the same ``WebhookApp`` served as the whole ASGI app (no Starlette).
* ``starlette-bare``: a Starlette endpoint that returns 200 without reading the body.
* ``starlette-inline``: a Starlette endpoint that reads the body and verifies and
  decodes it by hand (header split, HMAC, base64, ``compare_digest``, timestamp,
  ``json.loads``, one field read): the code one would write without this library.
  It answers an empty 200.

Every request carries a distinct 1 KB signed body (the note id varies), so the
idempotency store never answers "duplicate": the bodies are pre-generated into one file
per wrk thread (signing cannot happen in Lua), and wrk's Lua script reads them line by
line. Each round starts every server afresh (an empty store), in an order that rotates
from round to round, and a Lua ``response`` callback counts every non-200 answer. The
servers' clocks are pinned to the signing time so signatures stay valid all run long.
Nothing is asserted about time: the target is printed as met or not.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
ORG = "org-bench-1"
T = 1_700_000_000
BODY_SIZE = 1024
PATH = "/webhooks"
CONTENDERS = ("adapter", "adapter-raw", "starlette-bare", "starlette-inline")
WARMUP = 300  # requests each fresh server gets (checked for 200) before wrk starts

LUA = r"""
-- each wrk thread reads its own file of "signature<TAB>body" lines, one per request
local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  file = io.open(args[1] .. "/bodies_" .. id .. ".txt", "r")
  non200 = 0
  wrapped = 0
  headers = {["Content-Type"] = "application/json"}
end

function request()
  local line = file:read("*l")
  if line == nil then
    wrapped = wrapped + 1
    file:seek("set", 0)
    line = file:read("*l")
  end
  local tab = line:find("\t", 1, true)
  headers["Service-Signature"] = line:sub(1, tab - 1)
  return wrk.format("POST", "/webhooks", headers, line:sub(tab + 1))
end

function response(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
  end
end

function done(summary, latency, requests)
  local non200_total, wrapped_total = 0, 0
  for _, thread in ipairs(threads) do
    non200_total = non200_total + thread:get("non200")
    wrapped_total = wrapped_total + thread:get("wrapped")
  end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, ' ..
    '"non200": %d, "wrapped": %d, "socket_errors": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    non200_total, wrapped_total, e.connect + e.read + e.write + e.timeout))
end
"""


# -- bodies ---------------------------------------------------------------------------


def make_body(index: int, prefix: str = "note") -> bytes:
    """A ``note.created`` envelope of exactly 1 KB, distinct per ``index``."""
    head = (
        b'{"eventName":"note.created","version":1,"data":{"id":"%s-%09d",'
        b'"author":"ada@example.com","text":"' % (prefix.encode(), index)
    )
    tail = b'"}}'
    return head + b"x" * (BODY_SIZE - len(head) - len(tail)) + tail


def write_bodies(directory: Path, threads: int, per_thread: int) -> None:
    from service_webhooks._signing import sign

    for thread in range(threads):
        with open(directory / f"bodies_{thread}.txt", "wb") as out:
            for i in range(per_thread):
                body = make_body(thread * per_thread + i)
                out.write(sign(body, SECRET, ORG, timestamp=T).encode() + b"\t" + body + b"\n")


# -- the servers (run as: bench_http.py --serve KIND --port N) --------------------------


def build_app(kind: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    if kind.startswith("adapter"):
        from service_webhooks import MemoryStore, WebhookReceiver
        from service_webhooks.adapters.asgi import WebhookApp

        receiver = WebhookReceiver(SECRET, store=MemoryStore(), clock=lambda: T)

        @receiver.on("note.created")
        async def note_created(event: Any) -> None:
            _ = event.data.id  # the handler reads one field

        webhooks = WebhookApp(receiver)
        if kind == "adapter-raw":
            return webhooks
        return Starlette(routes=[Route(PATH, webhooks, methods=["POST"])])

    if kind == "starlette-bare":

        async def bare(request: Request) -> Response:
            return Response(status_code=200)

        return Starlette(routes=[Route(PATH, bare, methods=["POST"])])

    if kind == "starlette-inline":
        key = SECRET.encode()

        async def inline(request: Request) -> Response:
            body = await request.body()
            try:
                fields = dict(
                    pair.split(":", 1) for pair in request.headers["service-signature"].split(",")
                )
                o, t = fields["o"], fields["t"]
                mac = hmac.new(key, body, hashlib.sha256)
                mac.update(f":{o}:{t}".encode())
                if not hmac.compare_digest(mac.digest(), base64.b64decode(fields["v"])):
                    return Response(status_code=401)
                if abs(T - int(t)) > 300:
                    return Response(status_code=401)
                _ = json.loads(body)["data"]["id"]  # the handler reads one field
            except (KeyError, ValueError, TypeError):
                return Response(status_code=400)
            return Response(status_code=200)

        return Starlette(routes=[Route(PATH, inline, methods=["POST"])])

    raise SystemExit(f"unknown server kind {kind!r}")


def serve(kind: str, port: int) -> None:
    import uvicorn

    uvicorn.run(
        build_app(kind),
        host="127.0.0.1",
        port=port,
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


# -- the driver -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(kind: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port)],
        cwd=Path(__file__).resolve().parent.parent,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{kind}: server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"{kind}: server did not start")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def warm_up(kind: str, port: int, round_index: int) -> None:
    """A few hundred distinct deliveries (ids that wrk never sends); all must be 200."""
    import httpx

    from service_webhooks._signing import sign

    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        for i in range(WARMUP):
            body = make_body(round_index * WARMUP + i, prefix="warm")
            response = client.post(
                PATH,
                content=body,
                headers={
                    "Content-Type": "application/json",
                    "Service-Signature": sign(body, SECRET, ORG, timestamp=T),
                },
            )
            if response.status_code != 200:
                raise SystemExit(f"{kind}: warm-up got {response.status_code} {response.text}")
            if kind in ("adapter", "adapter-raw") and b'"processed"' not in response.content:
                raise SystemExit(f"{kind}: warm-up answer was not processed: {response.text}")


def run_wrk(
    port: int, directory: Path, threads: int, connections: int, duration: int
) -> dict[str, Any]:
    result = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{connections}",
            f"-d{duration}s",
            "--timeout",
            "10s",
            "-s",
            str(directory / "bodies.lua"),
            f"http://127.0.0.1:{port}{PATH}",
            "--",
            str(directory),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            data: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
            data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
            return data
    raise SystemExit(f"wrk printed no result:\n{result.stdout}\n{result.stderr}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else what :mod:`platform` knows;
    every bench's machine line starts with it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    cpu = cpu_model()
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split()
    packages = ", ".join(
        f"{name} {version(name)}" for name in ("service-webhooks", "starlette", "uvicorn", "h11")
    )
    extras = [name for name in ("httptools", "uvloop") if _installed(name)]
    return (
        f"{cpu}, {os.cpu_count()} CPUs; Python {platform.python_version()}; {packages}; "
        f"{' '.join(wrk_version[:2])}; uvicorn extras: {', '.join(extras) or 'none (h11, asyncio)'}"
    )


def _installed(name: str) -> bool:
    try:
        version(name)
    except Exception:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (10)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (32)")
    parser.add_argument("--quick", action="store_true", help="1 round of 3 s")
    parser.add_argument(
        "--bodies", type=int, default=200_000, help="distinct signed bodies (200000)"
    )
    parser.add_argument("--serve", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port)
        return 0
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install -y wrk)")
    if args.quick:
        args.rounds, args.duration = 1, 3

    print(f"machine: {machine()}")
    print(
        f"wrk: {args.threads} threads, {args.connections} connections, {args.duration} s "
        f"per run; {args.rounds} interleaved rounds; {BODY_SIZE} B bodies, "
        f"{args.bodies} distinct"
    )
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CONTENDERS}
    with tempfile.TemporaryDirectory(prefix="bench_http_") as temporary:
        directory = Path(temporary)
        (directory / "bodies.lua").write_text(LUA, encoding="utf-8")
        write_bodies(directory, args.threads, args.bodies // args.threads)
        for round_index in range(args.rounds):
            shift = round_index % len(CONTENDERS)
            for kind in CONTENDERS[shift:] + CONTENDERS[:shift]:
                process, port = start_server(kind)
                try:
                    warm_up(kind, port, round_index)
                    cpu_before = cpu_seconds(process.pid)
                    outcome = run_wrk(
                        port, directory, args.threads, args.connections, args.duration
                    )
                    cpu = cpu_seconds(process.pid) - cpu_before
                    outcome["cpu_us"] = cpu / outcome["requests"] * 1e6
                finally:
                    stop_server(process)
                results[kind].append(outcome)
                print(
                    f"  round {round_index + 1} {kind:>16}: {outcome['rps']:8.0f} req/s, "
                    f"p50 {outcome['p50_us'] / 1000:6.2f} ms, p99 {outcome['p99_us'] / 1000:6.2f}"
                    f" ms, non-200 {outcome['non200']}, socket errors {outcome['socket_errors']}"
                    f", wrapped {outcome['wrapped']}, server CPU {outcome['cpu_us']:.0f} µs/req",
                    file=sys.stderr,
                )

    def median(kind: str, field: str) -> float:
        return statistics.median(r[field] for r in results[kind])

    print()
    header = (
        f"{'server':>16} | {'req/s':>8} | {'p50 ms':>7} | {'p99 ms':>7} | "
        f"{'non-200':>7} | {'vs inline':>9} | {'vs bare':>7} | {'CPU µs/req':>10}"
    )
    print(header)
    print("-" * len(header))
    inline_rps, bare_rps = median("starlette-inline", "rps"), median("starlette-bare", "rps")
    for kind in CONTENDERS:
        rps = median(kind, "rps")
        print(
            f"{kind:>16} | {rps:8.0f} | {median(kind, 'p50_us') / 1000:7.2f} | "
            f"{median(kind, 'p99_us') / 1000:7.2f} | "
            f"{sum(r['non200'] + r['socket_errors'] for r in results[kind]):7d} | "
            f"{rps / inline_rps:9.2f} | {rps / bare_rps:7.2f} | {median(kind, 'cpu_us'):10.0f}"
        )
    print("(medians over rounds; CPU µs/req is the server process's user + system time)")
    print("Per round, against starlette-inline of the same round (median, min..max):")
    for kind in ("adapter", "adapter-raw", "starlette-bare"):
        for field, label in (("rps", "req/s"), ("cpu_us", "CPU µs/req")):
            ratios = [
                a[field] / i[field]
                for a, i in zip(results[kind], results["starlette-inline"], strict=True)
            ]
            print(
                f"  {kind:>14} {label:>10} ratio: {statistics.median(ratios):.2f} "
                f"({min(ratios):.2f}..{max(ratios):.2f})"
            )

    bad = sum(r["non200"] + r["socket_errors"] for rs in results.values() for r in rs)
    wrapped = sum(r["wrapped"] for kind in CONTENDERS[:2] for r in results[kind])
    print()
    print(f"non-200 answers or socket errors, all servers: {bad}")
    if wrapped:
        print(f"WARNING: the adapter runs re-sent bodies {wrapped} times (raise --bodies)")
    ratio = median("adapter", "rps") / inline_rps
    print(
        f"Target: adapter req/s >= starlette-inline req/s: {ratio:.2f} -> "
        f"{'met' if ratio >= 1.0 and not bad else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
