"""Fixtures for the scale, fault and Celery tests: real servers on 127.0.0.1.

* ``backend`` (parametrized ``redis`` / ``postgres``): a fresh namespace on the shared
  server (key prefix or table), its store URL, where handler runs are counted, and
  ``counts()`` to read them back; everything is removed afterwards.
* ``serve(env, workers=1)``: run ``scale_app:app`` under uvicorn; stopped afterwards.
* ``throwaway_redis`` / ``throwaway_postgres``: a private server on a free port that
  a test may stop and restart (the shared services are never touched).
* ``deliver(url, deliveries, concurrency)``: POST signed bodies concurrently.

Servers started here are stopped by their own PID only.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from sw_services import POSTGRES_URL, REDIS_URL, answering_redis

from service_webhooks import sign

HERE = Path(__file__).parent
SECRET = "whsec-test-0123456789abcdef0123456789abcdef"
ORG = "o-SCALE-na1"

Unavailable = Callable[[str, str], NoReturn]


def port_is_free() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} within {timeout} s")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


# -- what a delivery looks like ------------------------------------------------------


def note_body(note_id: str) -> bytes:
    """A ``note.created`` body; its text is ``"slow"`` when the id starts with ``slow``."""
    text = b"slow" if note_id.startswith("slow") else b"scale"
    return (
        b'{"eventName":"note.created","version":1,"data":{"id":"%s","author":"a@b.c",'
        b'"text":"%s"}}' % (note_id.encode(), text)
    )


@dataclass
class Answer:
    note_id: str
    status: int  # 0: no answer (connection failed)
    reason: str
    seconds: float = 0.0  # from sending the request to reading the whole answer


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int, body: bytes
) -> tuple[int, str]:
    """One keep-alive HTTP/1.1 POST on an open connection (a minimal client: httpx
    would cost more CPU than the receiver under test on a 2-core machine)."""
    signature = sign(body, SECRET, ORG).encode()
    writer.write(
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
        b"Service-Signature: %s\r\nContent-Length: %d\r\n\r\n%s"
        % (port, signature, len(body), body)
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    reply = json.loads(await reader.readexactly(length))
    return status, str(reply["reason"])


async def _deliver(url: str, note_ids: list[str], concurrency: int, timeout: float) -> list[Answer]:
    port = int(url.rsplit(":", 1)[1].strip("/"))
    queue = list(reversed(note_ids))
    answers: list[Answer] = []

    async def worker() -> None:
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while queue:
            note_id = queue.pop()
            started = time.monotonic()
            try:
                if connection is None:
                    connection = await asyncio.open_connection("127.0.0.1", port)
                status, reason = await asyncio.wait_for(
                    _post(*connection, port, note_body(note_id)), timeout
                )
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                answers.append(Answer(note_id, 0, "transport"))
                if connection is not None:
                    connection[1].close()
                connection = None
                continue
            answers.append(Answer(note_id, status, reason, time.monotonic() - started))
        if connection is not None:
            connection[1].close()
            with contextlib.suppress(OSError):
                await connection[1].wait_closed()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answers


@pytest.fixture
def deliver() -> Callable[..., list[Answer]]:
    """``deliver(url, note_ids, concurrency=32, timeout=15) -> [Answer]`` (any order)."""

    def run(
        url: str, note_ids: list[str], concurrency: int = 32, timeout: float = 15
    ) -> list[Answer]:
        return asyncio.run(_deliver(url, note_ids, concurrency, timeout))

    return run


# -- the app under uvicorn -------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """``serve(env, workers=1, app="scale_app:app") -> Server`` (modules in this folder)."""
    servers: list[Server] = []

    def start(env: dict[str, str], workers: int = 1, app: str = "scale_app:app") -> Server:
        port = port_is_free()
        command = [sys.executable, "-m", "uvicorn", app, "--app-dir", str(HERE)]
        command += ["--port", str(port), "--log-level", "error", "--no-access-log"]
        if workers > 1:
            command += ["--workers", str(workers)]
        process = subprocess.Popen(command, env={**os.environ, **env})
        server = Server(process, port)
        servers.append(server)
        wait_for_port(port, process)
        return server

    yield start
    for server in servers:
        stop(server.process)


# -- shared services: a fresh namespace per test -----------------------------------------


@dataclass
class Backend:
    name: str
    store_url: str
    count_target: str
    counts: Callable[[], dict[str, int]]
    cleanups: list[Callable[[], None]] = field(default_factory=list)


def _redis_backend(unavailable: Unavailable, url: str = REDIS_URL) -> Backend:
    client = answering_redis(unavailable, url)
    run = uuid.uuid4().hex
    prefix, counter = f"service_webhooks_test:{run}:", f"service_webhooks_test:{run}:runs"

    def counts() -> dict[str, int]:
        return {k.decode(): int(v) for k, v in client.hgetall(counter).items()}

    def clean() -> None:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
        client.close()

    backend = Backend("redis", f"{REDIS_URL}?prefix={prefix}", f"{url}#{counter}", counts)
    backend.cleanups.append(clean)
    return backend


def _postgres_backend(unavailable: Unavailable, url: str = POSTGRES_URL) -> Backend:
    import psycopg

    from service_webhooks.stores._postgres import PostgresStore

    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=2)
    except psycopg.Error as error:
        unavailable(f"PostgreSQL at {url}", type(error).__name__)
    run = uuid.uuid4().hex[:16]
    table, runs = f"sw_scale_{run}", f"sw_scale_runs_{run}"
    store = PostgresStore(url, table=table)
    store.create_schema()
    store.close()
    admin.execute(f"CREATE TABLE {runs} (note_id text NOT NULL)")

    def counts() -> dict[str, int]:
        rows = admin.execute(f"SELECT note_id, count(*) FROM {runs} GROUP BY note_id")  # noqa: S608
        return {str(note_id): int(count) for note_id, count in rows}

    def clean() -> None:
        admin.execute(f"DROP TABLE IF EXISTS {table}, {runs}")
        admin.close()

    backend = Backend("postgres", f"{url}?table={table}", f"{url}#{runs}", counts)
    backend.cleanups.append(clean)
    return backend


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest, unavailable: Unavailable) -> Iterator[Backend]:
    make = _redis_backend if request.param == "redis" else _postgres_backend
    made = make(unavailable)
    yield made
    for clean in made.cleanups:
        clean()


# -- throwaway servers a test may stop ---------------------------------------------------


@dataclass
class Throwaway:
    """A private store server: ``stop()`` and ``start()`` it at will."""

    url: str
    start: Callable[[], None]
    stop: Callable[[], None]
    extra: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def throwaway_redis(unavailable: Unavailable) -> Iterator[Throwaway]:
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server", "not installed")
    port = port_is_free()
    state: dict[str, subprocess.Popen[bytes] | None] = {"process": None}

    def start() -> None:
        command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no", "--logfile", ""]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
        state["process"] = process
        wait_for_port(port, process)

    def halt() -> None:
        process = state["process"]
        if process is not None:
            stop(process, signal.SIGKILL)
            state["process"] = None

    start()
    yield Throwaway(f"redis://127.0.0.1:{port}/0", start, halt)
    halt()


def _postgres_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


@pytest.fixture
def throwaway_postgres(unavailable: Unavailable) -> Iterator[Throwaway]:
    binaries = _postgres_binaries()
    if binaries is None:
        unavailable("PostgreSQL server binaries", "no /usr/lib/postgresql/*/bin/pg_ctl")
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        runuser = shutil.which("runuser")
        if runuser is None:
            unavailable("runuser", "needed to run initdb as the postgres user")
        as_postgres = [runuser, "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="sw-pg-"))
    data = root / "data"
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    port = port_is_free()
    initdb = [*as_postgres, str(binaries / "initdb"), "-D", str(data), "-U", "postgres"]
    initdb += ["--auth=trust", "--no-sync", "-E", "UTF8"]
    subprocess.run(initdb, check=True, capture_output=True)
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [*as_postgres, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(root / "log")]

    def start() -> None:
        subprocess.run([*pg_ctl, "-o", options, "-w", "start"], check=True, capture_output=True)

    def halt() -> None:
        subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True)

    start()
    yield Throwaway(f"postgresql://postgres@127.0.0.1:{port}/postgres", start, halt)
    halt()
    shutil.rmtree(root, ignore_errors=True)
