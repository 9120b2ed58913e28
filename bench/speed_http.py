"""Speed targets, HTTP part: requests/s of each adapter against the inline endpoint a user
would hand-roll in the same framework, under the same server, with ``wrk``.

Run from the repository root (needs ``wrk``: ``apt-get install -y wrk``;
``bench/run.py`` runs this and the micro part together)::

    .venv/bin/python bench/speed_http.py             # 3 rounds of 6 s per server
    .venv/bin/python bench/speed_http.py --quick     # 1 round of 2 s

Servers (see ``bench/speed_apps.py``): uvicorn (1 worker) for the ASGI kinds, on h11 and
asyncio, and for the ``@std`` kinds on httptools and uvloop (``uvicorn[standard]``);
gunicorn (sync workers, 2 of them) for Flask and Django. With two or more CPUs the server is
pinned to CPU 0 and wrk (1 thread) to CPU 1 with ``taskset``. Every request is a
distinct signed body (pre-signed into a file, read line by line by wrk's Lua script), so
the idempotency store never answers "duplicate"; a Lua ``response`` callback counts
non-200 answers. Each run starts its server afresh (an empty store), after a warm-up
whose every answer must be 200 (``processed`` for the adapters).

Method: every round runs every server for each body (``order.created`` and
``note.created``, 200 B), in an order rotating from round to round. Ratios are medians
of per-round paired ratios (adapter / inline of the same round and body). The server's
CPU time per request (user + system from ``/proc``, its workers included) is reported
beside requests/s. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from speed_apps import ASGI_KINDS, PATH, SECRET, WSGI_KINDS  # noqa: E402
from speed_micro import make_body  # noqa: E402

from service_webhooks import sign  # noqa: E402

ORG = "org-bench-1"
BODY_SIZE = 200
KINDS = ("order.created", "note.created")
STANDARD_KINDS = tuple(  # the same apps under uvicorn[standard]: httptools and uvloop
    f"{kind}@std"
    for kind in (
        "asgi-async",
        "asgi-middleware",
        "asgi-middleware-empty",
        "starlette-inline",
        "asgi-floor",
        "starlette-floor",
    )
)
SERVERS = ASGI_KINDS + STANDARD_KINDS + WSGI_KINDS
ADAPTERS = (
    "asgi-async",
    "asgi-sync",
    "asgi-middleware",
    "asgi-middleware-sync",
    "asgi-middleware-empty",
    "asgi-sqlite",
    "flask-adapter",
    "flask-adapter-empty",
    "django-adapter",
    "django-adapter-empty",
)
# (row label, contender, baseline)
PAIRS = (
    ("ASGI async handler / inline Starlette", "asgi-async", "starlette-inline"),
    ("ASGI sync handler / inline Starlette", "asgi-sync", "starlette-inline"),
    ("ASGI middleware, async / inline Starlette", "asgi-middleware", "starlette-inline"),
    ("ASGI middleware, sync / inline Starlette", "asgi-middleware-sync", "starlette-inline"),
    ("Flask blueprint / inline Flask", "flask-adapter", "flask-inline"),
    ("Django view / inline Django", "django-adapter", "django-inline"),
    ("ASGI middleware, no 200 body / inline", "asgi-middleware-empty", "starlette-inline"),
    ("Flask blueprint, no 200 body / inline Flask", "flask-adapter-empty", "flask-inline"),
    ("Django view, no 200 body / inline Django", "django-adapter-empty", "django-inline"),
    ("[std] ASGI async handler / inline Starlette", "asgi-async@std", "starlette-inline@std"),
    ("[std] ASGI middleware / inline Starlette", "asgi-middleware@std", "starlette-inline@std"),
    (
        "[std] ASGI middleware, no 200 body / inline",
        "asgi-middleware-empty@std",
        "starlette-inline@std",
    ),
    ("ASGI async / inline Starlette, JSON answer", "asgi-async", "starlette-inline-json"),
    ("ASGI sync / inline Starlette, JSON answer", "asgi-sync", "starlette-inline-json"),
    ("Flask blueprint / inline Flask, JSON answer", "flask-adapter", "flask-inline-json"),
    ("Django view / inline Django, JSON answer", "django-adapter", "django-inline-json"),
    ("SQLite store / MemoryStore (ASGI)", "asgi-sqlite", "asgi-async"),
    ("ceiling: bare Starlette / inline Starlette", "starlette-bare", "starlette-inline"),
    ("ceiling: raw ASGI floor / inline Starlette", "asgi-floor", "starlette-inline"),
    ("[std] ceiling: raw ASGI floor / inline", "asgi-floor@std", "starlette-inline@std"),
    ("ceiling: floor on a Route / inline Starlette", "starlette-floor", "starlette-inline"),
    ("[std] ceiling: floor on a Route / inline", "starlette-floor@std", "starlette-inline@std"),
    ("ceiling: floor view / inline Flask", "flask-floor", "flask-inline"),
    ("ceiling: floor view / inline Django", "django-floor", "django-inline"),
)
WARMUP = 200
BODIES = 250_000  # per envelope: more than the fastest adapter answers in a 6 s run
# (31k requests/s under uvicorn[standard] on an AMD EPYC host: 186k in 6 s)
RESIGN_AFTER = 120.0  # seconds: every server checks the timestamp against its real clock

LUA = r"""
local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  file = io.open(args[1], "r")
  non200 = 0
  wrapped = 0
  headers = {["Content-Type"] = "application/json"}
  -- each wrk thread starts at its own offset (one thread by default)
  for _ = 1, id * tonumber(args[2]) do file:read("*l") end
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


@dataclass
class Settings:
    rounds: int
    duration: int
    bodies: int
    asgi_connections: int = 32
    wsgi_connections: int = 8
    gunicorn_workers: int = 2
    servers: tuple[str, ...] = SERVERS


def is_asgi(server: str) -> bool:
    """Whether ``server`` (``kind`` or ``kind@std``) runs under uvicorn."""
    return server.partition("@")[0] in ASGI_KINDS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinning() -> tuple[list[str], list[str]]:
    """``taskset`` prefixes for the server and for wrk (empty with one CPU or no taskset)."""
    if (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", "0"], ["taskset", "-c", "1"]
    return [], []


def write_bodies(path: Path, kind: str, count: int, tag: int) -> None:
    """``count`` distinct signed bodies, one ``signature<TAB>body`` line each."""
    now = int(time.time())
    with open(path, "wb") as out:
        for index in range(count):
            body = make_body(kind, BODY_SIZE, tag * 10_000_000 + index)
            out.write(sign(body, SECRET, ORG, timestamp=now).encode() + b"\t" + body + b"\n")


def server_command(kind: str, port: int, gunicorn_workers: int) -> list[str]:
    """The command serving ``kind`` on 127.0.0.1:``port``: ``speed_apps.py`` under
    uvicorn, or gunicorn with ``gunicorn_workers`` sync workers (the process's
    ``PYTHONPATH`` holds ``bench/``)."""
    if is_asgi(kind):
        return [sys.executable, str(HERE / "speed_apps.py"), kind, str(port)]
    return [
        str(Path(sys.executable).parent / "gunicorn"),
        "-k", "sync",
        "-w", str(gunicorn_workers),
        "-b", f"127.0.0.1:{port}",
        "--log-level", "warning",
        f"speed_apps:wsgi_app({kind!r})",
    ]  # fmt: skip


def start_server(kind: str, directory: Path, settings: Settings) -> subprocess.Popen[bytes]:
    server_pin, _ = pinning()
    port = free_port()
    cwd = directory / f"cwd-{kind}-{time.monotonic_ns()}"
    cwd.mkdir()  # asgi-sqlite's default store file lands here: fresh for every run
    environment = {**os.environ, "PYTHONPATH": str(HERE)}
    command = server_command(kind, port, settings.gunicorn_workers)
    process = subprocess.Popen(server_pin + command, cwd=cwd, env=environment)
    process.port = port  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{kind}: server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live children (gunicorn workers)."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            with open(f"/proc/{current}/task/{current}/children", encoding="ascii") as kids:
                pending += [int(child) for child in kids.read().split()]
        except OSError:
            continue
    return total


def warm_up(server: str, kind: str, port: int, tag: int) -> None:
    import httpx

    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        for i in range(WARMUP):
            body = make_body(kind, BODY_SIZE, 90_000_000 + tag * WARMUP + i)
            response = client.post(
                PATH,
                content=body,
                headers={
                    "Content-Type": "application/json",
                    "Service-Signature": sign(body, SECRET, ORG),
                },
            )
            if response.status_code != 200:
                raise SystemExit(f"{server}: warm-up got {response.status_code} {response.text}")
            adapter = server.partition("@")[0]
            if adapter not in ADAPTERS:
                continue
            if adapter.endswith("-empty"):  # success_body=False
                if response.content:
                    raise SystemExit(f"{server}: a 200 with a body despite success_body=False")
            elif b'"processed"' not in response.content:
                raise SystemExit(f"{server}: warm-up was not processed: {response.text}")


def run_wrk(server: str, port: int, bodies: Path, lua: Path, settings: Settings) -> dict[str, Any]:
    _, load_pin = pinning()
    connections = settings.asgi_connections if is_asgi(server) else settings.wsgi_connections
    result = subprocess.run(
        [
            *load_pin,
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{settings.duration}s",
            "--timeout",
            "10s",
            "-s",
            str(lua),
            f"http://127.0.0.1:{port}{PATH}",
            "--",
            str(bodies),
            "0",
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


@dataclass
class HttpResult:
    settings: Settings
    runs: dict[tuple[str, str], list[dict[str, Any]]]  # (server, body kind) -> per round

    def median(self, server: str, kind: str, field: str) -> float:
        return float(statistics.median(r[field] for r in self.runs[(server, kind)]))

    def ratios(self, kind: str, server: str, base: str, field: str = "rps") -> list[float]:
        return [
            a[field] / b[field]
            for a, b in zip(self.runs[(server, kind)], self.runs[(base, kind)], strict=True)
        ]

    def ratio(self, kind: str, server: str, base: str, field: str = "rps") -> float:
        return statistics.median(self.ratios(kind, server, base, field))

    def problems(self) -> int:
        return sum(r["non200"] + r["socket_errors"] for rs in self.runs.values() for r in rs)

    def wrapped(self, only: str | None = None) -> int:
        """Times wrk re-sent its bodies to an adapter (or to ``only``), whose store then
        answered "duplicate" (the inline endpoints and floors keep no store: a re-sent
        body costs them the same)."""
        return sum(
            r["wrapped"]
            for (server, _), rs in self.runs.items()
            if (server == only if only else server.partition("@")[0] in ADAPTERS)
            for r in rs
        )


def measure(settings: Settings, log: Callable[[str], None]) -> HttpResult:
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install -y wrk)")
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {
        (server, kind): [] for server in settings.servers for kind in KINDS
    }
    with tempfile.TemporaryDirectory(prefix="speed_http_") as temporary:
        directory = Path(temporary)
        lua = directory / "bodies.lua"
        lua.write_text(LUA, encoding="utf-8")
        files = {kind: directory / f"{kind}.txt" for kind in KINDS}
        signed_at = -1e9
        tag = 0
        for round_index in range(settings.rounds):
            servers = settings.servers
            shift = round_index % len(servers)
            order = servers[shift:] + servers[:shift]
            for kind in KINDS:
                for server in order:
                    if time.monotonic() - signed_at > RESIGN_AFTER:
                        for body_kind, path in files.items():
                            write_bodies(path, body_kind, settings.bodies, tag)
                        signed_at = time.monotonic()
                    tag += 1
                    process = start_server(server, directory, settings)
                    port: int = process.port  # type: ignore[attr-defined]
                    try:
                        warm_up(server, kind, port, tag)
                        before = cpu_seconds(process.pid)
                        outcome = run_wrk(server, port, files[kind], lua, settings)
                        outcome["cpu_us"] = (
                            (cpu_seconds(process.pid) - before) / max(outcome["requests"], 1) * 1e6
                        )
                    finally:
                        stop_server(process)
                    runs[(server, kind)].append(outcome)
                    log(
                        f"  http round {round_index + 1}/{settings.rounds} {kind:<13} "
                        f"{server:<16} {outcome['rps']:7.0f} req/s, p50 "
                        f"{outcome['p50_us'] / 1000:5.2f} ms, CPU {outcome['cpu_us']:4.0f} µs/req"
                        f", non-200 {outcome['non200']}, errors {outcome['socket_errors']}"
                        f", wrapped {outcome['wrapped']}"
                    )
    return HttpResult(settings, runs)


def report(result: HttpResult) -> str:
    s = result.settings
    server_pin, _ = pinning()
    lines = [
        f"HTTP: {s.rounds} interleaved rounds, wrk -t1 {s.duration} s per run "
        f"(-c{s.asgi_connections} uvicorn 1 worker; -c{s.wsgi_connections} gunicorn "
        f"{s.gunicorn_workers} sync workers); {BODY_SIZE} B bodies, {s.bodies} distinct per "
        f"envelope; pinning: {'server CPU 0, wrk CPU 1' if server_pin else 'none'}",
        "",
    ]
    head = (
        f"{'server':<16} {'envelope':<14}| {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'CPU µs/req':>10}"
    )
    lines += [head, "-" * len(head)]
    for server in s.servers:
        for kind in KINDS:
            lines.append(
                f"{server:<16} {kind:<14}| {result.median(server, kind, 'rps'):7.0f} "
                f"{result.median(server, kind, 'p50_us') / 1000:7.2f} "
                f"{result.median(server, kind, 'p99_us') / 1000:7.2f} "
                f"{result.median(server, kind, 'cpu_us'):10.0f}"
            )
    lines += ["", "paired ratios (median over rounds, min..max): req/s; CPU/request"]
    for label, server, base in PAIRS:
        if server not in s.servers or base not in s.servers:
            continue
        for kind in KINDS:
            rps = result.ratios(kind, server, base)
            cpu = result.ratio(kind, server, base, "cpu_us")
            lines.append(
                f"  {label:<44} {kind:<14} {statistics.median(rps):5.2f} "
                f"({min(rps):.2f}..{max(rps):.2f}); CPU {cpu:.2f}"
            )
    lines.append(f"non-200 answers or socket errors, all runs: {result.problems()}")
    if result.wrapped():
        lines.append(
            f"WARNING: wrk re-sent bodies to an adapter {result.wrapped()} times, which "
            "then answered duplicates (raise --bodies)"
        )
    return "\n".join(lines)


def settings_from(args: argparse.Namespace) -> Settings:
    servers = SERVERS
    if args.servers:
        servers = tuple(args.servers.split(","))
        unknown = set(servers) - set(SERVERS)
        if unknown:
            raise SystemExit(f"unknown servers: {', '.join(sorted(unknown))}")
    if args.quick:
        return Settings(args.rounds or 1, args.duration or 2, 50_000, servers=servers)
    return Settings(args.rounds or 3, args.duration or 6, args.bodies, servers=servers)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=None, help="HTTP rounds (3; quick: 1)")
    parser.add_argument("--duration", type=int, default=None, help="s per wrk run (6; quick: 2)")
    parser.add_argument(
        "--bodies", type=int, default=BODIES, help=f"distinct bodies per envelope ({BODIES})"
    )
    parser.add_argument(
        "--servers", default="", help="comma-separated servers to run (default: all)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1 round of 2 s per server")
    add_arguments(parser)
    args = parser.parse_args(argv)
    result = measure(settings_from(args), lambda line: print(line, file=sys.stderr))
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
