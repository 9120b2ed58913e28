"""Speed targets, HTTP part counted in instructions: each server's own CPU instructions
per request under valgrind's callgrind, adapter against inline endpoint.

Run from the repository root (needs valgrind: ``apt-get install -y valgrind``)::

    .venv/bin/python bench/speed_instructions.py                  # every pair below
    .venv/bin/python bench/speed_instructions.py --servers flask-adapter,flask-inline

Why: on a shared machine the requests/s of ``bench/speed_http.py`` move by ±0.1 from
round to round. callgrind counts the instructions the server process executes, which
is the same from run to run whatever else the machine does. It does not count the
kernel's work (system calls, the loopback TCP stack), so the two tell different parts
of the story: a ratio here is user-space work only, and an answer written in two
socket writes instead of one costs the same here.

Method: the servers of ``bench/speed_apps.py`` (uvicorn, 1 worker, for the ASGI kinds;
gunicorn, 1 sync worker, for Flask and Django) run under ``valgrind --tool=callgrind``.
Concurrent client threads (32 keep-alive connections for uvicorn, 8 for gunicorn) send
distinct 200 B ``order.created`` bodies signed at the current time; every answer must
be 200. Each server is run twice, with ``--small`` and ``--large`` requests; the
difference of the two totals (every process of the server summed) over the difference
of the request counts is the instructions per request, start-up and shut-down cancelled
out. A ratio is inline / adapter: above 1, the adapter executes fewer instructions per
request. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from speed_apps import PATH, SECRET  # noqa: E402
from speed_http import BODY_SIZE, ORG, free_port, is_asgi, server_command  # noqa: E402
from speed_micro import make_body  # noqa: E402

from service_webhooks import sign  # noqa: E402

PAIRS = (  # (row label, adapter, inline baseline)
    ("ASGI async (route) / inline Starlette", "asgi-async", "starlette-inline"),
    ("ASGI async (middleware) / inline Starlette", "asgi-middleware", "starlette-inline"),
    ("ASGI sync (middleware) / inline Starlette", "asgi-middleware-sync", "starlette-inline"),
    ("std: ASGI async (route) / inline", "asgi-async@std", "starlette-inline@std"),
    ("std: ASGI async (middleware) / inline", "asgi-middleware@std", "starlette-inline@std"),
    ("std: ceiling, raw ASGI floor / inline", "asgi-floor@std", "starlette-inline@std"),
    ("std: ceiling, floor on a Route / inline", "starlette-floor@std", "starlette-inline@std"),
    ("Flask / inline Flask", "flask-adapter", "flask-inline"),
    ("Django / inline Django", "django-adapter", "django-inline"),
)
SERVERS = tuple(dict.fromkeys(server for _, *pair in PAIRS for server in pair))
_REFS = re.compile(rb"I\s+refs:\s+([\d,]+)")


@dataclass
class Settings:
    small: int = 300
    large: int = 1500
    servers: tuple[str, ...] = SERVERS


def count(server: str, requests: int, directory: Path) -> int:
    """Instructions executed by every process of ``server`` while it starts, answers
    ``requests`` deliveries and stops."""
    port = free_port()
    output = directory / f"callgrind.{server}.{requests}.%p"
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={output}"]
    environment = {**os.environ, "PYTHONPATH": str(HERE)}
    process = subprocess.Popen(
        valgrind + server_command(server, port, gunicorn_workers=1),
        cwd=directory,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(port, process)
        _send(port, requests, connections=32 if is_asgi(server) else 8)
    finally:
        process.send_signal(signal.SIGINT if is_asgi(server) else signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    totals = [int(found.replace(b",", b"")) for found in _REFS.findall(stderr)]
    if not totals:
        raise SystemExit(f"{server}: valgrind printed no count:\n{stderr.decode()[-2000:]}")
    return sum(totals)


def _wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120  # a server under valgrind starts slowly
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("server did not start under valgrind")


def _send(port: int, requests: int, connections: int) -> None:
    """``requests`` distinct signed deliveries over ``connections`` client threads."""
    now = int(time.time())
    bodies = [make_body("order.created", BODY_SIZE, 40_000_000 + i) for i in range(requests)]
    signed = [(body, sign(body, SECRET, ORG, timestamp=now)) for body in bodies]
    failures: list[str] = []

    def client(share: list[tuple[bytes, str]]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            for body, signature in share:
                headers = {"Service-Signature": signature, "Content-Type": "application/json"}
                connection.request("POST", PATH, body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    failures.append(f"{response.status}")
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()  # gunicorn's sync workers close every connection
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=client, args=(signed[index::connections],))
        for index in range(connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{len(failures)} answers were not 200: {sorted(set(failures))}")


def measure(settings: Settings, log: Callable[[str], None]) -> dict[str, float]:
    """Instructions per request of each server."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install -y valgrind)")
    per_request: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="speed_instructions_") as temporary:
        directory = Path(temporary)
        for server in settings.servers:
            small = count(server, settings.small, directory)
            large = count(server, settings.large, directory)
            per_request[server] = (large - small) / (settings.large - settings.small)
            log(f"  {server:<26} {per_request[server] / 1000:8.1f} K instructions/request")
    return per_request


def report(per_request: dict[str, float], settings: Settings) -> str:
    lines = [
        f"Instructions per request (callgrind, user space only; {settings.large} - "
        f"{settings.small} requests, 200 B order.created):",
        "",
    ]
    lines += [f"  {server:<26} {count / 1000:8.1f} K" for server, count in per_request.items()]
    lines += ["", "ratios, inline / adapter (above 1: the adapter executes fewer):"]
    for label, server, base in PAIRS:
        if server in per_request and base in per_request:
            lines.append(f"  {label:<44} {per_request[base] / per_request[server]:5.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--small", type=int, default=300, help="requests of the first run")
    parser.add_argument("--large", type=int, default=1500, help="requests of the second run")
    parser.add_argument("--servers", default="", help="comma-separated servers (default: all)")
    args = parser.parse_args(argv)
    servers = tuple(args.servers.split(",")) if args.servers else SERVERS
    if not 0 < args.small < args.large:
        parser.error("need 0 < --small < --large")
    settings = Settings(args.small, args.large, servers)
    per_request = measure(settings, lambda line: print(line, file=sys.stderr, flush=True))
    print(report(per_request, settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
